"""Check operators over a real DuckDB workspace filled with rows shaped like the collectors' output."""

from __future__ import annotations

from dataclasses import astuple, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_type_hints

import pytest

import dbcrew.operators  # noqa: F401
from dbcrew.artifacts import declare
from dbcrew.models import Brief, Finding, Role, Severity
from dbcrew.operators.checks.age_history import EARLIER_AGE_KEY, EarlierAge
from dbcrew.operators.checks.base import Coverage, check
from dbcrew.operators.checks.database import check_wraparound
from dbcrew.operators.checks.indexes import check_duplicate_indexes
from dbcrew.operators.checks.tables import check_vacuum_health
from dbcrew.operators.collect.catalog import HorizonRow, SettingRow, WraparoundRow
from dbcrew.operators.collect.replication import SlotRow
from dbcrew.operators.registry import REGISTRY, Observation, OperatorContext
from dbcrew.operators.sql import name_list_text
from dbcrew.operators.stat_views import (
    CheckpointerRow,
    DatabaseStatsRow,
    IndexStatsRow,
    TableStatsRow,
)
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Category, FindingCode
from dbcrew.workspace import Workspace
from tests.rows import duckdb_type, land_rows

TOYS = declare("toys")  # what the toy checks need (never landed: they read nothing)

# An index and a table as the collectors land them; each test sets what it is about.
INDEX = IndexStatsRow(
    indexrelid=0,
    relid=1,
    schemaname="public",
    relname="orders",
    indexrelname="",
    idx_scan=0,
    idx_tup_read=0,
    idx_tup_fetch=0,
    index_bytes=8192,
    indisunique=False,
    indisprimary=False,
    indisvalid=True,
    indisready=True,
    indisexclusion=False,
    indkey="1",
    indclass="",
    indcollation="0",
    indoption="0",
    key_columns=1,
    expressions="",
    predicate="",
    method="btree",
    indexdef="",
    column_names=None,
    backs_constraint=False,
)
TABLE = TableStatsRow(
    relid=1,
    schemaname="public",
    relname="",
    seq_scan=0,
    seq_tup_read=0,
    idx_scan=0,
    idx_tup_fetch=0,
    n_tup_ins=0,
    n_tup_upd=0,
    n_tup_del=0,
    n_tup_hot_upd=0,
    n_live_tup=0,
    n_dead_tup=0,
    n_mod_since_analyze=0,
    last_vacuum=None,
    last_autovacuum=None,
    last_analyze=None,
    last_autoanalyze=None,
    analyzed_seconds_ago=None,
    vacuum_count=0,
    autovacuum_count=0,
    analyze_count=0,
    autoanalyze_count=0,
    reltuples=-1.0,
    relpages=0,
    total_bytes=0,
    table_bytes=0,
    reloptions=None,
    has_primary_key=True,
    relkind="r",
    index_count=1,
)
AUTOVACUUM_ON = SettingRow(
    name="autovacuum",
    setting="on",
    unit=None,
    source="default",
    boot_val="on",
    reset_val="on",
    context="sighup",
    vartype="bool",
)
NOV_1 = datetime(2026, 11, 1, tzinfo=UTC)


def ctx(tmp_path: Path) -> OperatorContext:
    return OperatorContext(
        target=parse_target("postgresql://u@127.0.0.1:1/x"),
        workspace=Workspace(tmp_path / "w.duckdb"),
        settings=Settings(),
        brief=None,
        run_dir=tmp_path,
    )


def index(
    oid,
    name,
    cols,
    *,
    unique=False,
    primary=False,
    constraint=False,
    classes=None,
    predicate="",
    method="btree",
):
    classes = classes or " ".join("3124" for _ in cols.split(","))
    landed = name_list_text(cols.split(","))  # as collect_index_stats lands them (json_agg)
    return replace(
        INDEX,
        indexrelid=oid,
        indexrelname=name,
        indisunique=unique,
        indisprimary=primary,
        backs_constraint=constraint,
        column_names=landed,
        indclass=classes,
        method=method,
        predicate=predicate,
        indexdef=f"def {name}",
    )


def duplicates(tmp_path: Path, rows: list[IndexStatsRow]) -> set[str]:
    c = ctx(tmp_path)
    land_rows(c.workspace, "index_stats", IndexStatsRow, rows)
    return {f.object for f in check_duplicate_indexes(c).findings}


