"""What the target did while a run read it: a restart, a connection lost and regained.

A review that waited out an outage and went on is not a full review: the server's start time read
again at the end of the run (later than the probe's: it restarted), and the tasks whose session
waited through refused connections before it resumed (`TaskOutcome.interrupted`: their window
spans the outage), say so. The report's
summary and `partial` name it, and the checks the outage touched (their task, or a task producing
their inputs, was interrupted) are partial with every code unjudged: history keeps their earlier
findings. Judging the window after a restart (a cold cache) is the checks' own rule
(dbcrew/operators/statistics_age.py `restart_before_window`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import TYPE_CHECKING

from dbcrew.models.catalogue import CatalogueEntry
from dbcrew.models.report import CoverageEntry, CoverageStatus
from dbcrew.operators.collect.probe import server_started_at
from dbcrew.vocabulary import TaskStatus

if TYPE_CHECKING:  # the run imports the reporter's history, which imports the reporter
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.crew.run import ReviewResult

# pg_postmaster_start_time() is one value per server start (to the microsecond): read twice, it differs
# only after a restart, which takes well under a second.
SAME_START = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Outage:
    """What happened to the target during the run (`note`), and the task ids it interrupted."""

    note: str
    interrupted: frozenset[str]


def outage_of(run: RunContext, review: ReviewResult, *, gone: bool) -> Outage | None:
    """The run's outage, None when the server neither restarted nor dropped a task's connection.
    `gone`: a task already failed because the target stayed unreachable (the report says so)."""
    probed = review.init.brief.server_started_at
    now = server_started_at(run.target)
    interrupted = frozenset(
        task
        for task, outcome in review.result.state.outcomes.items()
        if outcome.status is TaskStatus.DONE and outcome.interrupted
    )
    parts = []
    if now is None and not gone:
        parts.append("the target did not answer at the end of the review")
    elif now is not None and probed is not None and now > probed + SAME_START:
        parts.append(
            f"the target restarted during the review (its server started at"
            f" {now.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC, after the review's probe)"
        )
    if interrupted:
        parts.append(
            f"the target refused connections while {len(interrupted)} task(s) waited for it"
            f" ({', '.join(sorted(interrupted))}): their window spans the outage"
        )
    return Outage("; ".join(parts), interrupted) if parts else None


def producers_of(check: CatalogueEntry, ops: list[CatalogueEntry]) -> list[str]:
    """The operators producing what `check` needs or uses."""
    inputs = set(check.needs) | set(check.uses)
    return [op.name for op in ops if op.name != check.name and inputs & set(op.produces)]


def touched(
    coverage: list[CoverageEntry], outage: Outage, ops: list[CatalogueEntry]
) -> list[CoverageEntry]:
    """The coverage with each check that ran on interrupted reads partial, every code unjudged."""
    by_name = {op.name: op for op in ops}
    entries = []
    for entry in coverage:
        op = by_name.get(entry.check)
        hit = (
            op is not None
            and entry.status is CoverageStatus.RAN
            and bool({op.name, *producers_of(op, ops)} & outage.interrupted)
        )
        if not hit:
            entries.append(entry)
            continue
        assert op is not None  # hit implies it
        reason = "; ".join(r for r in (entry.reason, f"partial: {outage.note}") if r)
        unjudged = list(dict.fromkeys([*entry.unjudged, *op.checks]))
        entries.append(entry.model_copy(update={"reason": reason, "unjudged": unjudged}))
    return entries
