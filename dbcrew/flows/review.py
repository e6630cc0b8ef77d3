"""health_review: the flow a schedule, the Prefect UI, the CLI, MCP and `ask` start, and the one review path.

It takes a `ReviewRequest` (dbcrew/models/request.py, the options declared once) and returns the
`Report`. Parameters carry no secret: the request's target is a password-free URL on the server
(the password comes from the worker's environment, ~/.pgpass, or the Prefect Secret block named by
`target_secret`); called in process (the CLI), it is the parsed target, whose password is a private
attribute that Prefect's parameter encoding leaves out.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from dbcrew.flows.artifacts import post_report
from dbcrew.flows.dispatch import ran_sync
from dbcrew.flows.phases import PrefectPhases
from dbcrew.models import Report
from dbcrew.models.request import ReviewRequest
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import ReviewPhases, kept_in_reports, review
from dbcrew.targets import PostgresTarget, parse_target


def run_link() -> str:
    """The Prefect UI page of this flow run, when the server has a UI address (empty otherwise)."""
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_UI_URL

    return str(flow_run.ui_url) if PREFECT_UI_URL.value() and flow_run.id else ""


def resolve_target(request: ReviewRequest) -> PostgresTarget:
    """The request's target: its parsed URL, or the URL held by the Prefect Secret block it names."""
    if request.target_secret:
        from prefect.blocks.system import Secret

        return parse_target(str(ran_sync(Secret.load(request.target_secret)).get()))
    assert request.target is not None  # ReviewRequest holds one of the two
    return request.target


@flow(name="health_review", flow_run_name="{request.scenario}-review", validate_parameters=True)
def health_review(request: ReviewRequest) -> Report:
    """Review (or diagnose) one PostgreSQL database as `request` says; the Report, written into `request.out`
    (reports/<run id> when empty, pruned by age and size there), recorded in the target's history, posted as artifacts."""
    return conduct(
        RunContext.of(request, resolve_target(request), request.out or Path(), link=run_link())
    )


def conduct(run: RunContext, phases: ReviewPhases = PrefectPhases) -> Report:
    """Review `run` under Prefect, its phases run by `phases` (subflows by default), its report posted as
    artifacts; without an `out`, into reports_root()/<run id> (kept_in_reports)."""
    with kept_in_reports(run):
        return review(run, phases, post=post_report)