def test_leading_prefix_is_a_duplicate(tmp_path):
    rows = [
        index(1, "orders_pkey", "id", unique=True, primary=True, constraint=True),
        index(2, "orders_customer_idx", "customer_id"),
        index(3, "orders_customer_created_idx", "customer_id,created_at"),
    ]
    assert duplicates(tmp_path, rows) == {"public.orders_customer_idx"}


def test_unique_narrow_index_partial_index_and_other_opclass_are_not_duplicates(tmp_path):
    rows = [
        index(2, "orders_code_key", "code", unique=True),
        index(3, "orders_code_created_idx", "code,created_at"),
        index(4, "orders_status_open", "status", predicate="(status = 'open'::text)"),
        index(5, "orders_status_created", "status,created_at"),
        index(6, "orders_name_pattern", "name", classes="10044"),
        index(7, "orders_name_created", "name,created_at"),
    ]
    assert duplicates(tmp_path, rows) == set()


def test_exact_twins_report_one_and_never_the_constraint(tmp_path):
    rows = [index(2, "a_idx", "email"), index(3, "b_idx", "email")]
    assert duplicates(tmp_path, rows) == {"public.b_idx"}
    rows = [index(2, "a_key", "email", unique=True, constraint=True), index(3, "b_idx", "email")]
    assert duplicates(tmp_path / "2", rows) == {"public.b_idx"}


DAY = 86400.0


def table(
    name: str,
    live: int,
    dead: int,
    mods: int,
    analyzed: datetime | None,
    seconds_ago: float | None,
    reltuples: float,
    *,
    reloptions: str | None = None,
    autoanalyzed: datetime | None = None,
) -> TableStatsRow:
    return replace(
        TABLE,
        relname=name,
        n_live_tup=live,
        n_dead_tup=dead,
        n_mod_since_analyze=mods,
        last_analyze=analyzed,
        last_autoanalyze=autoanalyzed,
        analyzed_seconds_ago=seconds_ago,
        reltuples=reltuples,
        reloptions=reloptions,
    )


def vacuum_findings(
    c: OperatorContext, tables: list[TableStatsRow]
) -> dict[tuple[str, str], Finding]:
    land_rows(c.workspace, "settings", SettingRow, [AUTOVACUUM_ON])
    land_rows(c.workspace, "table_stats", TableStatsRow, tables)
    return {(f.code, f.object): f for f in check_vacuum_health(c).findings}


def test_vacuum_health_thresholds(tmp_path):
    found = vacuum_findings(
        ctx(tmp_path),
        [
            table(
                "carts", 30000, 60000, 0, NOV_1, DAY, 30000.0, reloptions="autovacuum_enabled=false"
            ),
            table("fine", 30000, 100, 10, NOV_1, DAY, 30000.0),
            table("small_dead", 100, 9000, 0, NOV_1, DAY, 100.0),
            table("unanalyzed", 5000, 0, 0, None, None, -1.0),
        ],
    )
    assert {(code, obj, f.severity.value) for (code, obj), f in found.items()} == {
        ("autovacuum_disabled", "public.carts", "warning"),
        ("dead_tuples_high", "public.carts", "critical"),
        ("statistics_stale", "public.unanalyzed", "warning"),
    }
    assert "horizon_held_by" not in found[("dead_tuples_high", "public.carts")].evidence


def test_changes_since_a_young_analyze_count_only_past_what_a_late_flush_can_count(tmp_path):
    """Rows changed just before an ANALYZE can be flushed to pg_stat after it (as changes since, and live rows counted
    twice): within the flush grace only growth past that is judged; after it, every change since."""
    found = vacuum_findings(
        ctx(tmp_path),
        [
            # 5,000 rows loaded and analyzed by one session, its counts flushed after the ANALYZE
            table("late_flush", 10000, 0, 5000, NOV_1, 2.0, 5000.0),
            table(
                "autoanalyzed_lately",
                10000,
                0,
                5000,
                datetime(2026, 10, 1, tzinfo=UTC),
                14.0,
                5000.0,
                autoanalyzed=NOV_1,
            ),
            table("changed_since", 10000, 0, 5000, NOV_1, 16.0, 10000.0),
            # analyzed at 100 rows, then loaded to 300 times that: the planner still plans for 100
            table("bulk_loaded", 30100, 0, 30000, NOV_1, 2.0, 100.0),
            table("empty_then_loaded", 30000, 0, 30000, NOV_1, 1.0, 0.0),
        ],
    )
    stale = {obj for code, obj in found if code == "statistics_stale"}
    assert stale == {"public.changed_since", "public.bulk_loaded", "public.empty_then_loaded"}
    assert (
        found[("statistics_stale", "public.changed_since")].evidence["analyzed_seconds_ago"] == 16.0
    )
    loaded = found[("statistics_stale", "public.bulk_loaded")]
    assert (
        loaded.title
        == "Statistics of bulk_loaded are stale (analyzed at 100 rows, 30,100 live now)"
    )
    assert loaded.evidence["reltuples"] == 100.0


