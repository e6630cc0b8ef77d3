"""`dbcrew history TARGET`: a target's runs and trends from the shared store (DBCREW_STORE_URL)."""

from __future__ import annotations

from typing import Annotated

import typer

from dbcrew.cli.console import SEVERITY_STYLES, line, show
from dbcrew.errors import UsageError
from dbcrew.store import Store, TargetSummary, open_store
from dbcrew.vocabulary import Scenario


def find_target(store: Store, target: str) -> TargetSummary:
    """A target by its URL (any password is ignored), its identity, or a unique part of its display."""
    known = store.targets()
    if not known:
        raise UsageError(f"no history yet in the store {store.location}: run `dbcrew review` first")
    if "://" in target:
        from dbcrew.targets import parse_target

        display = parse_target(target).display
        matches = [t for t in known if t.display == display]
    else:
        matches = [t for t in known if t.target == target] or [
            t for t in known if target in t.display
        ]
    if len(matches) != 1:
        names = ", ".join(t.display for t in known[:10])
        raise UsageError(
            f"{'no' if not matches else 'more than one'} target in the store matches {target!r}"
            f" (known: {names})"
        )
    return matches[0]


def _number(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def history(
    target: Annotated[
        str,
        typer.Argument(
            help="the target's URL, its identity (system identifier/database) or part of its display"
        ),
    ],
    scenario: Annotated[Scenario, typer.Option(help="which reviews to list")] = Scenario.HEALTH,
    limit: Annotated[int, typer.Option(min=1, help="how many of the latest runs")] = 20,
) -> None:
    """Print a target's runs and trends from the shared store: findings, changes and vital signs per run."""
    from dbcrew.roles.report.comparing import timeline

    store = open_store()
    found = find_target(store, target)
    rows = timeline(store, found.target, scenario.value, limit)
    show(
        line((found.display, "bold"), f"  ({found.target}, {found.runs} runs in {store.location})")
    )
    # Lines rather than a table: a table squeezes its columns into 80 characters when stdout is not a terminal.
    show(
        line(
            f"{'started (UTC)':19}  {'status':9}  {'crit/warn/info':>14}  {'new':>4} {'regr':>4} {'res':>4}"
            f"  {'hit %':>6}  {'dead tuples':>11}  {'XID age':>13}  {'size MiB':>9}"
        )
    )
    for row in rows:
        v = row.vitals
        counts = f"{v.critical}/{v.warning}/{v.info}" if v else "-"
        hit = v.cache_hit_ratio * 100 if v and v.cache_hit_ratio is not None else None
        size = v.database_bytes / 2**20 if v and v.database_bytes is not None else None
        worst = "critical" if v and v.critical else "warning" if v and v.warning else "info"
        show(
            line(
                f"{row.run.started_at:%Y-%m-%d %H:%M:%S}  {row.run.status.value:9}  ",
                (f"{counts:>14}", SEVERITY_STYLES[worst]),
                f"  {row.new:>4} {row.regressed:>4} {row.resolved:>4}  {_number(hit, '.2f'):>6}"
                f"  {_number(v.dead_tuples if v else None, ',d'):>11}  {_number(v.oldest_xid_age if v else None, ',d'):>13}"
                f"  {_number(size, ',.1f'):>9}",
            )
        )
    if not rows:
        show(line(f"no {scenario.value} runs stored for this target"))
    for row in rows[-1:]:
        show(line(f"latest: {row.run.link or row.run.report or row.run.error}"))
