"""Bench section `orchestration`: the demo review's wall time, and the share of it spent in Prefect overhead.

The same review (same planted shop, same window) runs twice: once through the Prefect flows
(ephemeral server already warm, as for any run after the first), once through the plain phase
runner. The difference is what orchestration costs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.models.request import ReviewRequest
from dbcrew.settings.run import Settings
from dbcrew.targets import parse_target

WINDOW = 10.0


def main() -> None:
    from dbcrew.flows.review import health_review
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.spine import PlainPhases, review

    work = Path(tempfile.mkdtemp(prefix="dbcrew-bench-"))
    pg = EmbeddedPostgres(work / "pgdata").start()
    shop = None
    try:
        pg.psql("CREATE DATABASE shop;")
        shop = DemoShop(pg.dsn("shop")).build()
        shop.run_workload(8.0)
        shop.start_background_workload()
        target = parse_target(pg.dsn("shop"))

        started = time.perf_counter()
        health_review(
            ReviewRequest(
                target=target, settings=Settings(window_seconds=WINDOW), out=work / "warmup"
            )
        )  # cold server start
        cold = time.perf_counter() - started

        started = time.perf_counter()
        health_review(
            ReviewRequest(
                target=target, settings=Settings(window_seconds=WINDOW), out=work / "prefect"
            )
        )
        with_prefect = time.perf_counter() - started

        started = time.perf_counter()
        plain_run = RunContext(
            target=target, settings=Settings(window_seconds=WINDOW), out_dir=work / "plain"
        )
        review(plain_run, PlainPhases)
        plain = time.perf_counter() - started
    finally:
        if shop is not None:
            shop.close()
        pg.stop()
    overhead = with_prefect - plain
    print(f"demo review, window {WINDOW:.0f}s, 2 cores")
    print(f"  first run (ephemeral Prefect server cold start included): {cold:6.1f} s")
    print(f"  review through Prefect flows:                              {with_prefect:6.1f} s")
    print(f"  same review, plain phase runner:                           {plain:6.1f} s")
    print(
        f"  Prefect overhead:                                          {overhead:6.1f} s ({overhead / with_prefect:.0%} of the review)"
    )