def test_vacuum_and_wraparound_findings_name_who_holds_the_xmin_horizon(tmp_path):
    c = ctx(tmp_path)
    land_rows(
        c.workspace,
        "xmin_horizon",
        HorizonRow,
        [
            HorizonRow(*row)
            for row in [
                (
                    "prepared_transaction",
                    "prepared forgotten",
                    "shop",
                    False,
                    False,
                    5_000_000,
                    9 * DAY,
                    "owner app",
                    True,
                ),
                (
                    "replication_slot",
                    "slot decoder",
                    None,
                    True,
                    False,
                    4_000_000,
                    None,
                    "logical (pgoutput), inactive",
                    True,
                ),
                (
                    "transaction",
                    "pid:42",
                    "shop",
                    False,
                    False,
                    1_000,
                    3600.0,
                    "app, idle in transaction",
                    True,
                ),
                (
                    "transaction",
                    "pid:43",
                    "shop",
                    False,
                    False,
                    999,
                    2.0,
                    "app, active",
                    True,
                ),  # ordinary traffic
                # a query that just began: its snapshot inherits the horizon the others hold, it holds nothing itself
                ("transaction", "pid:45", "shop", False, True, 5_000_000, 0.1, "app, active", True),
                (
                    "transaction",
                    "pid:44",
                    "other",
                    False,
                    False,
                    9_000_000,
                    9 * DAY,
                    "app, idle in transaction",
                    False,
                ),
            ]
        ],
    )
    found = vacuum_findings(c, [table("carts", 30000, 60000, 0, NOV_1, DAY, 30000.0)])
    held = found[("dead_tuples_high", "public.carts")]
    # Another database's session does not hold this one's tables; a logical slot holds only the catalogs.
    assert [h["holder"] for h in held.evidence["horizon_held_by"]] == [
        "prepared forgotten",
        "pid:42",
    ]
    assert "prepared forgotten" in held.recommendation

    land_rows(
        c.workspace,
        "wraparound",
        WraparoundRow,
        [
            WraparoundRow("database", "shop", 1_200_000_000, 0, *DEFAULT_FREEZE),
            WraparoundRow("database", "other", 1_100_000_000, 0, *DEFAULT_FREEZE),
            WraparoundRow("table", "public.carts", 1_100_000_000, 0, *DEFAULT_FREEZE),
        ],
    )
    by_object = {f.object: f for f in check_wraparound(c).findings}
    names = {
        obj: [h["holder"] for h in f.evidence["horizon_held_by"]] for obj, f in by_object.items()
    }
    assert names == {
        "database shop": ["prepared forgotten", "slot decoder", "pid:42"],
        "database other": ["pid:44", "slot decoder"],
        "public.carts": ["prepared forgotten", "pid:42"],
    }
    assert by_object["public.carts"].recommendation.startswith(
        "End or drop what holds the xmin horizon, oldest first (prepared forgotten"
    )


# autovacuum_freeze_max_age and its multixact twin at their defaults, autovacuum on
DEFAULT_FREEZE = (200_000_000, 400_000_000, False)


