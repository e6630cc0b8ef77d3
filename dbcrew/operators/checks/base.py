"""The skeleton every check shares, written once: registration, gathering findings, coverage.

A check body is a generator over the workspace: it yields its findings, and what it looked at is
either declared with the check (`looked_at`, when it is always the same) or returned by the body as
a `Coverage` (when it depends on what the body read, or the body could not see everything).
`@check` registers the body as a tasker operator of the checks category and turns it into the
Observation the crew records, with the check's own name as the findings' source, so a body holds
only its judgement.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from dbcrew.artifacts import Artifact
from dbcrew.models import Finding, Role, Severity
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.statistics_age import cold_cache, restart_before_window, young_counters
from dbcrew.vocabulary import Category, FindingCode


@dataclass(frozen=True)
class Coverage:
    """What a check judged (for its summary), what it could not see (coverage says 'ran, partial'),
    and the codes it could not judge at all this time (history keeps their earlier findings)."""

    looked_at: str
    partial: str = ""
    unjudged: tuple[FindingCode, ...] = ()


Judgement = Generator[Finding, None, Coverage | None]
CheckBody = Callable[[OperatorContext], Judgement]
Check = Callable[[OperatorContext], Observation]


def check(
    *,
    needs: tuple[Artifact, ...],
    codes: tuple[FindingCode, ...],
    uses: tuple[Artifact, ...] = (),
    looked_at: str = "",
    counted: tuple[FindingCode, ...] = (),
    since_start: tuple[FindingCode, ...] = (),
) -> Callable[[CheckBody], Check]:
    """Register `body` as the check operator of its name; its docstring is what the planner reads.

    `needs` are the workspace tables it cannot run without, `uses` those it reads when the plan
    has them, `codes` the finding codes it can emit, `looked_at` its coverage when the body
    returns none, `counted` the codes it judges by cumulative counters: while the target's
    counters are younger than `counters_min_age_seconds` (dbcrew/operators/statistics_age.py) the check
    is partial, with the reason, and those codes are unjudged; `since_start` the codes judged on
    what a server start empties (the cache): when the server started less than
    `server_warm_up_seconds` before the review, those are unjudged, and when the window followed a
    restart during the run, those and the counted ones are.
    """

    def register(body: CheckBody) -> Check:
        def run(ctx: OperatorContext) -> Observation:
            findings, coverage = _gather(body(ctx))
            if coverage is None:
                if not looked_at:
                    raise TypeError(
                        f"check {body.__name__} returned no coverage and declares no looked_at"
                    )
                coverage = Coverage(looked_at)
            return _observe(body.__name__, findings, _aged(ctx, coverage, counted, since_start))

        run.__name__, run.__qualname__, run.__doc__, run.__module__ = (
            body.__name__,
            body.__qualname__,
            body.__doc__,
            body.__module__,
        )
        return operator(
            role=Role.TASKER, category=Category.CHECKS, needs=needs, uses=uses, checks=codes
        )(run)

    return register


def _aged(
    ctx: OperatorContext,
    coverage: Coverage,
    counted: tuple[FindingCode, ...],
    since_start: tuple[FindingCode, ...],
) -> Coverage:
    """The coverage, partial and with codes unjudged when the counters are too young, the server
    just started or the window followed a restart during the run (dbcrew/operators/statistics_age.py)."""
    young = (
        young_counters(ctx.brief, ctx.settings.thresholds.counters_min_age_seconds)
        if counted
        else None
    )
    restart = restart_before_window(ctx) if counted or since_start else None
    # A clean restart before the probe keeps the counters (young_counters judges their age), not the cache.
    cold = cold_cache(ctx) if since_start and not restart else None
    if not young and not restart and not cold:
        return coverage
    unjudged = (
        *coverage.unjudged,
        *(counted if young or restart else ()),
        *(since_start if restart or cold else ()),
    )
    return Coverage(
        coverage.looked_at,
        "; ".join(p for p in (restart, cold, young, coverage.partial) if p),
        tuple(dict.fromkeys(unjudged)),
    )


def _gather(judgement: Judgement) -> tuple[list[Finding], Coverage | None]:
    findings = []
    while True:
        try:
            findings.append(next(judgement))
        except StopIteration as done:
            return findings, done.value


def _observe(source: str, findings: list[Finding], coverage: Coverage) -> Observation:
    problems = sum(1 for f in findings if f.is_problem)
    return Observation(
        summary=f"{source}: {len(findings)} findings ({problems} problems) over {coverage.looked_at}",
        findings=[f.model_copy(update={"source": source}) for f in findings],
        partial=coverage.partial,
        unjudged=list(coverage.unjudged),
    )


def severity_for(
    value: float, warning: float, critical: float, *, higher_is_worse: bool = True
) -> Severity | None:
    """None when the value is within bounds."""
    if higher_is_worse:
        if value >= critical:
            return Severity.CRITICAL
        if value >= warning:
            return Severity.WARNING
        return None
    if value <= critical:
        return Severity.CRITICAL
    if value <= warning:
        return Severity.WARNING
    return None


def rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in values.items()}
