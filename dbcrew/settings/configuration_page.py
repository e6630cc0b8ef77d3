"""docs/configuration.md, rendered from `Environment` (a unit test checks the page is its rendering)."""

from __future__ import annotations

from dbcrew.settings.environment import Environment, variable
from dbcrew.settings.in_words import shown_default, takes


def configuration_markdown() -> str:
    """docs/configuration.md: every `Environment` variable with its type, default and meaning."""
    rows = [
        f"| `{variable(name)}` | {takes(field)} | {shown_default(field.default)} | {field.description} |"
        for name, field in Environment.model_fields.items()
    ]
    return "\n".join(
        [
            "# Configuration",
            "",
            "dbcrew reads these environment variables; each is a field of `dbcrew.settings.environment.Environment`,"
            " the one place that reads them, and this page is generated from it"
            " (`python -m dbcrew.settings > docs/configuration.md`; a unit test checks the two agree)."
            " An empty variable counts as unset. A value its setting cannot take stops the command with"
            " one line naming the variable and what it takes (exit 2). Secrets are not among them: the LLM"
            " endpoint's key is OPENAI_API_KEY and a target's password PGPASSWORD (or ~/.pgpass), which the"
            " CLI keeps out of the processes it starts. What one review may do (its window, thresholds,"
            " recovery switches) is given per run, not here: `dbcrew review --help`.",
            "",
            "| variable | type | default | description |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )
