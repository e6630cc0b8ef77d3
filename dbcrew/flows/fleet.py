"""fleet_review and scheduled_reviews: one review per target, each a flow run on the work pool.

The reviews are runs of the on-demand deployment, so whichever worker of the pool is free takes
each one, on any machine; the pool's review queue caps how many run at once and each target's
global concurrency limit keeps one review per target. A target that fails (unreachable,
authentication) fails its own run only; the summary artifact lists it with the reason.

`fleet_review` reviews the inventory (or a tag of it) when started; `scheduled_reviews` is what a
schedule starts: the targets of one schedule group (dbcrew.inventory.ScheduleGroup), as the
published inventory holds them when the slot fires. One deployment and one cron schedule per group,
not per target: Prefect's scheduler keeps runs ahead for each schedule, and a scheduler with a
thousand of them does nothing else. Each review is still its own flow run named by its target, with
its target's tags, alert URLs and history.
"""

from __future__ import annotations

import json
import time
from typing import cast
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import TERMINAL_STATES, FlowRun
from prefect.utilities.urls import url_for
from pydantic import BaseModel, Field

from dbcrew.errors import UsageError
from dbcrew.flows.artifacts import OUTCOME
from dbcrew.flows.starting import start_run
from dbcrew.flows.targets import ON_DEMAND_DEPLOYMENT, published_inventory
from dbcrew.inventory import TargetEntry
from dbcrew.models.target_run import TargetRun

FIRST_POLL_SECONDS = 1.0  # the shortest pause between two polls of a fleet's runs (next_poll)
LAST_POLL_SECONDS = 15.0  # the longest
POLL_SHARE = 0.25  # of the time the runs left should take: the pause before the next poll
OUTCOME_PAGE = 200  # runs whose outcomes one request reads (each run posts one outcome)


class FleetRow(BaseModel):
    """One target's line of the fleet summary."""

    target: str
    state: str
    worst: str = "-"
    problems: int | None = None
    new: int | None = None
    resolved: int | None = None
    run_url: str = ""
    detail: str = ""


@flow(name="fleet_review", flow_run_name="fleet-{tag}")
def fleet_review(
    tag: str | None = Field(
        None, description="review only the targets carrying this tag; empty: every target"
    ),
    window: float | None = Field(
        None, ge=1, description="seconds each review samples; empty: each target's own"
    ),
    deployment: str = Field(
        ON_DEMAND_DEPLOYMENT,
        description="the deployment each review runs as (flow/deployment)",
    ),
) -> list[dict[str, object]]:
    """Review every target of the published inventory (or those with `tag`); returns the summary rows."""
    entries = published_inventory().select(tag)
    if not entries:
        raise UsageError(f"no target of the inventory carries the tag {tag!r}")
    rows = review_each(entries, deployment, window)
    post_summary(
        rows,
        "# Fleet review" + (f" (tag {tag})" if tag else ""),
        "dbcrew-fleet" + (f"-{tag}" if tag else ""),
    )
    return [r.model_dump() for r in rows]


@flow(name="scheduled_reviews", flow_run_name="{schedule}")
def scheduled_reviews(
    schedule: str = Field(
        description="the schedule group whose targets are reviewed (its deployment's name)"
    ),
) -> list[dict[str, object]]:
    """One slot of a schedule: review each target of its group, as the published inventory holds them now (a
    target added to the group and published is reviewed at the next slot, with no new deployment)."""
    group, entries = published_inventory().on_schedule(schedule)
    rows = review_each(entries, ON_DEMAND_DEPLOYMENT)
    post_summary(
        rows,
        f"# Scheduled {group.scenario.value} reviews (`{group.cron}` UTC)",
        f"dbcrew-schedule-{group.name}",
    )
    return [r.model_dump() for r in rows]


def review_each(
    entries: list[TargetEntry], deployment: str, window: float | None = None
) -> list[FleetRow]:
    """Start one run of `deployment` per target (with its tags, `window` seconds or its own), wait for every one,
    and return their summary rows; the failed ones are logged in one line."""
    started = {
        entry.name: start_run(
            TargetRun(target=entry.name, window=window), entry.tags, deployment, child=True
        ).id
        for entry in entries
    }
    finished = wait_all(list(started.values()))
    outcomes = read_outcomes(
        [run.id for run in finished.values() if run.state and run.state.is_completed()]
    )
    rows = [
        row_of(name, finished[run_id], outcomes.get(run_id)) for name, run_id in started.items()
    ]
    failed = [r.target for r in rows if r.state != "COMPLETED"]
    if failed:
        get_run_logger().warning(
            "%d of %d reviews failed: %s", len(failed), len(rows), ", ".join(failed)
        )
    return rows


