"""The experts and what the diagnosis consumes of the causes, derived from their declarations.

Each root cause is declared once, in the module of its family under dbcrew/operators/diagnose/causes/
(`DeclaredCause`: its code, expert, criterion, signals, thresholds, time, conflicts, knowledge). An
expert is a pure function of `Facts` (window, baseline, abnormal metrics, statement plans, the run's
thresholds) that proposes its causes whose criterion holds, so it is testable on its own and cheap to
run; the cross review then weighs the candidates. `TEAM` is the experts' order (D-Bot's roster): the
order their candidates are gathered in, and their operators are registered in.
"""

from __future__ import annotations

from collections.abc import Callable

from dbcrew.operators.diagnose.attribution import CauseTime
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.causes import concurrency, maintenance, query, resources, workload
from dbcrew.operators.diagnose.causes.declaration import (
    DECLARED,
    Conflict,
    DeclaredCause,
    Expert,
    FromPlans,
    plan_candidates,
)
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.vocabulary import Cause

TEAM: tuple[Expert, ...] = (
    resources.CPU,
    resources.MEMORY,
    resources.IO,
    workload.WORKLOAD,
    query.QUERY,
    concurrency.LOCKS,
    query.INDEX,
    concurrency.CONFIGURATION,
    maintenance.VACUUM,
)


def causes_of(expert: Expert) -> list[DeclaredCause]:
    """The causes declared for `expert`, in the order of declaration."""
    return [c for c in DECLARED if c.expert == expert]


def _undeclared_experts() -> list[str]:
    return sorted({c.expert.name for c in DECLARED} - {e.name for e in TEAM})


if _undeclared_experts():
    raise ValueError(f"causes declared for experts not on the TEAM: {_undeclared_experts()}")

# Every declared cause, the team's order (each expert's causes in their order of declaration).
CAUSES: tuple[DeclaredCause, ...] = tuple(c for e in TEAM for c in causes_of(e))

ExpertFn = Callable[[Facts], list[Candidate]]


def _judge(causes: list[DeclaredCause]) -> ExpertFn:
    """An expert's judgement: its plan causes from one pass over the heavy statements' plans first, then
    each cause whose criterion holds, in the order of declaration."""
    planned = [c for c in causes if isinstance(c.criterion, FromPlans)]

    def judge(facts: Facts) -> list[Candidate]:
        out = plan_candidates(facts, planned) if planned else []
        for declared in causes:
            if isinstance(declared.criterion, FromPlans):
                continue
            proposal = declared.criterion(facts)
            if proposal is not None:
                out.append(declared.candidate(proposal))
        return out

    return judge


EXPERTS: dict[str, ExpertFn] = {e.name: _judge(causes_of(e)) for e in TEAM}


def _union(parts: list[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for part in parts for item in part))


# Which metrics (prefixes) and alert words call each expert in: D-Bot's role assignment, as data (the
# union of its causes').
EXPERT_SIGNALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    e.name: (
        _union([tuple(s.name for s in c.signals) for c in causes_of(e)]),
        _union([c.words for c in causes_of(e)]),
    )
    for e in TEAM
}

# Which of the window's active samples each cause explains (attribution.cause_time).
CAUSE_TIME: dict[Cause, CauseTime] = {c.code: c.time for c in CAUSES}

# The conflicts the cross review applies, in order: by what tells the two causes apart, then by the
# challenged cause's place on the team.
CONFLICTS: list[Conflict] = sorted(
    (conflict for c in CAUSES for conflict in c.conflicts()), key=lambda k: k.boundary
)

# Causes that name a saturated resource or mechanism (the WAL flush, the CPU, the disks, memory) rather
# than the work that saturates it.
RESOURCES: frozenset[Cause] = frozenset(c.code for c in CAUSES if c.resource)


def experts_by_code() -> dict[str, str]:
    """The expert owning each code the diagnosis names (the codes a model may name as a cause, the
    codes knowledge extraction looks for)."""
    return {str(c.code): c.expert.name for c in CAUSES}


def select_experts(alert: str, abnormal: list[AbnormalMetric], have_baseline: bool) -> list[str]:
    """The team for this anomaly: experts named by the alert's words or by an abnormal metric.

    Without a baseline nothing can be called abnormal, so every expert is engaged.
    """
    if not have_baseline:
        return list(EXPERTS)
    words = {w.strip(".,:;()[]\"'").lower() for w in alert.split()}
    chosen = []
    for name, (prefixes, keywords) in EXPERT_SIGNALS.items():
        if words & set(keywords) or any(m.name.startswith(prefixes) for m in abnormal):
            chosen.append(name)
    return chosen
