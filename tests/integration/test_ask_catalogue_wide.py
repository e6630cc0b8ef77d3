"""Questions over the whole catalogue, on a real PostgreSQL: answered from every table's rows, within a cap."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.roles.ask import catalogue_wide
from dbcrew.roles.ask.answer import ask
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.vocabulary import Route

# Six tables, each with one planted property the others lack (what a catalogue-wide question asks).
SCHEMA = """
CREATE TABLE members (id bigint PRIMARY KEY, email text NOT NULL);
CREATE TABLE journal (at timestamptz NOT NULL DEFAULT now(), line text);
CREATE TABLE loans (id bigint PRIMARY KEY, member_id bigint NOT NULL REFERENCES members) WITH (fillfactor = 70);
CREATE TABLE fines (id bigint PRIMARY KEY, member_id bigint NOT NULL REFERENCES members)
  WITH (autovacuum_enabled = false);
CREATE INDEX fines_member_id_idx ON fines (member_id, id);
CREATE TABLE shelves (id bigint PRIMARY KEY, label text);
CREATE TABLE archive (id bigint PRIMARY KEY, body text);
INSERT INTO archive SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g;
INSERT INTO members SELECT g, 'm' || g FROM generate_series(1, 100) g;
ANALYZE members; ANALYZE archive; ANALYZE loans; ANALYZE fines; ANALYZE shelves;
"""


@pytest.fixture(scope="module")
def library(pg: EmbeddedPostgres) -> Iterator[PostgresTarget]:
    pg.psql("CREATE DATABASE library;")
    with psycopg.connect(pg.dsn("library"), autocommit=True) as conn:
        conn.execute(SCHEMA)
    yield parse_target(pg.dsn("library"))
    pg.psql("DROP DATABASE library;")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBCREW_CACHE_DIR", str(tmp_path / "cache"))


def _listed(text: str) -> set[str]:
    tables = {"members", "journal", "loans", "fines", "shelves", "archive"}
    return {t for t in tables if f"public.{t}" in text}


def test_a_table_without_primary_key_is_found_among_every_table(library: PostgresTarget):
    answer = ask("which tables have no primary key?", library)
    assert answer.route is Route.INSTANCE
    assert _listed(answer.answer) == {"journal"}
    assert answer.answer.startswith("1 of the 6 tables have no primary key")
    (call,) = answer.tools
    assert call.operator == "table_keys" and call.params == {
        "tables": "every table",
        "read": 6,
        "of": 6,
    }


def test_two_look_ups_chain_per_table_for_foreign_keys_no_index_serves(library: PostgresTarget):
    answer = ask("are there foreign keys without an index on the referencing columns?", library)
    assert [t.operator for t in answer.tools] == ["table_keys", "table_indexes"]
    # loans' key has no index; fines' key is served by fines_member_id_idx (member_id leads it)
    assert _listed(answer.answer) == {"loans"}
    assert "loans_member_id_fkey (member_id)" in answer.answer


def test_storage_settings_and_thresholds_are_read_from_every_table(
    library: PostgresTarget, pg: EmbeddedPostgres
):
    fill = ask("do any tables carry a non-default fillfactor?", library)
    assert _listed(fill.answer) == {"loans"} and "fillfactor=70" in fill.answer
    off = ask("Which tables have autovacuum switched off?", library)
    assert _listed(off.answer) == {"fines"}
    on = ask("which tables have autovacuum enabled?", library)
    assert _listed(on.answer) == {"members", "journal", "loans", "shelves", "archive"}
    big = ask("which tables are larger than 1 MB?", library)
    with psycopg.connect(pg.dsn("library")) as conn:
        over = {
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
                " AND pg_total_relation_size(oid) > 1024 * 1024"
            )
        }
    assert over == {"archive"} and _listed(big.answer) == over
    never = ask("list the tables that were never analyzed", library)
    assert _listed(never.answer) == {"journal"}


def test_a_question_naming_a_table_stays_a_per_table_look_up(library: PostgresTarget):
    answer = ask("what is the primary key of loans?", library)
    assert answer.tools[0].operator == "table_keys"
    assert answer.tools[0].params == {"schema_name": "public", "table": "loans"}


def test_the_cap_bounds_the_tables_read_and_the_answer_says_so(library: PostgresTarget):
    wide = catalogue_wide.recognized("which tables have no primary key?", names_an_object=False)
    assert wide is not None
    with library.session() as conn:
        capped = catalogue_wide.answer(conn, wide, cap=2)
    (keys,) = capped.looked_up
    # the first two by schema and name: archive and fines, both with a key
    assert sorted(keys.rows) == [("public", "archive"), ("public", "fines")] and keys.total == 6
    assert capped.text.startswith("None of the first 2 of 6 tables have no primary key")
    assert "the other 4 were not" in capped.text