def wait_all(run_ids: list[UUID]) -> dict[UUID, FlowRun]:
    """Every run once it reached a final state (the reviews run meanwhile on the pool's workers).

    Each poll asks only for the runs that ended since the last one, so its answer stays small however
    many runs wait for a slot (the server the reviews share does not load them again each second), and
    the polls come as often as the runs end (`next_poll`), not every second."""
    done: dict[UUID, FlowRun] = {}
    ended = FlowRunFilterState(type=FlowRunFilterStateType(any_=sorted(TERMINAL_STATES)))
    started = time.monotonic()
    with get_client(sync_client=True) as client:
        while len(done) < len(run_ids):
            pending = [i for i in run_ids if i not in done]
            done |= {
                run.id: run
                for run in client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=pending), state=ended)
                )
            }
            if len(done) < len(run_ids):
                time.sleep(next_poll(time.monotonic() - started, len(done), len(run_ids)))
    return done


def next_poll(waited: float, ended: int, total: int) -> float:
    """Seconds until the next poll of a fleet's runs: `ended` of `total` have ended after `waited` seconds.

    A poll every second asked the server once a second for as long as a fleet ran (a thousand reviews at
    4 at once: about a thousand polls, each naming every pending run). The summary needs every run's end
    and nothing earlier, so the pause is a share (POLL_SHARE) of the time the runs left should still take
    at the rate they have ended so far, between FIRST_POLL_SECONDS and LAST_POLL_SECONDS: a few polls while
    many are left, one a second near the end, where the fleet's own end waits for the poll. Until one has
    ended there is no rate: a poll a second (a review takes seconds, so these are few)."""
    if ended == 0:
        return FIRST_POLL_SECONDS
    left = (total - ended) * waited / ended
    return min(max(left * POLL_SHARE, FIRST_POLL_SECONDS), LAST_POLL_SECONDS)


def row_of(name: str, run: FlowRun, outcome: dict[str, object] | None) -> FleetRow:
    """The target's summary row from its run and the outcome it posted (None: none found)."""
    state = run.state
    row = FleetRow(
        target=name,
        state=state.type.value if state else "UNKNOWN",
        run_url=url_for("flow-run", obj_id=run.id) or "",
    )
    if state is None or not state.is_completed():
        return row.model_copy(
            update={"worst": "failed", "detail": (state.message if state else "") or "no state"}
        )
    if outcome is None:
        return row.model_copy(update={"detail": "the review posted no outcome"})
    return row.model_copy(
        update={k: outcome.get(k) for k in ("worst", "problems", "new", "resolved")}
    )


def read_outcomes(run_ids: list[UUID]) -> dict[UUID, dict[str, object]]:
    """The outcome row each run posted, by run: one client and one request a page of OUTCOME_PAGE runs
    (a request per run, each on a client of its own, was a thousand of each for a fleet of a thousand)."""
    found: dict[UUID, dict[str, object]] = {}
    with get_client(sync_client=True) as client:
        for start in range(0, len(run_ids), OUTCOME_PAGE):
            page = run_ids[start : start + OUTCOME_PAGE]
            for artifact in client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=page),
                    key=ArtifactFilterKey(like_=f"dbcrew-{OUTCOME}-%"),
                ),
                limit=len(page),
            ):
                data = artifact.data
                # A table artifact's data is its rows (Prefect types `data` for every kind of artifact).
                rows = (
                    json.loads(data)
                    if isinstance(data, str)
                    else cast(list[dict[str, object]] | None, data)
                )
                if artifact.flow_run_id is not None and rows:
                    found[artifact.flow_run_id] = rows[0]
    return found


def _cell(value: object) -> str:
    text = "-" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    """A cell's text as a code span: an error naming `postgres@host` must not become an e-mail link in the UI."""
    return f"`{_cell(value).replace('`', chr(39))}`" if value else ""


def post_summary(rows: list[FleetRow], title: str, key: str) -> None:
    """The reviews' table, worst first: target, worst severity, new, resolved, and a link to each run."""
    order = {"failed": 0, "critical": 1, "warning": 2, "info": 3, "none": 4}
    lines = [
        title,
        "",
        f"{sum(r.state == 'COMPLETED' for r in rows)} of {len(rows)} reviews completed.",
        "",
        "| target | worst | problems | new | resolved | run | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (order.get(r.worst, 5), r.target)):
        link = f"[{r.state.lower()}]({r.run_url})" if r.run_url else r.state.lower()
        lines.append(
            f"| {_cell(r.target)} | {_cell(r.worst)} | {_cell(r.problems)} | {_cell(r.new)} | "
            f"{_cell(r.resolved)} | {link} | {_code(r.detail)} |"
        )
    create_markdown_artifact("\n".join(lines), key=key, description="reviews summary")
