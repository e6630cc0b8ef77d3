"""Gather the facts of one diagnosis: sample the window, compare with the baseline, explain statements."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from dbcrew.models.report import CoverageEntry
from dbcrew.settings import Thresholds
from dbcrew.targets import PostgresTarget
from operators.diagnose.anomaly import AbnormalMetric, abnormal_metrics
from operators.diagnose.evidence import WindowBaseline, WindowEvidence
from operators.diagnose.experts import Facts
from operators.diagnose.plan_issues import StatementPlan, analyse_statements
from operators.diagnose.sampler import sample_window

TOP_STATEMENTS = 5
MIN_SHARE = 0.05
# Statements that read the server's own statistics are monitoring (ours or another tool's), not workload.
MONITORING = re.compile(
    r"\bpg_(stat|settings|class|index|database|locks|catalog)\w*", re.IGNORECASE
)


class FactsRecord(BaseModel):
    """Facts as stored in the run's workspace between the sampler and the experts."""

    window: WindowEvidence
    baseline: WindowEvidence | None = None
    baseline_source: str = Field("", description="where the baseline came from; empty: no baseline")
    abnormal: list[AbnormalMetric] = Field(default_factory=list)
    plans: list[StatementPlan] = Field(default_factory=list)
    alert: str = ""
    coverage: list[CoverageEntry] = Field(
        default_factory=list, description="what these facts cannot show (a past interval's)"
    )

    def facts(self, thresholds: Thresholds | None = None) -> Facts:
        """The experts' view of the record, judged by the run's `thresholds` (the defaults without)."""
        return Facts(
            window=self.window,
            baseline=self.baseline,
            abnormal=self.abnormal,
            plans=self.plans,
            thresholds=thresholds or Thresholds(),
        )


def statement_candidates(window: WindowEvidence) -> list[tuple[str, float]]:
    """The heaviest statements: finished ones by share of statement time, running ones by share of samples."""
    finished = [s for s in window.statements if not MONITORING.search(s.query)]
    total = sum(s.total_exec_time_ms for s in finished)
    shares: dict[str, float] = {}
    for s in finished:
        if total > 0:
            shares[s.query] = s.total_exec_time_ms / total
    active = sum(n for q, n in window.running.items() if not MONITORING.search(q))
    for query, seen in window.running.items():
        if active and not MONITORING.search(query):
            shares[query] = max(shares.get(query, 0.0), seen / active)
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    return [(q, share) for q, share in ranked[:TOP_STATEMENTS] if share >= MIN_SHARE]


def gather(
    target: PostgresTarget,
    seconds: float,
    stored: WindowBaseline | None,
    alert: str = "",
    wait: float = 0.0,
    resume: bool = True,
) -> FactsRecord:
    return facts_of(target, sample_window(target, seconds, wait=wait, resume=resume), stored, alert)


def facts_of(
    target: PostgresTarget,
    window: WindowEvidence,
    stored: WindowBaseline | None,
    alert: str = "",
    coverage: Sequence[CoverageEntry] = (),
) -> FactsRecord:
    """The facts of a window, sampled now or read from the store: compared with the baseline, its heaviest statements explained."""
    baseline = stored.window if stored else None
    rows = {t.name.split(".", 1)[-1]: t.n_live_tup for t in window.tables}
    plans = analyse_statements(
        target, statement_candidates(window), window.server_version_num, rows
    )
    return FactsRecord(
        window=window,
        baseline=baseline,
        baseline_source=stored.source if stored else "",
        abnormal=abnormal_metrics(window, baseline),
        plans=plans,
        alert=alert,
        coverage=list(coverage),
    )
