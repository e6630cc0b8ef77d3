"""What the target lets this review do, and what it therefore cannot cover (honest coverage).

The planner prunes the operator catalogue by the brief before any brain sees it, so neither the
rules brain nor an LLM can plan a check the target cannot run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dbcrew.models import Brief, CatalogueEntry, Finding, Severity
from dbcrew.models.report import CoverageEntry, CoverageStatus


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


def missing_capabilities(brief: Brief) -> dict[str, str]:
    """capability -> why it is missing."""
    missing = {}
    if "pg_stat_statements" not in brief.extensions:
        missing["pg_stat_statements"] = "extension pg_stat_statements is not installed in this database"
    elif not brief.has_statements:
        missing["pg_stat_statements"] = "pg_stat_statements is not in shared_preload_libraries"
    if "hypopg" not in brief.extensions:
        missing["hypopg"] = "extension hypopg is not installed in this database"
    return missing


def prune(brief: Brief, catalogue: list[CatalogueEntry]) -> Capabilities:
    missing = missing_capabilities(brief)
    dropped: dict[str, str] = {}
    for entry in catalogue:
        lacking = [c for c in entry.requires if c in missing]
        if lacking:
            dropped[entry.name] = missing[lacking[0]]
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
                cause = next((dropped[e.name] for e in catalogue if e.name in dropped and absent[0] in e.produces), "")
                dropped[entry.name] = cause or f"needs {absent[0]}, which nothing on this target can collect"
                changed = True
    caps = Capabilities(available=[e for e in catalogue if e.name not in dropped])
    for entry in catalogue:
        if entry.name in dropped and entry.category == "checks":
            caps.coverage.append(CoverageEntry(check=entry.name, status=CoverageStatus.SKIPPED, reason=dropped[entry.name]))
    for extension, (consequence, remedy) in EXTENSION_EFFECTS.items():
        if extension in missing:
            caps.findings.append(Finding(
                code="extension_missing", severity=Severity.INFO, object=extension,
                title=f"{extension} is unavailable: {consequence}", evidence={"reason": missing[extension]},
                recommendation=remedy, source="planner",
            ))
    if not brief.can_read_all_stats:
        grant = f"GRANT pg_read_all_stats TO {brief.current_user};"
        caps.findings.append(Finding(
            code="privilege_insufficient", severity=Severity.INFO, object=brief.current_user,
            title=f"Role {brief.current_user} sees only its own sessions and statement texts",
            evidence={"missing": "pg_read_all_stats", "grant": grant},
            recommendation=f"{grant} (or GRANT pg_monitor) for a complete view of sessions and statements.",
            source="planner",
        ))
    return caps


def privilege_notes(brief: Brief) -> list[str]:
    """A warning when the review runs with more rights than it needs: a superuser plans other users'
    statements and reads every catalog with rights a mistake (or a hostile object) could use."""
    if not brief.is_superuser:
        return []
    return [f"ran as superuser {brief.current_user}: a review needs only pg_monitor; "
            "run it as a dedicated least-privilege role (CREATE ROLE dbcrew LOGIN; GRANT pg_monitor TO dbcrew;)"]


def visibility_notes(brief: Brief) -> dict[str, str]:
    """Checks that run but see only part of the picture without pg_read_all_stats."""
    if brief.can_read_all_stats:
        return {}
    note = f"partial: without pg_read_all_stats only sessions and statements of {brief.current_user} are visible"
    return {"check_sessions": note, "check_slow_queries": note, "check_missing_indexes": note}


_DENIED = re.compile(r"permission denied for (view|table|relation|sequence|function|schema) ([\w.\"]+)")
_UPSTREAM = re.compile(r"^upstream (\w+) (?:failed|did not complete)")


def root_reason(reason: str, reasons: dict[str, str], role: str) -> str:
    """A coverage reason traced to its root (an upstream failure's own reason) with the GRANT that fixes it."""
    seen: set[str] = set()
    while (match := _UPSTREAM.match(reason)) and match.group(1) in reasons and match.group(1) not in seen:
        seen.add(match.group(1))
        reason = f"{reason}: {reasons[match.group(1)]}"
        if _DENIED.search(reason):
            break
    denied = _DENIED.search(reason)
    if denied:
        kind, name = denied.groups()
        grant = f"GRANT EXECUTE ON FUNCTION {name} TO {role};" if kind == "function" else (
            f"GRANT USAGE ON SCHEMA {name} TO {role};" if kind == "schema" else f"GRANT SELECT ON {name} TO {role};")
        reason = f"{reason} ({grant})"
    return reason
