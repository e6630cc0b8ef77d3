"""Observations too long to show, kept whole under a snapshot key (RCAgent's observation snapshots).

The one mechanism for long observations, for the diagnosis's experts and for `dbcrew ask` alike: a
text longer than the caller's limit is shown as its head and a key, the `expand` tool pages through
the whole by key, and with a `store` every kept text is written into a workspace too (under
`prefix` + key), so a report or an answer can refer a reader to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Snapshots:
    store: Callable[[str, str], object] | None = None
    prefix: str = "llm_snapshot_"
    bodies: dict[str, str] = field(default_factory=dict)

    def keep(self, text: str) -> str:
        """The key `text` is kept under (the same text keeps its first key)."""
        for key, body in self.bodies.items():
            if body == text:
                return key
        key = f"obs-{len(self.bodies) + 1}"
        self.bodies[key] = text
        if self.store is not None:
            self.store(self.stored_key(key), text)
        return key

    def stored_key(self, key: str) -> str:
        """Where the store holds the snapshot `key`."""
        return f"{self.prefix}{key}"

    def show(self, text: str, limit: int) -> tuple[str, str | None]:
        """(`text` as shown within `limit` characters, its key when it was cut); 0: never cut."""
        if not limit or len(text) <= limit:
            return text, None
        key = self.keep(text)
        return (
            f"{text[:limit]} ... [cut: {len(text) - limit} more characters;"
            f" call expand with key {key!r} and offset {limit} to read on]"
        ), key

    def expand(self, key: str, offset: int, limit: int) -> str:
        """The snapshot `key` from `offset`, at most `limit` characters (0: to its end). ValueError for an unknown key."""
        body = self.bodies.get(key)
        if body is None:
            raise ValueError(f"no snapshot {key!r}; keys: {', '.join(self.bodies) or 'none yet'}")
        end = offset + (limit or len(body))
        more = (
            f" ... [{len(body) - end} more characters: expand {key!r} from offset {end}]"
            if end < len(body)
            else ""
        )
        return body[offset:end] + more
