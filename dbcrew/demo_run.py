"""`dbcrew demo`: embedded PostgreSQL + the planted shop + a real review, then a planted-vs-found table."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dbcrew.demo import DemoShop
from dbcrew.embedded import EmbeddedPostgres
from dbcrew.models import Report


def run_demo(workdir: Path, window: float, review: Callable[[str, Path], Path], summarize: Callable[[Path], None]) -> list[tuple[str, str]]:
    """Returns the planted problems the review missed ([] is success)."""
    console = Console()
    workdir = workdir.resolve()
    datadir = workdir / "pgdata"
    if datadir.exists():
        shutil.rmtree(datadir)
    workdir.mkdir(parents=True, exist_ok=True)
    console.print("starting embedded PostgreSQL ...")
    pg = EmbeddedPostgres(datadir).start()
    shop: DemoShop | None = None
    try:
        pg.psql("CREATE DATABASE shop;")
        console.print("building the shop database and planting problems ...")
        shop = DemoShop(pg.dsn("shop")).build()
        shop.run_workload(8.0)
        shop.start_background_workload()
        shop.wait_until_idle_long_enough()
        path = review(pg.dsn("shop"), workdir / "report")
        summarize(path)
        report = Report.model_validate_json(path.read_text())
        found = {(f.code, f.object) for f in report.findings}
        table = Table(title="planted problems")
        table.add_column("code")
        table.add_column("object")
        table.add_column("found")
        for code, obj in sorted(shop.expected):
            table.add_row(code, obj, "yes" if (code, obj) in found else "[red]NO[/red]")
        console.print(table)
        unplanted = [f for f in report.findings if f.is_problem and (f.code, f.object) not in shop.expected]
        for finding in unplanted:
            console.print(f"[yellow]not planted:[/yellow] {finding.severity.value} {finding.code} {finding.object}")
        console.print(f"open {path.parent / 'report.html'}")
        return sorted(shop.expected - found)
    finally:
        if shop is not None:
            shop.close()
        pg.stop()
