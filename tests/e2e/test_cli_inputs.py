"""The CLI on the inputs a new user meets first: a Unix-socket target, and names that look like markup.

One small database holds a schema, tables, a column and comments whose names carry `[bold]`,
`[/tmp]`, both quotes, a comma, a newline and non-ASCII letters, with a table without primary key and a
foreign key without index planted there so findings must name them. It is reviewed twice from
the command line, once through the socket directory and once through TCP (window 1 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.operators.sql import qualified, quote_ident

SCHEMA = '[/tmp] sch\'ema "表"'
PARENT = "[bold]Ünïcødé\nparent"
CHILD = "[/tmp]child \"q\" 'x' 表"
COLUMN = "fk, [bold]\n'Ünïcødé' \"c\""  # the comma once split it in two
COMMENT = "[bold]not markup[/bold] [/tmp] 'q' \"dq\"\nline two 表"
DATABASE = "odd_names"

pytestmark = pytest.mark.prefect


@dataclass(frozen=True)
class CliReview:
    url: str
    result: subprocess.CompletedProcess[str]
    report: dict[str, Any]


@pytest.fixture(scope="module")
def odd_database(pg: EmbeddedPostgres) -> str:
    pg.psql(f"CREATE DATABASE {DATABASE};")
    with psycopg.connect(pg.dsn(DATABASE), autocommit=True) as conn:
        schema, parent, child, column = (sql.Identifier(n) for n in (SCHEMA, PARENT, CHILD, COLUMN))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        conn.execute(sql.SQL("CREATE TABLE {}.{} (id int PRIMARY KEY)").format(schema, parent))
        conn.execute(
            sql.SQL("CREATE TABLE {}.{} ({} int REFERENCES {}.{})").format(
                schema, child, column, schema, parent
            )
        )
        for kind, name in (("SCHEMA", schema), ("TABLE", sql.SQL("{}.{}").format(schema, child))):
            conn.execute(
                sql.SQL("COMMENT ON {} {} IS {}").format(sql.SQL(kind), name, sql.Literal(COMMENT))
            )
        conn.execute(
            sql.SQL("COMMENT ON COLUMN {}.{}.{} IS {}").format(
                schema, child, column, sql.Literal(COMMENT)
            )
        )
        conn.execute(sql.SQL("INSERT INTO {}.{} VALUES (1), (2)").format(schema, parent))
        conn.execute(sql.SQL("INSERT INTO {}.{} VALUES (1), (2), (NULL)").format(schema, child))
        conn.execute("ANALYZE")
    return DATABASE


@pytest.fixture(scope="module")
def reviews(
    pg: EmbeddedPostgres,
    odd_database: str,
    prefect_server: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, CliReview]:
    """The same database reviewed from the CLI through its socket directory and through TCP."""
    runs = {}
    for transport, url in (("socket", pg.socket_dsn(odd_database)), ("tcp", pg.dsn(odd_database))):
        out = tmp_path_factory.mktemp(f"review-{transport}")
        env = {
            **os.environ,
            "PREFECT_API_URL": prefect_server,
            "DBCREW_MEMORY_PATH": str(out / "memory.duckdb"),
            "COLUMNS": "400",
        }
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "dbcrew.cli",
                "review",
                url,
                "--window",
                "1",
                "--out",
                str(out / "report"),
                "--no-memory",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        report_path = out / "report" / "report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        runs[transport] = CliReview(url, result, report)
    return runs


@pytest.mark.parametrize("transport", ["socket", "tcp"])
def test_the_cli_reviews_through_the_socket_directory_and_through_tcp(
    reviews: dict[str, CliReview], pg: EmbeddedPostgres, transport: str
):
    review = reviews[transport]
    assert review.result.returncode == 0, review.result.stderr[-3000:]
    expected = {
        "socket": f"postgresql://postgres@/{DATABASE}?host={quote(str(pg.socket_dir), safe='/')}&port={pg.port}",
        "tcp": f"postgresql://postgres@127.0.0.1:{pg.port}/{DATABASE}",
    }[transport]
    assert review.report["target"]["display"] == expected
    assert review.result.stdout.startswith(f"{expected}: ")
    assert "MarkupError" not in review.result.stderr and "Traceback" not in review.result.stderr


def test_names_that_look_like_markup_reach_the_report_and_the_console_verbatim(
    reviews: dict[str, CliReview],
):
    review = reviews["socket"]
    assert review.result.returncode == 0, review.result.stderr[-3000:]
    objects = {f["code"]: [] for f in review.report["findings"]}
    for finding in review.report["findings"]:
        objects[finding["code"]].append(finding["object"])
    # Object names are quoted as identifiers (the form fix SQL takes), so a dot, quote or newline
    # in a name cannot make two names look like one.
    table = qualified(SCHEMA, CHILD)
    foreign_key = f"{table}({quote_ident(COLUMN)})"
    assert table in objects.get("table_without_primary_key", []), objects
    assert foreign_key in objects.get("fk_without_index", []), objects
    # The summary prints each problem's object as the report holds it: no tag eaten, no escape added.
    assert f"table_without_primary_key  {table}" in review.result.stdout, review.result.stdout
    assert f"fk_without_index           {foreign_key}" in review.result.stdout, review.result.stdout
    fix = next(
        f["fix_sql"]
        for f in review.report["findings"]
        if f["code"] == "fk_without_index" and f["object"] == foreign_key
    )
    assert fix == (
        'CREATE INDEX CONCURRENTLY ON "[/tmp] sch\'ema ""表"""."[/tmp]child ""q"" \'x\' 表" '
        '("fk, [bold]\n\'Ünïcødé\' ""c""");'
    )
