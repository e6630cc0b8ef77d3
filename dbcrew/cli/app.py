"""The `dbcrew` command line. Exit codes: 0 review completed, 3 review completed without its history (the
store could not be used), 2 unusable input, 1 internal error (docs/exit-codes.md)."""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol, runtime_checkable

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from dbcrew.cli import interrupts
from dbcrew.cli.ask import ask
from dbcrew.cli.console import SEVERITY_STYLES, err, fail, line, show
from dbcrew.cli.history import history
from dbcrew.cli.reviewing import (
    DEADLINE_HELP,
    DEFAULT_DEADLINE,
    past_interval,
    prefect_env,
    prepare_review,
    prometheus_source,
    review_in_process,
    runs_in_process,
    start_review,
)
from dbcrew.cli.server import server
from dbcrew.cli.watch import incidents, watch
from dbcrew.errors import UsageError
from dbcrew.models import Report
from dbcrew.models.prometheus import NODE_SELECTOR_HELP, SELECTOR_HELP
from dbcrew.models.request import ReviewRequest
from dbcrew.redact import redact
from dbcrew.roles.report.reporter import report_path
from dbcrew.secrets import hold_environment_secrets
from dbcrew.settings.environment import debugging
from dbcrew.settings.run import Ablations
from dbcrew.store import StoreUnavailable
from dbcrew.targets.postgres import first_line
from dbcrew.vocabulary import Scenario

if TYPE_CHECKING:  # the inventory module is loaded by the commands that read one
    from dbcrew.inventory import TargetEntry

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A crew of agents that reviews PostgreSQL databases.",
)


def run_errors_said_once() -> None:
    """Keep failed flow and task runs off Prefect's console handler: the CLI says a run's error itself, in one
    line (`main`), where Prefect would print it again as each failed run's traceback (a subflow's and its
    flow's: two). The server still gets these logs for its UI; DBCREW_DEBUG=1 shows the traceback."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()  # Prefect's handlers, as a flow call would set them up

    def not_a_run_error(record: logging.LogRecord) -> bool:
        run_log = record.name.startswith(("prefect.flow_runs", "prefect.task_runs"))
        return not (run_log and record.levelno >= logging.ERROR)

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            handler.addFilter(not_a_run_error)


def run_cli_review(request: ReviewRequest, url: str) -> Report:
    """Run the review flows of a prepared request with a progress bar; `url` is what the user typed."""
    if redact(url) != url:
        fail(
            "dbcrew: warning: a password on the command line can be seen by other users while the process starts;"
            " use PGPASSWORD, ~/.pgpass or a Prefect Secret block instead"
        )
    prefect_env()
    run_errors_said_once()
    in_process = runs_in_process(request)
    if not in_process:
        from dbcrew.cli.temporary_server import start_temporary_server

        start_temporary_server()
    from dbcrew import progress
    from dbcrew.progress import ProgressEvent

    assert request.target is not None  # prepare_review parsed it
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        job = bar.add_task(f"reviewing {request.target.display}", total=None)

        def on_event(event: ProgressEvent, data: dict[str, Any]) -> None:
            if event is ProgressEvent.PLAN:
                bar.update(job, total=data["total"], completed=data["done"])
            elif event is ProgressEvent.TASK:
                bar.advance(job)

        stop = progress.listen(on_event)
        try:
            run = review_in_process if in_process else start_review
            return interrupts.run_interruptible(lambda: run(request))
        finally:
            stop()


@app.command()
def review(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    window: Annotated[float, typer.Option(help="seconds to sample activity and counters")] = 10.0,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="directory for report.json/md/html and charts")
    ] = None,
    brain: Annotated[
        str | None, typer.Option(help="rules (offline) or openai (any OpenAI-compatible endpoint)")
    ] = None,
    inject_fault: Annotated[
        list[str],
        typer.Option(
            help="operator:KIND[:times], KIND one of timeout misfit disconnect bad_param missing_agent lost_dependency, to test recovery"
        ),
    ] = [],  # noqa: B006
    no_monitor: Annotated[
        bool,
        typer.Option("--no-monitor", help="ablation: failures are not classified, dependents skip"),
    ] = False,
    no_reflection: Annotated[
        bool,
        typer.Option(
            "--no-reflection",
            help="ablation: no plan reflection, no worker self-correction (retry, reconnect-and-resume)",
        ),
    ] = False,
    no_gap_narrow: Annotated[
        bool,
        typer.Option(
            "--no-gap-narrow", help="ablation: a re-plan takes a whole new plan and reruns all"
        ),
    ] = False,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="ablation: neither use nor keep lessons across runs")
    ] = False,
    threshold: Annotated[
        list[str],
        typer.Option(
            help="NAME=VALUE overriding a health-check threshold for this run, e.g. long_running_query_seconds=300"
        ),
    ] = [],  # noqa: B006
    deadline: Annotated[float, typer.Option(help=DEADLINE_HELP)] = DEFAULT_DEADLINE,
) -> None:
    """Review a database's health and write a report."""
    ablations = Ablations(
        monitor=not no_monitor,
        reflection=not no_reflection,
        gap_narrow=not no_gap_narrow,
        memory=not no_memory,
    )
    request = prepare_review(
        target,
        window=window,
        out_dir=out_dir,
        brain=brain,
        faults=inject_fault,
        ablations=ablations,
        thresholds=threshold,
        deadline=deadline,
    )
    report = run_cli_review(request, target)
    print_summary(report, request)
    exit_partial(report)


