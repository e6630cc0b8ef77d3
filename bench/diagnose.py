"""Diagnosis accuracy on injected anomalies (D-Bot's metric), and the time one diagnosis takes.

A real embedded PostgreSQL (fsync and synchronous_commit on, so WAL flushes cost what they
cost) gets the injection tables, one shared baseline window, then every root cause of
finding-codes.md alone and the two-cause combinations of bench.injections. Each case runs the
diagnose scenario through the crew (rules brain, no LLM) while the injection runs, and is scored
with D-Bot's accuracy: Acc = max(0, (A_c - sigma * A_w) / A_a) with sigma = 0.1 over at most 4
reported causes (A_c right, A_w wrong, A_a actual causes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import injections
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.models import Report
from dbcrew.operators.window.live import sample_window
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.spine import PlainPhases, review
from dbcrew.settings.run import Ablations, Settings
from dbcrew.targets import parse_target

SIGMA = 0.1
MAX_CAUSES = 4
WINDOW_SECONDS = 6.0
# The diagnosis server: durable commits (so commit pressure is real), 128 MB shared_buffers.
SERVER_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "shared_buffers": "'128MB'"}


def accuracy(
    expected: Sequence[str], reported: Sequence[str], sigma: float = SIGMA, limit: int = MAX_CAUSES
) -> float:
    """D-Bot's accuracy of one case: right causes minus sigma per wrong one, over the actual causes."""
    shown = list(dict.fromkeys(reported))[:limit]
    right = sum(1 for c in shown if c in expected)
    wrong = len(shown) - right
    return max(0.0, (right - sigma * wrong) / len(expected))


@dataclass
class DiagnosisServer:
    """An embedded PostgreSQL prepared for injections, with one recorded baseline window."""

    pg: EmbeddedPostgres
    dsn: str
    baseline: Path
    catalogue: str = injections.__name__  # the module whose RECIPES the cases name
    ablations: Ablations = field(default_factory=Ablations)  # what the suite's runs switch off

    @classmethod
    def start(
        cls,
        workdir: Path,
        baseline_seconds: float = WINDOW_SECONDS,
        prepare: Callable[[str], None] = injections.prepare_schema,
        catalogue: str = injections.__name__,
    ) -> DiagnosisServer:
        """Start the server, let `prepare(dsn)` create the suite's tables, then record the baseline of the idle server."""
        pg = EmbeddedPostgres(workdir / "data", settings=SERVER_SETTINGS).start()
        pg.psql("CREATE DATABASE diag;")
        pg.psql("CREATE EXTENSION pg_stat_statements;", "diag")
        dsn = pg.dsn("diag")
        prepare(dsn)
        baseline = workdir / "baseline.json"
        sample_window(parse_target(dsn), baseline_seconds).save(baseline)
        return cls(pg=pg, dsn=dsn, baseline=baseline, catalogue=catalogue)

    def stop(self) -> None:
        self.pg.stop()

    def diagnose(
        self, out_dir: Path, window: float = WINDOW_SECONDS, alert: str = "", brain: str = "rules"
    ) -> Report:
        """Run the diagnose scenario (the rules brain unless told, plain runner) and return its report."""
        settings = Settings(
            window_seconds=window,
            alert=alert,
            baseline_path=str(self.baseline),
            ablations=self.ablations,
        )
        run = RunContext(
            target=parse_target(self.dsn),
            scenario="diagnose",
            settings=settings,
            out_dir=out_dir,
            brain=brain,
        )
        return review(run, PlainPhases)

    def diagnose_injected(
        self, causes: Sequence[str], out_dir: Path, window: float = WINDOW_SECONDS
    ) -> tuple[Report, float]:
        """Inject `causes`, diagnose while they run; returns the report and the diagnosis's seconds."""
        with injections.injected(self.dsn, list(causes), catalogue=self.catalogue):
            started = time.monotonic()
            report = self.diagnose(out_dir, window, alert="queries are slower than usual")
            seconds = time.monotonic() - started
        return report, seconds


def task_cpu(report: Report) -> list[tuple[str, float]]:
    """The run's tasks that ran, with the CPU seconds of their workers' threads, most first."""
    spent = [
        (task, cpu)
        for member in report.team
        for task, cpu in zip(member.tasks, member.cpu_seconds, strict=True)
        if cpu is not None
    ]
    return sorted(spent, key=lambda pair: -pair[1])


def task_costs(spent: list[tuple[str, float]]) -> str:
    """Where a diagnosis's own CPU went, by task (the process's rest is the planning, the report and the
    preparations)."""
    listed = ", ".join(f"{task} {cpu:.3f}" for task, cpu in spent)
    return f"{len(spent)} tasks, {sum(cpu for _, cpu in spent):.2f} CPU-s: {listed}"


