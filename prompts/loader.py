"""Render a prompt template with its context. Text from the database arrives already JSON-encoded."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

HERE = Path(__file__).parent


# Database and document text sits between <data> and </data>; a name holding "</data>" must not
# close the fence early and turn what follows into instructions. JSON may spell < > & as \u escapes
# (the value is unchanged for the model); raw text gets its fence tags defused.
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_FENCE_TAG = re.compile(r"<(\s*/?\s*data)", re.IGNORECASE)


def tojson_pretty(value: Any) -> str:
    text = json.dumps(value, indent=1, default=str, sort_keys=True)
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def fence_safe(text: str) -> str:
    """Raw text for inside a <data> fence: any <data> or </data> it holds becomes &lt;data> / &lt;/data>."""
    return _FENCE_TAG.sub(r"&lt;\1", text)


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["tojson_pretty"] = tojson_pretty
    env.filters["fence_safe"] = fence_safe
    return env


def render(template: str, context: dict[str, Any]) -> str:
    return _env().get_template(template).render(**context)