@app.command()
def diagnose(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    window: Annotated[float, typer.Option(help="seconds to watch the anomaly")] = 10.0,
    alert: Annotated[
        str, typer.Option(help="the alert text, e.g. 'queries 3x slower since 14:00'")
    ] = "",
    baseline: Annotated[
        Path | None, typer.Option(help="a window recorded in a quiet period (dbcrew baseline)")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="directory for report.json/md/html and charts")
    ] = None,
    brain: Annotated[
        str | None, typer.Option(help="rules (offline) or openai (any OpenAI-compatible endpoint)")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="diagnose a past interval from what `dbcrew watch` stored instead:"
            " its start, ISO 8601 or relative (-30m, -2h, -1d)",
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option("--to", help="the past interval's end (default: now)")
    ] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help="with --from: read the past interval from this Prometheus (postgres_exporter and node_exporter"
            " series) instead of the watcher's store, e.g. http://prometheus:9090"
        ),
    ] = None,
    prometheus_selector: Annotated[str, typer.Option(help=SELECTOR_HELP)] = "",
    node_selector: Annotated[str, typer.Option(help=NODE_SELECTOR_HELP)] = "",
    deadline: Annotated[float, typer.Option(help=DEADLINE_HELP)] = DEFAULT_DEADLINE,
    no_composition: Annotated[
        bool,
        typer.Option(
            "--no-composition",
            help="ablation: the full diagnosis playbook, not the team the alert calls for",
        ),
    ] = False,
    no_knowledge: Annotated[
        bool,
        typer.Option(
            "--no-knowledge", help="ablation: no knowledge chunks for the experts and the causes"
        ),
    ] = False,
) -> None:
    """Diagnose the root causes of a performance anomaly happening now, or of a past interval (--from, --to)."""
    interval = past_interval(since, until)
    request = prepare_review(
        target,
        window=window,
        out_dir=out_dir,
        brain=brain,
        scenario=Scenario.DIAGNOSE,
        alert=alert,
        baseline=baseline,
        interval=interval,
        prometheus=prometheus_source(prometheus, prometheus_selector, node_selector, interval),
        deadline=deadline,
        ablations=Ablations(composition=not no_composition, knowledge=not no_knowledge),
    )
    report = run_cli_review(request, target)
    print_diagnosis(report, request)
    exit_partial(report)


@app.command()
def baseline(
    target: Annotated[
        str, typer.Argument(help="postgresql://user@host:port/dbname (or ?host=/socket/dir)")
    ],
    out: Annotated[Path, typer.Option("--out", help="file to write the baseline window to (JSON)")],
    window: Annotated[float, typer.Option(help="seconds to watch the quiet period")] = 10.0,
) -> None:
    """Record a baseline window in a quiet period, for `dbcrew diagnose --baseline`."""
    from dbcrew.operators.window.live import sample_window
    from dbcrew.targets import parse_target

    if not math.isfinite(window) or window < 1:
        raise UsageError("--window must be a finite number of seconds, at least 1")
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; give the baseline's file name")
    parsed = parse_target(target)
    with parsed.session():
        pass
    sample_window(parsed, window).save(out)
    show(line(f"baseline: {out}"))


@app.command("extract-knowledge")
def extract_knowledge(
    documents: Annotated[
        Path, typer.Argument(help="folder of .md/.txt documents (e.g. manual chapters)")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help="YAML file for the extracted chunks (review, then move into dbcrew/knowledge/)",
        ),
    ],
) -> None:
    """Extract root-cause knowledge chunks from documents with the LLM brain (chapter split, summary tree, extraction)."""
    from dbcrew.operators.diagnose.experts_index import experts_by_code
    from dbcrew.operators.diagnose.extraction import extract_chunks, write_chunks
    from dbcrew.prompts import render
    from dbcrew.roles.brains import default_brain
    from dbcrew.roles.brains.openai import OpenAIBrain

    if default_brain() != "openai":
        raise UsageError(
            "knowledge extraction needs the LLM brain: set DBCREW_LLM_BASE_URL or OPENAI_API_KEY"
        )
    if not documents.is_dir():
        raise UsageError(f"{documents}: not a folder")
    chunks = extract_chunks(documents, OpenAIBrain(render).ask, experts_by_code())
    show(line(f"{len(chunks)} chunks: {write_chunks(chunks, out)}"))


