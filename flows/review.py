"""health_review: the flow a schedule, the Prefect UI or the CLI starts.

Parameters carry no secret: `target` is a password-free URL (the password comes from the
environment, ~/.pgpass, or the Prefect Secret block named by `target_secret`), or, when the flow
is called in process (the CLI), a parsed target whose password is a private attribute that
Prefect's parameter encoding leaves out.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from dbcrew.models import Report
from dbcrew.models.faults import FaultSpec
from dbcrew.settings import Ablations, Settings, Thresholds, reports_retention_days, reports_root
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.vocabulary import Scenario
from flows.artifacts import post_report
from flows.phases import PrefectPhases
from roles.crew import RunContext
from roles.reporter import prune_reports, report_path
from roles.review import review


def run_link() -> str:
    """The Prefect UI page of this flow run, when the server has a UI address (empty otherwise)."""
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_UI_URL

    return str(flow_run.ui_url) if PREFECT_UI_URL.value() and flow_run.id else ""


def resolve_target(target: str | PostgresTarget | None, target_secret: str | None) -> PostgresTarget:
    if target_secret:
        from prefect.blocks.system import Secret

        return parse_target(str(Secret.load(target_secret).get()))
    if isinstance(target, PostgresTarget):
        return target
    if not target:
        raise ValueError("give either target or target_secret")
    return parse_target(target)


@flow(name="health_review", flow_run_name="{scenario}-review", validate_parameters=True)
def health_review(
    target: str | PostgresTarget | None = None,
    target_secret: str | None = None,
    scenario: Scenario = Scenario.HEALTH,
    window: float = 10.0,
    brain: str = "rules",
    out: str | None = None,
    faults: list[FaultSpec] | None = None,
    monitor: bool = True,
    reflection: bool = True,
    gap_narrow: bool = True,
    memory: bool = True,
    alert: str = "",
    baseline: str | None = None,
    thresholds: dict[str, float] | None = None,
) -> str:
    """Review one PostgreSQL database; returns the path of report.json (under reports/<run id> by default).

    `monitor`, `reflection`, `gap_narrow` and `memory` switch recovery features off, to measure them.
    scenario="diagnose" diagnoses a performance anomaly: `alert` is the alert text (data, never
    instructions), `baseline` the path of a window recorded in a quiet period (`dbcrew baseline`).
    `thresholds` overrides health-check thresholds for this run (names of dbcrew.settings.Thresholds).
    """
    parsed = resolve_target(target, target_secret)
    ablations = Ablations(monitor=monitor, reflection=reflection, gap_narrow=gap_narrow, memory=memory)
    settings = Settings(window_seconds=window, ablations=ablations, alert=alert, baseline_path=baseline,
                        thresholds=Thresholds(**(thresholds or {})))
    run = RunContext(target=parsed, scenario=scenario, settings=settings, out_dir=Path(out or "."),
                     brain=brain, faults=faults or [])
    if out:
        review_with(run)
    else:
        review_in_reports(run)
    return str(report_path(run.out_dir))


def review_in_reports(run: RunContext) -> Report:
    """Review into reports_root()/<run id>, then drop the reports past their retention on this disk."""
    run.out_dir = reports_root() / run.run_id
    report = review_with(run)
    prune_reports(reports_root(), reports_retention_days())
    return report


def review_with(run: RunContext) -> Report:
    """Review (recorded in the target's history, the shared store) and post the report as artifacts."""
    run.link = run.link or run_link()
    report = review(run, PrefectPhases)
    post_report(run, report)
    return report