def test_an_age_close_to_the_freeze_limit_is_a_risk_only_where_autovacuum_is_off(tmp_path):
    """Past 90 % of autovacuum_freeze_max_age only the server's forced vacuums freeze a database or
    table autovacuum is off for: a warning; with autovacuum on that is its ordinary work, no finding.
    Near the hard limit is critical either way."""
    c = ctx(tmp_path)
    land_rows(
        c.workspace,
        "wraparound",
        WraparoundRow,
        [
            WraparoundRow("database", "off", 95_000, 3, 100_000, 400_000_000, True),
            WraparoundRow("database", "on", 95_000, 3, 100_000, 400_000_000, False),
            WraparoundRow("database", "young", 80_000, 3, 100_000, 400_000_000, True),
            WraparoundRow("table", "public.near_hard", 1_600_000_000, 3, *DEFAULT_FREEZE),
            WraparoundRow(
                "table", "public.mxid_off", 10, 370_000_000, 200_000_000, 400_000_000, True
            ),
        ],
    )
    found = {(f.code, f.object): f for f in check_wraparound(c).findings}
    assert {k: f.severity for k, f in found.items()} == {
        (FindingCode.XID_WRAPAROUND_RISK, "database off"): Severity.WARNING,
        (FindingCode.XID_WRAPAROUND_RISK, "public.near_hard"): Severity.CRITICAL,
        (FindingCode.MXID_WRAPAROUND_RISK, "public.mxid_off"): Severity.WARNING,
    }
    off = found[(FindingCode.XID_WRAPAROUND_RISK, "database off")]
    assert "95% of autovacuum_freeze_max_age (100,000) with autovacuum off" in off.title
    assert off.evidence["autovacuum_freeze_max_age"] == 100_000 and off.evidence["autovacuum_off"]
    assert "forces anti-wraparound vacuums" in off.recommendation
    assert "75% of the limit" in found[(FindingCode.XID_WRAPAROUND_RISK, "public.near_hard")].title


def test_an_age_past_the_freeze_limit_and_still_rising_since_the_last_review_is_a_risk(tmp_path):
    """With autovacuum on, an age past autovacuum_freeze_max_age is a moment: the forced vacuum makes
    it fall. Past the limit at the last health review and higher now, autovacuum is not keeping up:
    a warning on the reviewed database; an age that fell since, or one short of the limit at the
    last review, or another database (history keeps the reviewed one's age only) is no finding."""
    probed = datetime(2026, 11, 26, 1, 0, 0, tzinfo=UTC)
    brief = Brief(
        server_version="18.0",
        server_version_num=180000,
        database="shop",
        current_user="watcher",
        probed_at=probed,
    )

    def found(now: int, last: int) -> list[Finding]:
        folder = tmp_path / f"{now}-{last}"
        folder.mkdir()
        c = replace(ctx(folder), brief=brief)
        land_rows(
            c.workspace,
            "wraparound",
            WraparoundRow,
            [
                WraparoundRow("database", "shop", now, 3, 100_000, 400_000_000, False),
                WraparoundRow("database", "other", now, 3, 100_000, 400_000_000, False),
            ],
        )
        earlier = EarlierAge(reviewed_at=probed - timedelta(days=1), age=last)
        c.workspace.put_observation(EARLIER_AGE_KEY, earlier.model_dump_json())
        return check_wraparound(c).findings

    rising = found(130_000, 110_000)
    assert [(f.object, f.severity) for f in rising] == [("database shop", Severity.WARNING)]
    assert "still rising since the last review (110,000)" in rising[0].title
    assert rising[0].evidence["earlier_review"]["age"] == 110_000
    assert found(105_000, 130_000) == []  # fell since: the forced vacuum did its work
    assert (
        found(130_000, 95_000) == []
    )  # crossed the limit since the last review: its vacuum is due


