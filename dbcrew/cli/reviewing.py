"""One review request, checked the same way whichever way it comes in (the command line, the MCP server).

`prepare_review` turns what a user typed into the one `ReviewRequest` (dbcrew/models/request.py)
or raises UsageError (one line, no secret): a window that is not a finite number, a baseline that is not one, an unknown fault
operator or brain, an `--out` that cannot take a report, a target that does not answer, a past interval
that is not one or that the store (or the Prometheus named) holds no samples of. Only then
does `start_review` run the health_review flow, so bad input never starts Prefect.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from dbcrew.cli.outdir import prepare_out
from dbcrew.cli.server import DEFAULT_PORT, api_url, healthy
from dbcrew.errors import UsageError
from dbcrew.models import Brief, Report
from dbcrew.models.faults import FaultSpec
from dbcrew.models.interval import PastInterval, parse_moment
from dbcrew.models.prometheus import PrometheusSource
from dbcrew.models.request import ReviewRequest
from dbcrew.operators.collect.probe import read_brief
from dbcrew.settings.overrides import parse_overrides
from dbcrew.settings.run import Ablations, Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.store import StoreUnavailable
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.targets.postgres import first_line
from dbcrew.vocabulary import Scenario

DEFAULT_DEADLINE = Settings.model_fields["deadline_after_window_seconds"].default
DEADLINE_HELP = (
    "seconds after the window by which the report is due: charts and a model's experts stand down"
    " before it, and the causes found are written"
)

PREFECT_DEFAULTS = {
    # Measured on 2 cores: a cold ephemeral server needs 17-21 s against a 20 s default.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
}


def prefect_env() -> None:
    """Prefect's settings for a CLI run; a server running at the default address is used, not an ephemeral one."""
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if "PREFECT_API_URL" not in os.environ and healthy(api_url(DEFAULT_PORT)):
        os.environ["PREFECT_API_URL"] = api_url(DEFAULT_PORT)


def default_out(dbname: str) -> Path:
    """reports/<db>-<time>, created here and empty: the name is the database's, made safe as one path component.

    Claimed by an exclusive mkdir, with -2, -3, ... after a name another run took: reviews of one
    database started in the same second (the MCP server's concurrent calls) would otherwise share a
    folder and a workspace, and one would fail or clear the other's report.
    """
    database = re.sub(r"[^\w.-]+", "-", dbname).strip(".-") or "db"
    stem = Path("reports") / f"{database}-{datetime.now():%Y%m%d-%H%M%S}"
    folder, attempt = stem, 1
    while True:
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            attempt += 1
            folder = stem.with_name(f"{stem.name}-{attempt}")
            continue
        except OSError:
            return folder  # unwritable: prepare_out meets the same error and says it in one line
        return folder


def prepare_review(
    url: str,
    *,
    window: float,
    out_dir: Path | None,
    brain: str | None,
    scenario: Scenario = Scenario.HEALTH,
    faults: Sequence[str] = (),
    ablations: Ablations | None = None,
    alert: str = "",
    baseline: Path | None = None,
    thresholds: Sequence[str] = (),
    interval: PastInterval | None = None,
    prometheus: PrometheusSource | None = None,
    deadline: float = DEFAULT_DEADLINE,
) -> ReviewRequest:
    """The review request of what a user typed, once its input is valid and the target answers; UsageError otherwise."""
    if not math.isfinite(window) or window < 0:
        raise UsageError("--window must be a finite number of seconds, zero or more")
    if not math.isfinite(deadline) or deadline < 0:
        raise UsageError(
            "--deadline must be a finite number of seconds after the window, zero or more"
        )
    if scenario is Scenario.DIAGNOSE and window < 1:
        raise UsageError("--window must be at least 1 second for a diagnosis")
    if baseline is not None:
        check_baseline(baseline)
    target = parse_target(url)
    try:
        fault_specs = [FaultSpec.parse(f) for f in faults]
        overrides = parse_overrides(list(thresholds))
    except ValueError as exc:
        raise UsageError(first_line(exc)) from None
    _check_fault_operators(fault_specs)
    chosen = _check_brain(brain)
    report_dir = prepare_out(out_dir or default_out(target.dbname))
    with target.session() as conn:  # unreachable or refused: exit 2 now, before any flow starts
        if interval is not None and prometheus is not None:
            check_prometheus(target, prometheus, interval)
        elif interval is not None:
            check_recorded(target, read_brief(conn), interval)
    settings = Settings(
        window_seconds=window,
        deadline_after_window_seconds=deadline,
        ablations=ablations or Ablations(),
        alert=alert,
        baseline_path=str(baseline.resolve()) if baseline else None,
        thresholds=Thresholds(**overrides),
    )
    return ReviewRequest(
        target=target,
        scenario=scenario,
        brain=chosen,
        settings=settings,
        faults=fault_specs,
        out=report_dir,
        interval=interval,
        prometheus=prometheus,
    )


def past_interval(since: str | None, until: str | None) -> PastInterval | None:
    """The interval `--from`/`--to` name (the end defaults to now), None when neither is given; UsageError in one line."""
    if since is None:
        if until is not None:
            raise UsageError("--to needs --from: the past interval's start")
        return None
    now = datetime.now(UTC)
    try:
        return PastInterval(start=parse_moment(since, now), end=parse_moment(until or "now", now))
    except ValidationError as exc:
        raise UsageError(
            f"--from/--to: {exc.errors()[0]['msg'].removeprefix('Value error, ')}"
        ) from None
    except ValueError as exc:
        raise UsageError(f"--from/--to: {first_line(exc)}") from None