def report_file(request: ReviewRequest) -> Path:
    assert request.out is not None  # prepare_review chose the folder
    return report_path(request.out)


# A review whose report is written but whose history is not: neither a clean 0 nor an internal error.
EXIT_PARTIAL = 3


def exit_partial(report: Report) -> None:
    """Exit 3 when the report has no history because the store could not be used (the report says why)."""
    if report.history_unavailable is not None:
        raise typer.Exit(code=EXIT_PARTIAL)


def show_report_file(report: Report, request: ReviewRequest) -> None:
    """Where the report is, and, when the store could not be used, that it has no history and why."""
    if report.history_unavailable is not None:
        show(line((report.history_unavailable.describe(), "yellow")))
    show(line(f"report: {report_file(request)}"))


def print_diagnosis(report: Report, request: ReviewRequest) -> None:
    show(
        line(
            (report.target.display, "bold"),
            f": {report.diagnosis.title if report.diagnosis else report.summary}",
        )
    )
    for cause in report.root_causes:
        show(line(f"  {cause.confidence:.2f} {cause.code:28} {cause.solution[:90]}"))
    show_report_file(report, request)


def print_summary(report: Report, request: ReviewRequest) -> None:
    problems = [f for f in report.findings if f.is_problem]
    show(line((report.target.display, "bold"), f": {report.summary}"))
    for finding in problems[:10]:
        severity = finding.severity.value
        show(
            line(
                "  ",
                (f"{severity:8}", SEVERITY_STYLES[severity]),
                f" {finding.code:26} {finding.object}",
            )
        )
    if len(problems) > 10:
        show(line(f"  ... and {len(problems) - 10} more"))
    show_report_file(report, request)


@app.command()
def demo(
    window: Annotated[float, typer.Option(help="seconds of the review's sampling window")] = 10.0,
    workdir: Annotated[Path, typer.Option(help="where the demo database and reports go")] = Path(
        ".dbcrew/demo"
    ),
) -> None:
    """Start an embedded PostgreSQL, plant problems in a shop database, review it."""
    from dbcrew.cli.demo import run_demo

    def review_demo(url: str, out_dir: Path) -> Report:
        request = prepare_review(url, window=window, out_dir=out_dir, brain="rules")
        report = run_cli_review(request, url)
        print_summary(report, request)
        return report

    missed = run_demo(workdir, review_demo)
    if missed:
        raise typer.Exit(code=1)


app.command()(history)
app.command()(ask)
app.command()(watch)
app.command()(incidents)


inventory_app = typer.Typer(
    no_args_is_help=True, help="The targets inventory (targets.yaml): check it, publish it."
)
app.add_typer(inventory_app, name="inventory")


@inventory_app.command("check")
def inventory_check(
    path: Annotated[Path, typer.Argument(help="targets.yaml")] = Path("targets.yaml"),
    connect: Annotated[
        bool,
        typer.Option(
            "--connect",
            help="also connect to each target with its password (read-only, 5 s connect timeout):"
            " one line per target, exit 2 if any fails",
        ),
    ] = False,
) -> None:
    """Check an inventory and list its targets (no password is read without --connect)."""
    from dbcrew.inventory import load_inventory

    inventory = load_inventory(path)
    if connect:
        check_inventory_connections(inventory.targets)
        return
    for entry in inventory.targets:
        show(
            line(
                (entry.name, "bold"),
                f"  {entry.url}  password: {entry.password_label}  {entry.scenario}"
                f"  window {entry.window:g}s  schedule: {entry.schedule or '-'}  tags: {', '.join(entry.tags) or '-'}"
                + (f"  watch: every {entry.watch.every:g}s" if entry.watch else ""),
            )
        )


def check_inventory_connections(entries: list[TargetEntry]) -> None:
    """One line per target, reached or not and why; UsageError (exit 2) naming those that failed."""
    from dbcrew.cli.connection_check import check_connections

    prefect_env()  # a password in a Secret block is read from the running server
    outcomes = check_connections(entries)
    for entry, outcome in zip(entries, outcomes, strict=True):
        show(
            line(
                (entry.name, "bold"),
                f"  {entry.url}  ",
                ("ok", "green") if outcome.ok else ("failed", "bold red"),
                f"  {outcome.detail}",
            )
        )
    failed = [o.name for o in outcomes if not o.ok]
    if failed:
        raise UsageError(
            f"{len(failed)} of {len(outcomes)} targets failed the connection check: {', '.join(failed)}"
        )