def test_the_check_skeleton_gathers_findings_and_reports_coverage(tmp_path):
    """@check registers a tasker operator of the checks category; the body's findings carry its name as
    source, its coverage is the declared one unless the body returns its own (with what it could not see)."""
    ws_ctx = ctx(tmp_path)
    seen = Finding(
        code=FindingCode.INDEX_INVALID,
        severity=Severity.WARNING,
        object="public.i",
        title="i is invalid",
    )

    def check_toy_declared(_ctx):
        """Toy check with a fixed coverage."""
        yield seen

    def check_toy_returned(_ctx):
        """Toy check that could not see everything."""
        yield seen
        yield seen.model_copy(update={"severity": Severity.INFO})
        return Coverage("two toys", partial="one toy hidden")

    def check_toy_silent(_ctx):
        """Toy check that forgets its coverage."""
        yield seen

    try:
        declared = check(needs=(TOYS,), codes=(FindingCode.INDEX_INVALID,), looked_at="one toy")(
            check_toy_declared
        )(ws_ctx)
        returned = check(needs=(TOYS,), codes=(FindingCode.INDEX_INVALID,))(check_toy_returned)(
            ws_ctx
        )
        silent = check(needs=(TOYS,), codes=(FindingCode.INDEX_INVALID,))(check_toy_silent)
        entry = REGISTRY["check_toy_declared"].entry()
        with pytest.raises(TypeError, match="check_toy_silent returned no coverage"):
            silent(ws_ctx)
    finally:
        for name in ("check_toy_declared", "check_toy_returned", "check_toy_silent"):
            REGISTRY.pop(name, None)
    assert (entry.role, entry.category, entry.needs, entry.checks) == (
        Role.TASKER,
        Category.CHECKS,
        ["toys"],
        ["index_invalid"],
    )
    assert entry.description == "Toy check with a fixed coverage."
    assert (
        declared.summary == "check_toy_declared: 1 findings (1 problems) over one toy"
        and declared.partial == ""
    )
    assert [f.source for f in declared.findings] == ["check_toy_declared"]
    assert returned.summary == "check_toy_returned: 2 findings (1 problems) over two toys"
    assert returned.partial == "one toy hidden"


def test_a_slot_whose_replica_just_went_away_is_named_in_the_coverage_not_a_finding(tmp_path):
    c = ctx(tmp_path)
    land_rows(
        c.workspace,
        "replication_slots",
        SlotRow,
        [
            SlotRow(
                "replica1_slot", "physical", "", False, "reserved", 4.0, 2.0**20
            ),  # its replica restarting
            SlotRow(
                "left_slot", "physical", "", False, "reserved", 3600.0, 2.0**20
            ),  # left behind an hour ago
            SlotRow(
                "flooded_slot", "physical", "", False, "reserved", 4.0, 2.0**31
            ),  # just gone, but retaining too much
            SlotRow(
                "old_server_slot", "physical", "", False, "reserved", None, 2.0**20
            ),  # PostgreSQL 16: no inactive_since
        ],
    )
    observation = REGISTRY["check_replication_slots"].run(c, {})
    assert {f.object for f in observation.findings} == {
        "slot left_slot",
        "slot flooded_slot",
        "slot old_server_slot",
    }
    assert (
        "replica gone during the review" in observation.partial
        and "replica1_slot (4 s ago)" in observation.partial
    )


# The database_stats columns the cache check reads: the window's deltas.
CACHE_WINDOW_COLUMNS = [
    ("datname", "VARCHAR"),
    ("blks_hit_delta", "DOUBLE"),
    ("blks_read_delta", "DOUBLE"),
    ("temp_bytes_delta", "DOUBLE"),
    ("server_started_delta", "DOUBLE"),
]


def test_a_window_that_spans_a_restart_does_not_judge_the_cold_cache(tmp_path):
    c = ctx(tmp_path)
    columns = CACHE_WINDOW_COLUMNS
    c.workspace.write_table("database_stats", columns, [("shop", 50_000.0, 50_000.0, 0.0, 0.0)])
    assert [f.code for f in REGISTRY["check_cache_hit_ratio"].run(c, {}).findings] == [
        FindingCode.CACHE_HIT_RATIO_LOW
    ]
    c.workspace.write_table(
        "database_stats", columns, [("shop", 50_000.0, 50_000.0, 0.0, 12.5)]
    )  # restarted 12.5 s later
    restarted = REGISTRY["check_cache_hit_ratio"].run(c, {})
    assert not restarted.findings and "restarted during the window" in restarted.partial
    assert restarted.unjudged == [FindingCode.CACHE_HIT_RATIO_LOW], "history keeps an earlier one"


def test_a_window_too_quiet_to_judge_the_cache_says_so_and_leaves_the_code_unjudged(tmp_path):
    """Under cache_min_block_accesses the ratio is no verdict: not an all-clear that would resolve the finding a
    busier review made; the same ratio over enough blocks is judged."""
    c = ctx(tmp_path)
    columns = CACHE_WINDOW_COLUMNS
    least = Settings().thresholds.cache_min_block_accesses
    c.workspace.write_table(
        "database_stats", columns, [("shop", least / 2, least / 2 - 1, 0.0, 0.0)]
    )  # half the blocks read, one access short of a verdict
    quiet = REGISTRY["check_cache_hit_ratio"].run(c, {})
    assert quiet.findings == [] and quiet.unjudged == [FindingCode.CACHE_HIT_RATIO_LOW]
    assert "the hit ratio is not judged" in quiet.partial, quiet.partial
    c.workspace.write_table("database_stats", columns, [("shop", least / 2, least / 2, 0.0, 0.0)])
    busy = REGISTRY["check_cache_hit_ratio"].run(c, {})
    assert [f.code for f in busy.findings] == [FindingCode.CACHE_HIT_RATIO_LOW]
    assert busy.partial == "" and busy.unjudged == []


