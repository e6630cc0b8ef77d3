"""A role with only pg_monitor gets a complete, honest report; a restricted view degrades one check only."""

from __future__ import annotations

from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres
from tests.integration.health.conftest import review


def monitoring_role(name: str, database: str) -> str:
    """The least-privilege recipe pganalyze, pgwatch and pg_gather converge on."""
    return f"CREATE ROLE {name} LOGIN CONNECTION LIMIT 5; GRANT pg_monitor TO {name}; GRANT CONNECT ON DATABASE {database} TO {name};"


def test_pg_monitor_role_gets_every_check_it_can_run(
    clinic_server: EmbeddedPostgres, tmp_path: Path
):
    clinic_server.psql(monitoring_role("watcher", "clinic"))
    report = review(clinic_server.dsn("clinic", user="watcher"), tmp_path)
    coverage = {c.check: c for c in report.coverage}
    assert {c.status.value for c in report.coverage} == {"ran"}, {
        k: (c.status.value, c.reason) for k, c in coverage.items()
    }
    # pg_monitor cannot read sequences or the column statistics of tables it may not SELECT:
    # the checks say so, with the GRANT that fixes it, instead of reporting "all clear".
    assert (
        "GRANT SELECT ON ALL SEQUENCES IN SCHEMA public TO watcher;"
        in coverage["check_sequences"].reason
    )
    assert (
        "partial" in coverage["check_bloat"].reason
        and "GRANT SELECT" in coverage["check_bloat"].reason
    )
    # What the role could not read is not judged: history keeps those codes' earlier findings.
    assert coverage["check_sequences"].unjudged == ["sequence_exhaustion"]
    assert coverage["check_bloat"].unjudged == ["table_bloat", "index_bloat"]
    found = {(f.code, f.object) for f in report.findings}
    assert not any(code == "sequence_exhaustion" for code, _ in found)
    assert {
        ("index_duplicate", "public.dup_a_idx"),
        ("index_invalid", "public.inv_code_uniq"),
        ("index_missing", "public.events(account)"),
        ("replication_slot_inactive", "slot stale_slot"),
    } <= found
    assert not any(f.code == "privilege_insufficient" for f in report.findings)


def test_a_restricted_view_degrades_one_check_not_the_review(
    clinic_server: EmbeddedPostgres, tmp_path: Path
):
    clinic_server.psql("CREATE DATABASE managed;")
    clinic_server.psql(
        "CREATE EXTENSION pg_stat_statements; REVOKE ALL ON pg_stat_statements FROM PUBLIC;"
        " CREATE TABLE t (id int PRIMARY KEY);",
        dbname="managed",
    )
    clinic_server.psql(monitoring_role("keeper", "managed"))
    report = review(clinic_server.dsn("managed", user="keeper"), tmp_path)
    coverage = {c.check: c for c in report.coverage}
    slow = coverage["check_slow_queries"]
    assert slow.status.value in ("failed", "skipped") and "permission denied" in slow.reason
    assert "GRANT SELECT ON pg_stat_statements TO keeper;" in slow.reason
    # Only the check that needs the view is lost; the index advice falls back to its heuristic.
    assert [k for k, c in coverage.items() if c.status.value != "ran"] == ["check_slow_queries"]
    assert "heuristic" in coverage["check_missing_indexes"].reason
    assert report.decisions and report.decisions[0].leaf == "permission"
