"""Painter operators: charts as PNG files in the run directory, embedded later in the report."""

from __future__ import annotations

from dbcrew.models import Role
from dbcrew.vocabulary import Category
from operators.figures import pyplot
from operators.registry import Observation, OperatorContext, operator

TOP_TABLES = 10


@operator(role=Role.PAINTER, category=Category.PAINT, needs=("table_stats",), produces=("chart_table_activity",))
def paint_table_activity(ctx: OperatorContext) -> Observation:
    """Bar chart of the busiest tables: sequential vs index scans and dead tuples."""
    rows = ctx.workspace.query(
        "SELECT schemaname || '.' || relname AS name, seq_scan, idx_scan, n_dead_tup FROM table_stats"
        " ORDER BY seq_scan + idx_scan + n_dead_tup DESC LIMIT ?",
        [TOP_TABLES],
    )
    charts_dir = ctx.run_dir / "charts"
    charts_dir.mkdir(parents=True, exist_ok=True)
    path = charts_dir / "table_activity.png"
    names = [r["name"] for r in rows][::-1]
    plt = pyplot()
    fig, (scans, dead) = plt.subplots(1, 2, figsize=(10, 0.45 * max(len(rows), 3) + 1.5), sharey=True)
    try:
        positions = range(len(names))
        scans.barh([p - 0.2 for p in positions], [r["seq_scan"] for r in rows][::-1], height=0.4, label="sequential scans")
        scans.barh([p + 0.2 for p in positions], [r["idx_scan"] for r in rows][::-1], height=0.4, label="index scans")
        scans.set_yticks(list(positions), names)
        scans.set_xscale("symlog")
        scans.set_title("Scans since statistics began")
        scans.legend(loc="lower right", fontsize="small")
        dead.barh(list(positions), [r["n_dead_tup"] for r in rows][::-1], color="tab:red")
        dead.set_xscale("symlog")
        dead.set_title("Dead tuples")
        fig.tight_layout()
        fig.savefig(path, dpi=80)
    finally:
        plt.close(fig)
    return Observation(summary=f"chart of {len(rows)} tables", artifacts=["chart_table_activity"], charts=[str(path.relative_to(ctx.run_dir))])
