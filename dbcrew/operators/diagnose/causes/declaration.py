"""What a root cause of the diagnosis is, declared once: `DeclaredCause`, registered by `@cause`.

One declaration holds everything the diagnosis knows of a cause: its code (dbcrew/vocabulary.py,
docs/finding-codes.md), the expert that judges it, its criterion, the metrics that corroborate it
and those (with the alert's words) that call its expert in, the thresholds its criterion reads, the
time it explains (attribution.py's `CauseTime`), the causes it yields to (`Conflict`), whether it names
a saturated resource rather than the work, and its knowledge chunk (dbcrew/knowledge/). The tables
the diagnosis consumes (EXPERTS, EXPERT_SIGNALS, CAUSE_TIME, CONFLICTS, RESOURCES,
dbcrew/operators/diagnose/experts.py) are derived from the declarations, so a cause is added in
one place (docs/contributing.md, "Add a root cause").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from dbcrew.operators.diagnose.attribution import QUOTED_STATEMENTS, CauseTime, work_share
from dbcrew.operators.diagnose.candidates import Candidate, Facts, Proposal
from dbcrew.operators.window.metrics import Family, Metric
from dbcrew.settings.diagnosis import DiagnosisThresholds
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import Cause


@dataclass(frozen=True)
class Expert:
    """One expert of the team (D-Bot's roles): its name, and the description its operator
    (`expert_NAME`, dbcrew/operators/diagnose/steps.py) gives the planner. Its causes are the ones
    declared for it; the metrics and alert words that call it in are theirs."""

    name: str
    doc: str


Criterion = Callable[[Facts], Proposal | None]


class FromPlans:
    """The criterion of a plan cause: a judgement of a heavy statement's plan
    (dbcrew/operators/diagnose/judgements.py) names the cause, as strong as the statement's share of
    the window (`plan_candidates`)."""

    def __repr__(self) -> str:
        return "FROM_PLANS"


FROM_PLANS: Final = FromPlans()

Holds = Callable[[Candidate, Candidate, Facts], bool]


class Boundary(IntEnum):
    """What tells a cause from the one it yields to; the cross review applies the conflicts in this
    order (one rule's drop can make a later one moot)."""

    # The writes' own commits flushed in batches: the flushes are the workload's WAL, not commit pressure.
    BATCHED_FLUSHES = 1
    # Writes committed a few rows at a time, and the flushes of those commits: one mechanism where the
    # commits' flushes explain more of the time than the writes (explicit transactions, whose flush is
    # sampled under COMMIT, not under a write): the writes are dropped, the commit rate is theirs. Where the
    # writes explain as much (an autocommit write's flush is sampled under its own text, so it counts for
    # both), both are named, the writes first (`_work_before_its_resource`).
    SAME_COMMITS = 2
    # Measured by time: the flush waits are the commit pressure's, the writes' own work the workload's,
    # the lock waits the contention's; each pair is named in order of the time it explains, and the
    # rule only stands in where the time was not measured (a past interval from Prometheus's counters).
    TIME = 3
    # A boundary the time cannot draw: both causes explain the same statements' time.
    SAME_STATEMENTS = 4


@dataclass(frozen=True)
class Conflict:
    """The challenged cause is the same symptom as the kept one seen from another angle: dropped when
    `holds` (where the boundary is the time, only when the time did not measure both)."""

    kept: Cause
    challenged: Cause
    holds: Holds
    boundary: Boundary

    @property
    def by_time(self) -> bool:
        """Whether the time attribution draws this boundary where it measured both causes."""
        return self.boundary in (Boundary.TIME, Boundary.SAME_COMMITS)


@dataclass(frozen=True)
class YieldsTo:
    """As declared on the challenged cause: it yields to `kept` when `holds`."""

    kept: Cause
    holds: Holds
    boundary: Boundary


@dataclass(frozen=True)
class DeclaredCause:
    """A root cause, declared once (see the module's docstring)."""

    code: Cause
    expert: Expert
    criterion: Criterion | FromPlans
    indicators: tuple[Metric, ...]  # metrics whose abnormality corroborates it (the cross review)
    signals: tuple[
        Metric | Family, ...
    ]  # metrics (or families) whose abnormality calls its expert in
    words: tuple[str, ...]  # an alert's words that call its expert in
    thresholds: tuple[
        str, ...
    ]  # the fields of `Thresholds` (or its `diagnosis`) its criterion reads
    knowledge: str | None  # its chunk's name in dbcrew/knowledge/ (the solution); None: none yet
    time: CauseTime = QUOTED_STATEMENTS
    yields_to: tuple[YieldsTo, ...] = ()
    resource: bool = False  # names a saturated resource or mechanism rather than the work

    def conflicts(self) -> list[Conflict]:
        return [Conflict(y.kept, self.code, y.holds, y.boundary) for y in self.yields_to]

    def candidate(self, proposal: Proposal) -> Candidate:
        return Candidate(
            code=self.code,
            expert=self.expert.name,
            strength=proposal.strength,
            evidence=proposal.evidence,
            indicators=[m.name for m in self.indicators],
            objects=proposal.objects,
        )


DECLARED: list[DeclaredCause] = []  # every cause, in the order of declaration (import order)

_THRESHOLDS = set(Thresholds.model_fields) | set(DiagnosisThresholds.model_fields)


def declare(declared: DeclaredCause) -> DeclaredCause:
    """Register a cause; a code declared twice or a threshold that does not exist fails the import."""
    if any(d.code == declared.code for d in DECLARED):
        raise ValueError(f"root cause {declared.code} is declared twice")
    unknown = sorted(set(declared.thresholds) - _THRESHOLDS)
    if unknown:
        raise ValueError(
            f"root cause {declared.code} reads thresholds that do not exist: {', '.join(unknown)}"
        )
    DECLARED.append(declared)
    return declared


def cause(
    code: Cause,
    expert: Expert,
    *,
    indicators: tuple[Metric, ...],
    signals: tuple[Metric | Family, ...],
    words: tuple[str, ...],
    thresholds: tuple[str, ...],
    knowledge: str | None,
    time: CauseTime = QUOTED_STATEMENTS,
    yields_to: tuple[YieldsTo, ...] = (),
    resource: bool = False,
) -> Callable[[Criterion], Criterion]:
    """Declare the decorated function as the criterion of the cause `code` (see `DeclaredCause`)."""

    def register(criterion: Criterion) -> Criterion:
        declare(
            DeclaredCause(
                code=code,
                expert=expert,
                criterion=criterion,
                indicators=indicators,
                signals=signals,
                words=words,
                thresholds=thresholds,
                knowledge=knowledge,
                time=time,
                yields_to=yields_to,
                resource=resource,
            )
        )
        return criterion

    return register


def plan_candidates(facts: Facts, causes: list[DeclaredCause]) -> list[Candidate]:
    """One candidate per cause from the heaviest statement's plan judgements (dbcrew/operators/diagnose/heavy_statements.py),
    as strong as the statement's share of the window's statement time: the statement, its plan node,
    the numbers (per call and the plan's), and what the judgement rests on. One pass over the plans
    for all of an expert's plan causes, in the order the judgements name them."""
    levels = facts.thresholds.diagnosis
    declared = {c.code: c for c in causes}
    out: dict[Cause, Candidate] = {}
    for plan in facts.plans:
        # The larger of its share of the statement time and of the work done (sampled sessions on the
        # CPU or reading): a queue of lock waiters inflates the first, not the second.
        work = work_share(facts.window, plan.query)
        share = max(plan.share, work or 0.0)
        if share < levels.query_share:
            continue
        for issue in (i for i in plan.issues if i.code in declared):
            found = out.get(issue.code)
            if found is None or found.strength < share / levels.query_share:
                out[issue.code] = declared[issue.code].candidate(
                    Proposal(
                        strength=share / levels.query_share,
                        evidence={
                            "queryid": plan.queryid,
                            "query": plan.query[:300],
                            "share_of_statement_time": round(plan.share, 2),
                            **({"share_of_work": round(work, 2)} if work is not None else {}),
                            "plan": issue.detail,
                            "plan_node": issue.node,
                            "numbers": issue.numbers,
                            "remarks": plan.remarks,
                        },
                        objects=issue.relations,
                    )
                )
    return list(out.values())
