"""`dbcrew demo`: embedded PostgreSQL + the planted shop + a real review, then a planted-vs-found table."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from rich.table import Table
from rich.text import Text

from dbcrew.cli.console import line, show
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.models import Report


def run_demo(workdir: Path, review: Callable[[str, Path], Report]) -> list[tuple[str, str]]:
    """Plant, review (`review` runs and prints it), compare; returns the planted problems missed ([] is success)."""
    workdir = workdir.resolve()
    datadir = workdir / "pgdata"
    if datadir.exists():
        shutil.rmtree(datadir)
    workdir.mkdir(parents=True, exist_ok=True)
    show(line("starting embedded PostgreSQL ..."))
    pg = EmbeddedPostgres(datadir).start()
    shop: DemoShop | None = None
    try:
        pg.psql("CREATE DATABASE shop;")
        show(line("building the shop database and planting problems ..."))
        shop = DemoShop(pg.dsn("shop")).build()
        shop.run_workload(8.0)
        shop.start_background_workload()
        shop.wait_until_idle_long_enough()
        report = review(pg.dsn("shop"), workdir / "report")
        found = {(f.code, f.object) for f in report.findings}
        table = Table(title="planted problems")
        table.add_column("code")
        table.add_column("object")
        table.add_column("found")
        for code, obj in sorted(shop.expected):
            table.add_row(
                Text(code),
                Text(obj),
                Text("yes") if (code, obj) in found else Text("NO", style="red"),
            )
        show(table)
        unplanted = [
            f for f in report.findings if f.is_problem and (f.code, f.object) not in shop.expected
        ]
        for finding in unplanted:
            show(
                line(
                    ("not planted:", "yellow"),
                    f" {finding.severity.value} {finding.code} {finding.object}",
                )
            )
        show(line(f"open {workdir / 'report' / 'report.html'}"))
        return sorted(shop.expected - found)
    finally:
        if shop is not None:
            shop.close()
        pg.stop()