@inventory_app.command("publish")
def inventory_publish(
    path: Annotated[Path, typer.Argument(help="targets.yaml")] = Path("targets.yaml"),
) -> None:
    """Publish an inventory to the Prefect server (PREFECT_API_URL, or a server at the default address)."""
    from dbcrew.inventory import load_inventory

    inventory = load_inventory(path)
    prefect_env()
    if "PREFECT_API_URL" not in os.environ:
        raise UsageError("no Prefect server: start one (`dbcrew server`) or set PREFECT_API_URL")
    from dbcrew.flows.targets import publish_inventory

    publish_inventory(inventory)
    show(line(f"published {len(inventory.targets)} targets to {os.environ['PREFECT_API_URL']}"))


app.command()(server)


class McpTransport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


@app.command()
def mcp(
    transport: Annotated[
        McpTransport, typer.Option(help="stdio (the client starts the server) or streamable HTTP")
    ] = McpTransport.STDIO,
    host: Annotated[str, typer.Option(help="HTTP: the address to listen on")] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(min=1, max=65535, help="HTTP: the port to listen on (the endpoint is /mcp)"),
    ] = 8765,
    max_window: Annotated[
        float, typer.Option(min=0, help="the longest window a tool call may ask for, in seconds")
    ] = 60.0,
    row_limit: Annotated[
        int, typer.Option(min=1, max=10_000, help="rows per table an operator tool returns")
    ] = 100,
    max_reviews: Annotated[
        int,
        typer.Option(
            min=1,
            help="calls that may run a review at once (review, diagnose, ask with a target);"
            " a call beyond them is answered that the server is busy",
        ),
    ] = 2,
    brain: Annotated[
        str | None, typer.Option(help="the brain of reviews and answers: rules (offline) or openai")
    ] = None,
    docs: Annotated[
        Path | None,
        typer.Option(
            help="ask: folder of the PostgreSQL manual's HTML (default: Debian's postgresql-doc-15)"
        ),
    ] = None,
    inventory: Annotated[
        Path | None,
        typer.Option(
            help="targets.yaml: a tool call may name only its targets (any other URL is refused)"
        ),
    ] = None,
) -> None:
    """Serve the crew over MCP: ask, review, diagnose, latest_review and the read-only operators as tools.
    Over HTTP every request needs the bearer token printed at start (or DBCREW_MCP_TOKEN)."""
    from dbcrew.cli.mcp_server import Limits, inventory_targets, serve

    serve(
        transport.value,
        host,
        port,
        Limits(
            max_window=max_window,
            row_limit=row_limit,
            max_reviews=max_reviews,
            brain=brain,
            docs=docs,
            targets=inventory_targets(inventory) if inventory is not None else None,
            inventory=inventory,
        ),
    )


def _click_errors() -> tuple[type[Exception], ...]:
    """Click's exception base, as typer raises it: typer >= 0.25 bundles its own click (typer._click),
    whose exceptions are not the `click` package's; older typers raise click's own."""
    import click

    bundled = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return (bundled, click.ClickException)


CLICK_ERRORS = _click_errors()


@runtime_checkable
class _ClickError(Protocol):
    """What the handler uses of either of CLICK_ERRORS (mypy joins the two classes to Exception)."""

    def format_message(self) -> str: ...


def main() -> None:
    hold_environment_secrets()  # before any child process (the Prefect server) can inherit them
    interrupts.install()
    try:
        code = app(standalone_mode=False)  # typer turns KeyboardInterrupt into a returned 130
        if interrupts.received():
            interrupts.stop(interrupts.received()[0])
        if isinstance(code, int) and code:
            sys.exit(code)
    except (
        UsageError,
        StoreUnavailable,
    ) as exc:  # a store DBCREW_STORE_URL names that cannot be used
        fail(f"dbcrew: error: {exc}")
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        interrupts.stop((interrupts.received() or [signal.SIGINT])[0])
    except (
        CLICK_ERRORS
    ) as exc:  # a usage error (bad option value, unknown option or command, missing argument)
        assert isinstance(exc, _ClickError)
        fail(f"dbcrew: error: {first_line(Exception(exc.format_message()))}")
        sys.exit(2)
    except Exception as exc:  # the CLI's last line of defence: one line, exit 1
        if debugging():
            raise
        fail(
            f"dbcrew: internal error: {type(exc).__name__}: {first_line(exc)} (set DBCREW_DEBUG=1 for the traceback)"
        )
        sys.exit(1)
    except (
        BaseException
    ) as exc:  # Prefect's TerminationSignal: its own SIGTERM handler, armed while a flow runs
        signum = getattr(exc, "signal", None)
        if not isinstance(signum, int):
            raise
        interrupts.stop(signum)
