"""Every health code, produced on a real PostgreSQL and found (code and object), next to a near miss that must not be."""

from __future__ import annotations

import pytest

from tests.integration.health.conftest import Clinic

# code -> (object that has the condition, object that has a near miss of it); "{pid:role}" and
# "{queryid:name}" are filled in from the clinic's sessions and statements.
SPECIMENS: dict[str, tuple[str, str | None]] = {
    "index_unused": ("public.events_payload_idx", "public.events_indexed_account_idx"),
    "index_duplicate": ("public.dup_a_idx", "public.dup_a_partial_idx"),
    "index_invalid": ("public.inv_code_uniq", "public.inv_code_ok_idx"),
    "index_missing": ("public.events(account)", "public.events_indexed(account)"),
    "indexes_too_many": ("public.ledger", "public.catalog_ro"),
    "fk_without_index": ("public.child_bare(parent_id)", "public.child_indexed(parent_id)"),
    "table_without_primary_key": ("public.nopk", "public.parent"),
    "table_bloat": ("public.bloated", "public.compact"),
    "index_bloat": ("public.bloated_pkey", "public.compact_pkey"),
    "dead_tuples_high": ("public.churn", "public.churn_vacuumed"),
    "autovacuum_disabled": ("public.churn", "public.churn_vacuumed"),
    "statistics_stale": ("public.unanalyzed", "public.analyzed"),
    "xid_wraparound_risk": ("public.xid_old", "public.xid_frozen"),
    "mxid_wraparound_risk": ("public.xid_old", "public.xid_frozen"),
    "sequence_exhaustion": ("public.seq_int_nearly_done", "public.seq_healthy"),
    "long_running_query": ("{pid:sleeper}", "{pid:idle_plain}"),
    "idle_in_transaction": ("{pid:idle_tx}", "{pid:idle_plain}"),
    "blocking_locks": ("{pid:waiter}", "{pid:holder}"),
    "slow_query": ("{queryid:slow}", "{queryid:fast}"),
    "replication_lag": ("replica paused@127.0.0.1", "replica steady@127.0.0.1"),
    "replication_slot_inactive": ("slot stale_slot", "slot steady_slot"),
    # Server- and database-wide codes: the near miss is the clean database (test_clean.py).
    "cache_hit_ratio_low": ("database", None),
    "temp_files_spill": ("work_mem", None),
    "checkpoints_too_frequent": ("max_wal_size", None),
    "connections_saturation": ("max_connections", None),
    "setting_suboptimal": ("checkpoint_completion_target", "random_page_cost"),
}


def resolve(clinic: Clinic, obj: str) -> str:
    if obj.startswith("{pid:"):
        return f"pid:{clinic.pids[obj[5:-1]]}"
    if obj.startswith("{queryid:"):
        return f"queryid:{clinic.query_ids[obj[9:-1]]}"
    return obj


def problems(clinic: Clinic, code: str) -> set[str]:
    return {f.object for f in clinic.report.findings if f.code == code and f.is_problem}


@pytest.mark.parametrize("code", sorted(SPECIMENS))
def test_condition_is_found(examined: Clinic, code: str):
    positive, _ = SPECIMENS[code]
    assert resolve(examined, positive) in problems(examined, code), sorted(problems(examined, code))


@pytest.mark.parametrize("code", sorted(c for c, (_, near_miss) in SPECIMENS.items() if near_miss))
def test_near_miss_is_not_flagged(examined: Clinic, code: str):
    _, near_miss = SPECIMENS[code]
    assert near_miss is not None
    assert resolve(examined, near_miss) not in problems(examined, code)


def test_every_health_code_has_a_specimen():
    from dbcrew.operators.registry import REGISTRY

    emitted = {code for op in REGISTRY.values() if op.category == "checks" for code in op.checks}
    assert emitted == set(SPECIMENS)


def test_a_bigint_sequence_feeding_an_int_column_is_judged_by_the_column(examined: Clinic):
    finding = next(
        f
        for f in examined.report.findings
        if f.code == "sequence_exhaustion" and f.object == "public.seq_bigint_for_int_column"
    )
    assert (
        finding.evidence["column_type"] == "integer" and finding.evidence["max_value"] == 2**31 - 1
    )


def test_findings_carry_fix_sql_where_one_exists(examined: Clinic):
    by_key = {(f.code, f.object): f for f in examined.report.findings}
    assert (
        by_key[("index_missing", "public.events(account)")].fix_sql
        == "CREATE INDEX CONCURRENTLY ON public.events (account);"
    )
    assert (
        by_key[("index_duplicate", "public.dup_a_idx")].fix_sql
        == "DROP INDEX CONCURRENTLY public.dup_a_idx;"
    )
    assert (
        by_key[("sequence_exhaustion", "public.seq_int_nearly_done")].fix_sql
        == "ALTER SEQUENCE public.seq_int_nearly_done AS bigint;"
    )
    assert by_key[("dead_tuples_high", "public.churn")].fix_sql == "VACUUM (ANALYZE) public.churn;"
    assert (
        by_key[("index_bloat", "public.bloated_pkey")].fix_sql
        == "REINDEX INDEX CONCURRENTLY public.bloated_pkey;"
    )
    assert (
        by_key[("replication_slot_inactive", "slot stale_slot")].fix_sql
        == "SELECT pg_drop_replication_slot('stale_slot');"
    )


def test_every_check_ran(examined: Clinic):
    assert {
        c.check: c.status.value for c in examined.report.coverage if c.status.value != "ran"
    } == {}
