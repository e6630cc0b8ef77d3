"""Render a prompt template with its context. Text from the database arrives already JSON-encoded.

The prompts render through the kernel's one Jinja environment (dbcrew.templating) as plain text:
their quoting is the fence filters below, never HTML escaping. That environment drops the newline
after a block tag, so a tag whose newline belongs to the prompt ends in `+%}`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dbcrew import templating

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


templating.add_templates(
    "prompts", HERE, {"tojson_pretty": tojson_pretty, "fence_safe": fence_safe}
)


def render(template: str, context: dict[str, Any]) -> str:
    return templating.render(f"prompts/{template}", context)
