"""Collectors of what is read once, not sampled: settings, foreign keys, sequences, transaction-ID ages and who holds the xmin horizon."""

from __future__ import annotations

from dataclasses import dataclass

from dbcrew.artifacts import declare
from dbcrew.models import Role
from dbcrew.operators.registry import Observation, OperatorContext, operator
from dbcrew.operators.sql import fetch, land
from dbcrew.targets import own_pids
from dbcrew.vocabulary import Category

SETTINGS_SQL = """
SELECT name, setting, unit, source, boot_val, reset_val, context, vartype
FROM pg_settings
"""


@dataclass(frozen=True, slots=True)
class SettingRow:
    """A row of `settings` (SETTINGS_SQL): pg_settings as text, `setting` in `unit`s."""

    name: str
    setting: str | None
    unit: str | None
    source: str
    boot_val: str | None
    reset_val: str | None
    context: str
    vartype: str


SETTINGS = declare("settings")  # pg_settings (SETTINGS_SQL)


@operator(role=Role.EXTRACTOR, category=Category.COLLECT, produces=(SETTINGS,))
def collect_settings(ctx: OperatorContext) -> Observation:
    """Read pg_settings (values the role may not read show as hidden, and are left out)."""
    with ctx.target.session() as conn:
        columns, rows = fetch(conn, SETTINGS_SQL)
    count = land(ctx.workspace, SETTINGS, columns, rows)
    return Observation(summary=f"settings: {count} rows", artifacts=[SETTINGS])


FOREIGN_KEYS_SQL = """
SELECT k.oid AS constraint_oid, k.conname::text, n.nspname::text AS schemaname, c.relname::text,
       k.conrelid AS relid,
       (SELECT json_agg(a.attname::text ORDER BY u.ord)::text
          FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum) AS column_names,
       rn.nspname::text || '.' || rc.relname::text AS referenced
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class rc ON rc.oid = k.confrelid
JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE k.contype = 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"""


@dataclass(frozen=True, slots=True)
class ForeignKeyRow:
    """A row of `foreign_keys` (FOREIGN_KEYS_SQL); `column_names` is a JSON array (dbcrew.operators.sql.name_list)."""

    constraint_oid: int
    conname: str
    schemaname: str
    relname: str
    relid: int
    column_names: str | None
    referenced: str


SEQUENCES_SQL = """
SELECT s.schemaname::text, s.sequencename::text, s.data_type::text, s.last_value, s.increment_by,
       -- A bigint sequence feeding an integer column runs out at the column's maximum (PgHero's trap).
       least(s.max_value, CASE a.atttypid WHEN 'int2'::regtype THEN 32767 WHEN 'int4'::regtype THEN 2147483647
                                          ELSE s.max_value END) AS max_value,
       coalesce(a.atttypid::regtype::text, '') AS column_type,
       -- last_value is NULL both for a never-used sequence and for one this role may not read.
       (has_sequence_privilege(c.oid, 'SELECT,USAGE') AND s.last_value IS NULL) AS never_used
FROM pg_sequences s
JOIN pg_namespace n ON n.nspname = s.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.sequencename
LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
     AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND d.refobjsubid > 0
LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
"""


@dataclass(frozen=True, slots=True)
class SequenceRow:
    """A row of `sequences` (SEQUENCES_SQL); `last_value` is None when never used or unreadable (`never_used` tells)."""

    schemaname: str
    sequencename: str
    data_type: str
    last_value: int | None
    increment_by: int
    max_value: int
    column_type: str
    never_used: bool


# Each row also says how far the server lets it age before it forces an anti-wraparound vacuum
# (autovacuum_freeze_max_age and its multixact twin; a table's own reloption lowers them for it, never
# raises them) and whether autovacuum is off for it (off for the server, without the counters it
# needs, or a table's autovacuum_enabled = false): then only those forced vacuums ever freeze it.
WRAPAROUND_SQL = """
WITH server AS (
  SELECT current_setting('autovacuum_freeze_max_age')::bigint AS freeze_max_age,
         current_setting('autovacuum_multixact_freeze_max_age')::bigint AS mxid_freeze_max_age,
         NOT (current_setting('autovacuum')::bool AND current_setting('track_counts')::bool) AS autovacuum_off)
SELECT 'database'::text AS scope, datname::text AS name,
       age(datfrozenxid)::bigint AS xid_age, mxid_age(datminmxid)::bigint AS mxid_age,
       s.freeze_max_age, s.mxid_freeze_max_age, s.autovacuum_off
FROM pg_database, server s WHERE datallowconn
UNION ALL
SELECT * FROM (
  -- A table is as old as the older of itself and its TOAST table (PgHero); only rows past a
  -- threshold (or close to their freeze limit), capped, so 10,000 young tables cost nothing.
  SELECT 'table'::text, format('%%I.%%I', n.nspname, c.relname),
         greatest(age(c.relfrozenxid), age(t.relfrozenxid))::bigint AS xid_age,
         greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid))::bigint AS mxid_age,
         least(s.freeze_max_age, o.freeze_max_age) AS freeze_max_age,
         least(s.mxid_freeze_max_age, o.mxid_freeze_max_age) AS mxid_freeze_max_age,
         s.autovacuum_off OR NOT coalesce(o.enabled, true) AS autovacuum_off
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
  CROSS JOIN server s
  CROSS JOIN LATERAL (
    SELECT max(option_value) FILTER (WHERE option_name = 'autovacuum_freeze_max_age')::bigint AS freeze_max_age,
           max(option_value) FILTER (WHERE option_name = 'autovacuum_multixact_freeze_max_age')::bigint AS mxid_freeze_max_age,
           max(option_value) FILTER (WHERE option_name = 'autovacuum_enabled')::bool AS enabled
    FROM pg_options_to_table(c.reloptions)) o
  WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
    AND (greatest(age(c.relfrozenxid), age(t.relfrozenxid))
           >= least(%(xid_floor)s, %(near)s * least(s.freeze_max_age, o.freeze_max_age))
         OR greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid))
           >= least(%(mxid_floor)s, %(near)s * least(s.mxid_freeze_max_age, o.mxid_freeze_max_age)))
  ORDER BY 3 DESC LIMIT 500) AS old_tables
"""


