"""Coverage reasons are built from structured causes (kind, upstream task, GRANT), never parsed back from text."""

from __future__ import annotations

import pytest

from dbcrew.models import Brief, CoverageEntry
from dbcrew.models.report import CoverageStatus, SkipCause, SkipKind, grant_for
from dbcrew.operators.registry import catalogue
from dbcrew.roles.crew.capabilities import failure_cause, prune
from dbcrew.roles.crew.worker import TaskOutcome
from dbcrew.vocabulary import TaskStatus

DENIED = "InsufficientPrivilege: permission denied for view pg_stat_statements (skipped on the monitor's instruction)"


def failed(task_id: str, reason: str) -> TaskOutcome:
    return TaskOutcome(task_id=task_id, operator=task_id, status=TaskStatus.FAILED, reason=reason)


def skipped(task_id: str, kind: SkipKind, upstream: str) -> TaskOutcome:
    cause = SkipCause(kind=kind, upstream=upstream)
    return TaskOutcome(
        task_id=task_id,
        operator=task_id,
        status=TaskStatus.SKIPPED,
        reason=cause.render(),
        cause=cause,
    )


def test_a_skip_is_traced_through_every_upstream_to_the_refusal_and_its_grant():
    outcomes = {
        o.task_id: o
        for o in [
            failed("collect_statements", DENIED),
            skipped("digest_statements", SkipKind.UPSTREAM_FAILED, "collect_statements"),
            skipped("check_slow_queries", SkipKind.UPSTREAM_INCOMPLETE, "digest_statements"),
        ]
    }
    cause = failure_cause("check_slow_queries", outcomes, "keeper")
    assert (cause.kind, cause.upstream) == (SkipKind.UPSTREAM_INCOMPLETE, "digest_statements")
    assert cause.root is not None and (cause.root.kind, cause.root.upstream) == (
        SkipKind.UPSTREAM_FAILED,
        "collect_statements",
    )
    origin = cause.root.root
    assert origin is not None and origin.kind is SkipKind.PRIVILEGE and origin.detail == DENIED
    assert origin.grant == "GRANT SELECT ON pg_stat_statements TO keeper;"
    assert cause.render() == (
        "upstream digest_statements did not complete: upstream collect_statements failed: "
        f"{DENIED} (GRANT SELECT ON pg_stat_statements TO keeper;)"
    )
    mixed = failure_cause("check_slow_queries", outcomes, "Keeper")
    assert mixed.root is not None and mixed.root.root is not None
    assert mixed.root.root.grant == 'GRANT SELECT ON pg_stat_statements TO "Keeper";', (
        "the role as PostgreSQL names it: unquoted, Keeper would be keeper, another role"
    )


def test_a_failure_other_than_a_refusal_is_a_fault_in_its_own_words():
    cause = failure_cause(
        "check_locks",
        {"check_locks": failed("check_locks", "QueryCanceled: statement timeout")},
        "keeper",
    )
    assert (cause.kind, cause.grant, cause.render()) == (
        SkipKind.FAULT,
        None,
        "QueryCanceled: statement timeout",
    )


def test_an_upstream_the_run_no_longer_knows_or_a_loop_ends_the_trace():
    gone = {"check_x": skipped("check_x", SkipKind.UPSTREAM_FAILED, "collect_gone")}
    assert failure_cause("check_x", gone, "r").render() == "upstream collect_gone failed"
    loop = {
        "a": skipped("a", SkipKind.UPSTREAM_FAILED, "b"),
        "b": skipped("b", SkipKind.UPSTREAM_FAILED, "a"),
    }
    assert failure_cause("a", loop, "r").render() == "upstream b failed: upstream a failed"


@pytest.mark.parametrize(
    ("message", "grant"),
    [
        (
            "permission denied for function pg_ls_waldir",
            "GRANT EXECUTE ON FUNCTION pg_ls_waldir TO k;",
        ),
        ("permission denied for schema audit", "GRANT USAGE ON SCHEMA audit TO k;"),
        (
            "permission denied for sequence public.orders_id_seq",
            "GRANT SELECT ON public.orders_id_seq TO k;",
        ),
        ("permission denied for table orders", "GRANT SELECT ON orders TO k;"),
        ('relation "orders" does not exist', None),
    ],
)
def test_the_grant_names_what_the_target_refused(message, grant):
    assert grant_for(message, "k") == grant


def test_plan_level_causes_render_as_before_and_old_reports_still_load():
    assert SkipCause(kind=SkipKind.NOT_PLANNED).render() == "not planned"
    assert (
        SkipCause(kind=SkipKind.REMOVED, detail="no producer").render()
        == "removed from the plan: no producer"
    )
    entry = CoverageEntry.of(
        "check_bloat", CoverageStatus.SKIPPED, SkipCause(kind=SkipKind.NOT_PLANNED)
    )
    assert entry.model_dump(mode="json") == {
        "check": "check_bloat",
        "status": "skipped",
        "reason": "not planned",
        "cause": {
            "kind": "not_planned",
            "detail": "",
            "upstream": None,
            "root": None,
            "grant": None,
        },
        "unjudged": [],
    }
    old = CoverageEntry.model_validate(
        {"check": "check_bloat", "status": "skipped", "reason": "not planned"}
    )
    assert old.cause is None and old.reason == "not planned"


def test_a_missing_extension_skips_its_checks_and_their_dependents_with_the_same_cause():
    brief = Brief(
        server_version="18.6",
        server_version_num=180006,
        database="shop",
        current_user="app",
        extensions=[],
    )
    skipped_checks = {c.check: c for c in prune(brief, catalogue()).coverage}
    assert skipped_checks, "a target without pg_stat_statements skips the statement checks"
    for entry in skipped_checks.values():
        assert entry.status is CoverageStatus.SKIPPED and entry.cause is not None
        assert (
            entry.cause.kind is SkipKind.MISSING_EXTENSION
            and entry.reason == entry.cause.render() == entry.cause.detail
        )
    assert {c.reason for c in skipped_checks.values()} >= {
        "extension pg_stat_statements is not installed in this database"
    }