def test_a_server_started_just_before_the_review_has_its_cache_unjudged_not_found_low(tmp_path):
    """A cold cache right after a start misses whatever shared_buffers' size: no finding, the coverage
    says why and leaves the code unjudged; the same window of a server up for longer is judged."""
    probed = datetime(2026, 11, 26, 1, 0, 0, tzinfo=UTC)

    def judged(up_seconds: float) -> Observation:
        started = probed - timedelta(seconds=up_seconds)
        c = replace(
            ctx(tmp_path),
            brief=Brief(
                server_version="18.0",
                server_version_num=180000,
                database="shop",
                current_user="watcher",
                probed_at=probed,
                server_started_at=started,
            ),
        )
        # The window's readings: 0.73 of the blocks hit, critical on a warm cache; no restart in it.
        counters = DatabaseStatsRow(
            *("shop", 1), *[0] * 13, 0.0, 0.0, None, 0.0, started.timestamp()
        )
        deltas = [("blks_hit_delta", 7_300.0), ("blks_read_delta", 2_700.0)] + [
            (name, 0.0) for name in ("temp_bytes_delta", "server_started_delta")
        ]
        hints = get_type_hints(DatabaseStatsRow)
        c.workspace.write_table(
            "database_stats",
            [(f.name, duckdb_type(hints[f.name])) for f in fields(DatabaseStatsRow)]
            + [(name, "DOUBLE") for name, _ in deltas],
            [(*astuple(counters), *(value for _, value in deltas))],
        )
        return REGISTRY["check_cache_hit_ratio"].run(c, {})

    cold = judged(6)
    assert cold.findings == [] and cold.unjudged == [FindingCode.CACHE_HIT_RATIO_LOW]
    assert cold.partial.startswith("the server started 6 s before the review"), cold.partial
    warm_up = Settings().thresholds.server_warm_up_seconds
    warm = judged(warm_up + 1)
    assert [(f.code, f.severity) for f in warm.findings] == [
        (FindingCode.CACHE_HIT_RATIO_LOW, Severity.CRITICAL)
    ]
    assert warm.partial == "" and warm.unjudged == []


def test_checkpointer_counters_reset_moments_ago_leave_the_checkpoint_check_unjudged(tmp_path):
    """pg_stat_reset_shared('checkpointer') twelve seconds before the review: a checkpoint or two an
    hour, nothing to judge yet, and an earlier finding is not resolved. Counters stamped with the
    server-wide statistics (initdb's stamp, kept across clean restarts) are judged."""
    probed = datetime(2026, 11, 26, 1, 0, 0, tzinfo=UTC)
    initdb = probed - timedelta(days=30)

    def judged(reset: datetime) -> Observation:
        c = replace(
            ctx(tmp_path),
            brief=Brief(
                server_version="18.0",
                server_version_num=180000,
                database="shop",
                current_user="watcher",
                system_identifier=str(int(initdb.timestamp()) << 32 | 7),
                probed_at=probed,
                server_started_at=probed - timedelta(seconds=30),
                shared_stats_reset_at=initdb,
            ),
        )
        land_rows(
            c.workspace,
            "checkpointer",
            CheckpointerRow,
            [CheckpointerRow("checkpointer", 1, 0, 0, 10, reset)],
        )
        return REGISTRY["check_checkpoints"].run(c, {})

    reset = judged(probed - timedelta(seconds=12))
    assert reset.findings == [] and reset.unjudged == [FindingCode.CHECKPOINTS_TOO_FREQUENT]
    assert reset.partial.startswith(
        "checkpointer statistics reset 12 s ago at 2026-11-26 00:59:48 UTC"
    ), reset.partial
    since_initdb = judged(initdb)
    assert since_initdb.partial == "" and since_initdb.unjudged == []
