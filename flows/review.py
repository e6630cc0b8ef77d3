"""health_review: the flow a schedule, the Prefect UI or the CLI starts.

Parameters carry no secret: `target` is a password-free URL (the password comes from the
environment, ~/.pgpass, or the Prefect Secret block named by `target_secret`).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from dbcrew.models.faults import FaultSpec
from dbcrew.settings import Ablations, Settings, Thresholds
from dbcrew.targets import parse_target
from dbcrew.vocabulary import Scenario
from flows.artifacts import post_report
from flows.phases import PrefectPhases
from roles.crew import RunContext, run_review
from roles.history import reviewed
from roles.reporter import build_report, write_report


def run_link() -> str:
    """The Prefect UI page of this flow run, when the server has a UI address (empty otherwise)."""
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_UI_URL

    return str(flow_run.ui_url) if PREFECT_UI_URL.value() and flow_run.id else ""


def resolve_target(target: str | None, target_secret: str | None) -> str:
    if target_secret:
        from prefect.blocks.system import Secret

        return str(Secret.load(target_secret).get())
    if not target:
        raise ValueError("give either target or target_secret")
    return target


@flow(name="health_review", flow_run_name="{scenario}-review", validate_parameters=True)
def health_review(
    target: str | None = None,
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
    parsed = parse_target(resolve_target(target, target_secret))
    ablations = Ablations(monitor=monitor, reflection=reflection, gap_narrow=gap_narrow, memory=memory)
    settings = Settings(window_seconds=window, ablations=ablations, alert=alert, baseline_path=baseline,
                        thresholds=Thresholds(**(thresholds or {})))
    run = RunContext(target=parsed, scenario=scenario, settings=settings, out_dir=Path("."),
                     brain=brain, faults=faults or [])
    run.out_dir = Path(out) if out else Path("reports") / run.run_id
    return str(review_with(run))


def review_with(run: RunContext) -> Path:
    """Run the review, record it in the target's history (the shared store), write and post the report."""
    report = reviewed(run, lambda: build_report(run, run_review(run, PrefectPhases)).model_copy(update={"link": run_link()}))
    path = write_report(report, run.out_dir)
    post_report(run, report)
    return path
