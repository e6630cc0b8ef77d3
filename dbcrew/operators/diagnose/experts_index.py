"""Which expert owns each root-cause code, read from the knowledge base (the codes we diagnose)."""

from __future__ import annotations

from dbcrew.operators.knowledge import knowledge_base


def experts_by_code() -> dict[str, str]:
    return {c.code: c.expert for c in knowledge_base().chunks}