def time_cli_diagnosis(
    server: DiagnosisServer, out_dir: Path, cause: str = "lock_contention"
) -> tuple[float, int]:
    """Wall time of `dbcrew diagnose` as a user runs it with no Prefect server (in its own process), under one injection."""
    command = [
        sys.executable,
        "-m",
        "dbcrew.cli",
        "diagnose",
        server.dsn,
        "--window",
        str(WINDOW_SECONDS),
        "--baseline",
        str(server.baseline),
        "--alert",
        "queries are slower than usual",
        "--out",
        str(out_dir),
    ]
    with injections.injected(server.dsn, [cause]):
        started = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        seconds = time.monotonic() - started
    return seconds, result.returncode


SUITES = ("injection", "generalization", "outside")


def main(argv: Sequence[str] = ()) -> None:
    """The injection suite (default), or `--suite generalization|outside [its options]` (bench.generalization,
    bench.outside)."""
    parser = argparse.ArgumentParser(prog="python -m bench diagnose", add_help=False)
    parser.add_argument("--suite", choices=SUITES, default="injection")
    parser.add_argument(
        "--no",
        action="append",
        default=[],
        choices=("composition", "knowledge", "memory"),
        help="injection and outside suites: switch off the composed plan (the playbook runs), the"
        " knowledge, or the memory (lessons and unfixed errors carried from one case to the next on the"
        " suite's one server)",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        choices=injections.SINGLE,
        help="injection suite: only these single-cause cases (one diagnosis to look into)",
    )
    known, rest = parser.parse_known_args(list(argv))
    ablations = Ablations(**dict.fromkeys(known.no, False))
    if known.suite == "generalization":
        from bench import generalization

        if known.no:
            parser.error("--no applies to the injection and outside suites")
        generalization.main(rest)
    elif known.suite == "outside":
        from bench import outside

        outside.main(rest, ablations)
    elif rest:
        parser.error(f"the injection suite takes no options but --no and --case ({' '.join(rest)})")
    else:
        injection_suite(ablations, known.case)


def injection_suite(ablations: Ablations | None = None, only: Sequence[str] = ()) -> None:
    """Every case (or `only` these single causes), each with its wall and this process's CPU seconds
    (the crew's threads; the server's and the injection's processes are not counted), and its tasks'
    CPU seconds beneath."""
    ablations = ablations or Ablations()
    print(f"switched off: {', '.join(ablations.off()) or 'nothing'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="dbcrew-bench-diagnose-") as tmp:
        workdir = Path(tmp)
        server = DiagnosisServer.start(workdir)
        server.ablations = ablations
        try:
            cases = [(c,) for c in only] or [(c,) for c in injections.SINGLE] + list(
                injections.COMBINATIONS
            )
            rows = []
            cpus: list[float] = []
            by_task: dict[str, list[float]] = {}
            for i, causes in enumerate(cases):
                cpu = time.process_time()
                report, seconds = server.diagnose_injected(causes, workdir / f"case{i}")
                cpu = time.process_time() - cpu
                cpus.append(cpu)
                found = [rc.code for rc in report.root_causes]
                rows.append((causes, found, accuracy(causes, found), seconds))
                print(
                    f"{' + '.join(causes):58} acc {rows[-1][2]:.2f}  {seconds:5.1f}s  cpu {cpu:4.1f}s  found: {', '.join(found) or '-'}",
                    flush=True,
                )
                spent = task_cpu(report)
                for task, task_seconds in spent:
                    by_task.setdefault(task, []).append(task_seconds)
                print(f"    {task_costs(spent)}", flush=True)
            cli_seconds, cli_exit = time_cli_diagnosis(server, workdir / "cli")
        finally:
            server.stop()
    single = [r[2] for r in rows if len(r[0]) == 1]
    multi = [r[2] for r in rows if len(r[0]) > 1]
    per_cause: dict[str, list[float]] = {}
    for causes, _found, acc, _s in rows:
        for cause in causes:
            per_cause.setdefault(cause, []).append(acc)
    print()
    print(f"{'root cause':32} cases  accuracy")
    for cause, values in per_cause.items():
        print(f"{cause:32} {len(values):5}  {sum(values) / len(values):.2f}")
    print(
        f"single-cause accuracy {sum(single) / len(single):.3f} over {len(single)} cases (target >= 0.90)"
    )
    if multi:
        print(
            f"multi-cause accuracy  {sum(multi) / len(multi):.3f} over {len(multi)} cases (target >= 0.80)"
        )
    print(
        f"all {len(rows)} diagnoses: {sum(r[3] for r in rows):.1f} s wall, {sum(cpus):.1f} CPU-s of this"
        " process"
    )
    print(f"tasks' CPU over the {len(rows)} cases (their workers' threads):")
    for task, spent in sorted(by_task.items(), key=lambda item: -sum(item[1])):
        print(
            f"  {task:32} {len(spent):3} runs  {sum(spent):6.2f} CPU-s  {sum(spent) / len(spent):.3f} a run"
        )
    slowest = max(r[3] for r in rows)
    print(
        f"one diagnosis (crew, plain runner): window {WINDOW_SECONDS:.0f}s, slowest {slowest:.1f}s"
        f" (limit window + 60 s = {WINDOW_SECONDS + 60:.0f}s)"
    )
    print(
        f"one diagnosis via `dbcrew diagnose` (no Prefect server: in process): {cli_seconds:.1f}s, exit {cli_exit}"
    )
