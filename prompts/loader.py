"""Render a prompt template with its context. Text from the database arrives already JSON-encoded."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

HERE = Path(__file__).parent


@lru_cache(maxsize=1)
def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    env.filters["tojson_pretty"] = lambda value: json.dumps(value, indent=1, default=str, sort_keys=True)
    return env


def render(template: str, context: dict[str, Any]) -> str:
    return _env().get_template(template).render(**context)