@dataclass(frozen=True, slots=True)
class WraparoundRow:
    """A row of `wraparound` (WRAPAROUND_SQL): a database, or a table past the warning ages (or close
    to its freeze limit), as `%I.%I`; its freeze limits and whether autovacuum is off for it."""

    scope: str
    name: str
    xid_age: int | None
    mxid_age: int | None
    freeze_max_age: int
    mxid_freeze_max_age: int
    autovacuum_off: bool


# Who holds the xmin horizon: vacuum removes no row version and freezes no XID newer than the
# oldest of these. One row per holder; `database` NULL when it holds every database back, `here`
# when it holds the reviewed one, `catalog_only` when it holds only the system catalogs (a
# logical slot's catalog_xmin).
# Walsenders are left to their standby or slot row, autovacuum workers are ignored by the
# horizon, parallel workers share their leader's, and the review's own sessions are short.
# A session without an XID of its own holds only a snapshot, and a snapshot taken a moment ago
# carries the horizon someone else holds (its xmin is the oldest running XID): such a session is
# named for the time it has held its snapshot, never for the age it inherited (`snapshot_only`).
XMIN_HORIZON_SQL = """
SELECT h.*, (h.database IS NULL OR h.database = current_database()) AS here FROM (
SELECT 'transaction'::text AS kind, 'pid:' || a.pid AS holder, a.datname::text AS database, false AS catalog_only,
       a.backend_xid IS NULL AS snapshot_only,
       greatest(age(a.backend_xmin), age(a.backend_xid))::bigint AS xmin_age,
       extract(epoch FROM now() - a.xact_start)::float8 AS held_seconds,
       concat_ws(', ', a.usename::text, nullif(a.application_name, ''), a.state) AS detail
FROM pg_stat_activity a
WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
  AND a.pid <> ALL(%(own)s::int[])  -- the review's own sessions, by backend PID (never by name)
  AND a.backend_type NOT IN ('walsender', 'autovacuum worker', 'parallel worker')
UNION ALL
SELECT 'prepared_transaction', 'prepared ' || p.gid, p.database::text, false, false, age(p.transaction)::bigint,
       extract(epoch FROM now() - p.prepared)::float8, 'owner ' || p.owner::text
FROM pg_prepared_xacts p
UNION ALL
SELECT 'replication_slot', 'slot ' || s.slot_name, NULL, s.xmin IS NULL, false,
       greatest(age(s.xmin), age(s.catalog_xmin))::bigint, NULL,
       concat_ws(', ', s.slot_type::text || coalesce(' (' || s.plugin::text || ')', ''),
                 CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
                 'consumer ' || nullif(r.application_name, ''))
FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL
UNION ALL
SELECT 'standby', 'replica ' || coalesce(r.application_name, '') || coalesce('@' || host(r.client_addr), ''), NULL, false, false,
       age(r.backend_xmin)::bigint, NULL, concat_ws(', ', r.state::text, 'hot_standby_feedback')
FROM pg_stat_replication r
WHERE r.backend_xmin IS NOT NULL) AS h
"""


@dataclass(frozen=True, slots=True)
class HorizonRow:
    """A row of `xmin_horizon` (XMIN_HORIZON_SQL): one holder of the xmin horizon."""

    kind: str
    holder: str
    database: str | None
    catalog_only: bool
    snapshot_only: bool
    xmin_age: int | None
    held_seconds: float | None
    detail: str
    here: bool


FOREIGN_KEYS = declare("foreign_keys")  # FOREIGN_KEYS_SQL
SEQUENCES = declare("sequences")  # SEQUENCES_SQL
WRAPAROUND = declare("wraparound")  # WRAPAROUND_SQL
XMIN_HORIZON = declare("xmin_horizon")  # XMIN_HORIZON_SQL


@operator(
    role=Role.EXTRACTOR,
    category=Category.COLLECT,
    produces=(FOREIGN_KEYS, SEQUENCES, WRAPAROUND, XMIN_HORIZON),
)
def collect_schema(ctx: OperatorContext) -> Observation:
    """Read foreign keys, sequences, transaction-ID ages (database and table level) and who holds the xmin horizon."""
    with ctx.target.session() as conn:
        t = ctx.settings.thresholds
        floors = {
            "xid_floor": t.xid_warning_age,
            "mxid_floor": t.mxid_warning_age,
            "near": t.freeze_max_age_near_ratio,
        }
        for table, sql, args in (
            (FOREIGN_KEYS, FOREIGN_KEYS_SQL, None),
            (SEQUENCES, SEQUENCES_SQL, None),
            (WRAPAROUND, WRAPAROUND_SQL, floors),
            (XMIN_HORIZON, XMIN_HORIZON_SQL, {"own": own_pids(conn)}),
        ):
            columns, rows = fetch(conn, sql, args)
            land(ctx.workspace, table, columns, rows)
    return Observation(
        summary="schema: foreign keys, sequences, wraparound ages, xmin horizon holders",
        artifacts=[FOREIGN_KEYS, SEQUENCES, WRAPAROUND, XMIN_HORIZON],
    )