def check_recorded(target: PostgresTarget, brief: Brief, interval: PastInterval) -> None:
    """The store holds samples of `target` in `interval`, or UsageError: a diagnosis of nothing would report no cause."""
    from dbcrew.store.samples import open_samples

    try:
        store = open_samples()
    except StoreUnavailable as exc:
        raise UsageError(str(exc)) from None
    identity = brief.identity(target.address)
    if not any(
        store.passes(identity, r, interval.start, interval.end) for r in store.resolutions(identity)
    ):
        raise UsageError(
            f"no samples of {target.display} from {interval.describe()} in the store {store.location}:"
            f" `dbcrew watch {target.display}` records them"
        )


def prometheus_source(
    url: str | None, selector: str, node_selector: str, interval: PastInterval | None
) -> PrometheusSource | None:
    """The Prometheus `--prometheus` names (None without it), valid and with an interval to read; UsageError in one line."""
    if url is None:
        if selector or node_selector:
            raise UsageError("--prometheus-selector and --node-selector need --prometheus")
        return None
    if interval is None:
        raise UsageError(
            "--prometheus needs --from: Prometheus is read for a past interval (a live diagnosis samples the target)"
        )
    try:
        return PrometheusSource(url=url, selector=selector, node_selector=node_selector)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = {"url": "--prometheus", "selector": "--prometheus-selector"}.get(
            str(error["loc"][0]), "--node-selector"
        )
        shown = (
            "" if field == "--prometheus" else f" {error.get('input', '')!s}"
        )  # a URL may hold a password
        raise UsageError(f"{field}{shown}: {error['msg'].removeprefix('Value error, ')}") from None


def check_prometheus(
    target: PostgresTarget, source: PrometheusSource, interval: PastInterval
) -> None:
    """Prometheus answers and holds the target's series in `interval`, or UsageError: a diagnosis of nothing would report no cause."""
    from dbcrew.operators.window.prometheus.api import Prometheus
    from dbcrew.operators.window.prometheus.source import AmbiguousSeries, select
    from dbcrew.operators.window.store import NoSamples

    try:
        select(Prometheus(source.address), source, target, interval)
    except (NoSamples, AmbiguousSeries) as exc:
        raise UsageError(str(exc)) from None


def runs_in_process(request: ReviewRequest) -> bool:
    """Whether a CLI run goes without Prefect: a diagnosis with no Prefect server named (after prefect_env).

    A diagnosis is asked for while the host is on fire: there a temporary Prefect server took 100 s to
    start (4 clients a core, 2 cores), past the answer's whole deadline, and its runs die with the CLI
    anyway. So it runs in this process (dbcrew/roles/spine.py), recorded in the store like any run; with
    a server running (`dbcrew server`, PREFECT_API_URL or a profile's), it is a flow run there."""
    if request.scenario is not Scenario.DIAGNOSE:
        return False
    from prefect.settings import PREFECT_API_URL

    return not PREFECT_API_URL.value()


def review_in_process(request: ReviewRequest) -> Report:
    """The request's run as plain calls, into `request.out` (prepare_review made it)."""
    from dbcrew.roles.crew.context import RunContext
    from dbcrew.roles.spine import PlainPhases, review

    assert request.target is not None and request.out is not None  # prepare_review's
    return review(RunContext.of(request, request.target, request.out), PlainPhases)


def start_review(request: ReviewRequest) -> Report:
    """Run the health_review flow (through the Prefect server prefect_env finds, or an ephemeral one)."""
    prefect_env()
    from dbcrew.flows.heartbeats import without_heartbeats
    from dbcrew.flows.review import health_review

    # The request holds the parsed target: its password is private, so no flow parameter carries it.
    with (
        without_heartbeats()
    ):  # the run lives and ends in this process (dbcrew/flows/heartbeats.py)
        return health_review(request)


def _check_brain(brain: str | None) -> str:
    from dbcrew.roles.brains import BRAINS, default_brain

    chosen = brain or default_brain()
    if chosen not in BRAINS:
        raise UsageError(f"unknown brain {chosen!r}: choose one of {', '.join(BRAINS)}")
    if chosen == "openai":
        from dbcrew.llm.client import endpoint_limits

        endpoint_limits()  # a bad DBCREW_LLM_TIMEOUT / DBCREW_LLM_MAX_RETRIES: exit 2 before any flow starts
    return chosen


def check_baseline(path: Path) -> None:
    """A baseline the diagnosis can compare with, or UsageError: garbage would pass for a quiet window."""
    from pydantic import ValidationError

    from dbcrew.operators.window.evidence import WindowEvidence

    if not path.is_file():
        raise UsageError(f"--baseline {path}: no such file (record one with `dbcrew baseline`)")
    try:
        WindowEvidence.load(path)
    except (ValidationError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"--baseline {path}: not a baseline recorded by `dbcrew baseline` ({type(exc).__name__})"
        ) from None


def _check_fault_operators(faults: list[FaultSpec]) -> None:
    """A fault on an operator that does not exist would never fire: the review would look resilient."""
    from difflib import get_close_matches

    from dbcrew.operators import REGISTRY

    for fault in faults:
        if fault.operator not in REGISTRY:
            near = get_close_matches(fault.operator, REGISTRY, n=3)
            hint = (
                f"; did you mean {' or '.join(near)}?"
                if near
                else f"; one of {', '.join(sorted(REGISTRY))}"
            )
            raise UsageError(f"--inject-fault {fault}: no operator named {fault.operator!r}{hint}")
