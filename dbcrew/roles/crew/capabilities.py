"""What the target lets this review do, and what it therefore cannot cover (honest coverage).

The planner prunes the operator catalogue by the brief before any brain sees it, so neither the
rules brain nor an LLM can plan a check the target cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dbcrew.models import Brief, CatalogueEntry, Finding, Severity
from dbcrew.models.report import CoverageEntry, CoverageStatus, SkipCause, SkipKind
from dbcrew.operators.sql import quote_ident
from dbcrew.roles.crew.worker import TaskOutcome
from dbcrew.vocabulary import Category, FindingCode, TaskStatus


@dataclass
class Capabilities:
    available: list[CatalogueEntry]
    coverage: list[CoverageEntry] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


# What a missing extension costs the review, and how to add it.
EXTENSION_EFFECTS: dict[str, tuple[str, str]] = {
    "pg_stat_statements": (
        "statement-level checks were skipped",
        "Add pg_stat_statements to shared_preload_libraries, restart, then CREATE EXTENSION pg_stat_statements.",
    ),
    "hypopg": (
        "missing-index advice is heuristic, not proven with hypothetical indexes",
        "CREATE EXTENSION hypopg (no restart needed; hypothetical indexes are private to the review's session).",
    ),
}


def missing_capabilities(brief: Brief) -> dict[str, SkipCause]:
    """capability -> why it is missing."""
    missing = {}
    if brief.statements_missing is not None:
        missing["pg_stat_statements"] = brief.statements_missing
    if "hypopg" not in brief.extensions:
        missing["hypopg"] = "extension hypopg is not installed in this database"
    return {
        name: SkipCause(kind=SkipKind.MISSING_EXTENSION, detail=why)
        for name, why in missing.items()
    }


def prune(brief: Brief, catalogue: list[CatalogueEntry], llm: bool = False) -> Capabilities:
    """What the target (by its brief) and the run let it do: operators that need a missing extension go,
    with everything that needs only what they produce; an operator that asks the run's LLM
    (`consults_llm`) stays only when `llm` says the run's brain is one, so a rules run's catalogue, and
    every plan made from it, is what it would be without such operators."""
    missing = missing_capabilities(brief)
    dropped: dict[str, SkipCause] = {}
    for entry in catalogue:
        lacking = [c for c in entry.requires if c in missing]
        if lacking:
            dropped[entry.name] = missing[lacking[0]]
        elif entry.consults_llm and not llm:
            dropped[entry.name] = SkipCause(
                kind=SkipKind.NOT_PLANNED, detail="asks the run's LLM, and its brain is the rules"
            )
    # Anything that needs an artifact only dropped operators produce goes too.
    changed = True
    while changed:
        changed = False
        produced = {a for e in catalogue if e.name not in dropped for a in e.produces}
        for entry in catalogue:
            if entry.name in dropped:
                continue
            absent = [a for a in entry.needs if a not in produced]
            if absent:
                # Carry the root cause (why the producer was dropped), not just the missing artifact.
                cause = next(
                    (
                        dropped[e.name]
                        for e in catalogue
                        if e.name in dropped and absent[0] in e.produces
                    ),
                    None,
                )
                dropped[entry.name] = cause or SkipCause(
                    kind=SkipKind.NO_SOURCE,
                    detail=f"needs {absent[0]}, which nothing on this target can collect",
                )
                changed = True
    caps = Capabilities(available=[e for e in catalogue if e.name not in dropped])
    for entry in catalogue:
        if entry.name in dropped and entry.category is Category.CHECKS:
            caps.coverage.append(
                CoverageEntry.of(entry.name, CoverageStatus.SKIPPED, dropped[entry.name])
            )
    for extension, (consequence, remedy) in EXTENSION_EFFECTS.items():
        if extension in missing:
            caps.findings.append(
                Finding(
                    code=FindingCode.EXTENSION_MISSING,
                    severity=Severity.INFO,
                    object=extension,
                    title=f"{extension} is unavailable: {consequence}",
                    evidence={"reason": missing[extension].detail},
                    recommendation=remedy,
                    source="planner",
                )
            )
    if not brief.can_read_all_stats:
        grant = f"GRANT pg_read_all_stats TO {quote_ident(brief.current_user)};"
        caps.findings.append(
            Finding(
                code=FindingCode.PRIVILEGE_INSUFFICIENT,
                severity=Severity.INFO,
                object=brief.current_user,
                title=f"Role {brief.current_user} sees only its own sessions and statement texts",
                evidence={"missing": "pg_read_all_stats", "grant": grant},
                recommendation=f"{grant} (or GRANT pg_monitor) for a complete view of sessions and statements.",
                source="planner",
            )
        )
    return caps


def plan_constraints(brief: Brief, seconds: float) -> list[str]:
    """What a plan must fit, as the planner is told it: the time the run has, the role's privileges
    and what the target lacks (operators needing it are already pruned; the rest see less)."""
    constraints = [f"answer due within {seconds:.0f} s"]
    if not brief.can_read_all_stats:
        constraints.append(
            f"role {brief.current_user} lacks pg_read_all_stats: other roles' sessions and statements are hidden"
        )
    constraints += [
        f"no {name}: {cause.detail}" for name, cause in missing_capabilities(brief).items()
    ]
    if brief.in_recovery:
        constraints.append("the target is a standby in recovery: read-only, no WAL of its own")
    return constraints


def privilege_notes(brief: Brief) -> list[str]:
    """A warning when the review runs with more rights than it needs: a superuser plans other users'
    statements and reads every catalog with rights a mistake (or a hostile object) could use."""
    if not brief.is_superuser:
        return []
    return [
        f"ran as superuser {brief.current_user}: a review needs only pg_monitor; "
        "run it as a dedicated least-privilege role (CREATE ROLE dbcrew LOGIN; GRANT pg_monitor TO dbcrew;)"
    ]


def visibility_notes(brief: Brief) -> dict[str, str]:
    """Checks that run but see only part of the picture without pg_read_all_stats."""
    if brief.can_read_all_stats:
        return {}
    note = f"partial: without pg_read_all_stats only sessions and statements of {brief.current_user} are visible"
    return {"check_sessions": note, "check_slow_queries": note, "check_missing_indexes": note}


def failure_cause(task_id: str, outcomes: dict[str, TaskOutcome], role: str) -> SkipCause:
    """Why a task did not complete, traced through the upstream tasks it was skipped for to the root failure.

    A skipped task carries its upstream as a structured cause (dbcrew/roles/crew/execution.py); a failed one its
    error, which becomes a privilege cause with its GRANT when the target refused the role (`role`: its name as
    the database gave it, quoted here).
    """
    seen: set[str] = set()

    def trace(outcome: TaskOutcome) -> SkipCause:
        seen.add(outcome.task_id)
        if outcome.status is TaskStatus.SKIPPED and outcome.cause is not None:
            upstream = outcome.cause.upstream
            if upstream in outcomes and upstream not in seen:
                return outcome.cause.model_copy(update={"root": trace(outcomes[upstream])})
            return outcome.cause
        return SkipCause.of_failure(outcome.reason, quote_ident(role))

    return trace(outcomes[task_id])
