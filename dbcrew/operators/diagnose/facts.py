"""Gather the facts of one diagnosis: sample the window, compare with the baseline, explain statements."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from dbcrew.models.report import CoverageEntry, StatementChange
from dbcrew.operators.diagnose.candidates import Facts
from dbcrew.operators.diagnose.heavy_statements import judge_statements
from dbcrew.operators.diagnose.judgements import StatementPlan
from dbcrew.operators.window.anomaly import AbnormalMetric, abnormal_metrics
from dbcrew.operators.window.evidence import (
    MONITORING,
    StatementDelta,
    WindowBaseline,
    WindowEvidence,
)
from dbcrew.operators.window.live import sample_window, sampling_coverage
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import PostgresTarget

TOP_CHANGES = 5
LEAST_CHANGE_MS = (
    1.0  # ms of statement time per second (a thousandth of a session): less is noise, not a change
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
    changed: list[StatementChange] = Field(
        default_factory=list,
        description="the statements whose time per second changed most against the baseline",
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


def changed_statements(
    window: WindowEvidence, baseline: WindowEvidence | None, top: int = TOP_CHANGES
) -> list[StatementChange]:
    """The statements whose execution time per second changed most from `baseline` to `window`, most first.

    Statements are matched by (queryid, userid), as pg_stat_statements keeps them; one absent from a side ran
    nothing there (the watcher keeps each pass's heaviest statements, so a light one is absent, not lost). Time
    per second ranks them because it is what a statement costs the server: a statement that lost its index is
    slower per call, one in a storm is called more, and both weigh more per second. No baseline: nothing to
    compare, no list (the heaviest statements are in the plans)."""
    if baseline is None or window.seconds <= 0 or baseline.seconds <= 0:
        return []

    def per_key(evidence: WindowEvidence) -> dict[tuple[int, int], StatementDelta]:
        return {
            (s.queryid, s.userid): s for s in evidence.statements if not MONITORING.search(s.query)
        }

    before, during = per_key(baseline), per_key(window)
    changes = []
    for key in before.keys() | during.keys():
        b, d = before.get(key), during.get(key)
        query = d.query if d else b.query if b else ""
        change = StatementChange(
            queryid=key[0],
            userid=key[1],
            query=query,
            time_ms_per_s_before=b.total_exec_time_ms / baseline.seconds if b else 0.0,
            time_ms_per_s_during=d.total_exec_time_ms / window.seconds if d else 0.0,
            calls_per_s_before=b.calls / baseline.seconds if b else 0.0,
            calls_per_s_during=d.calls / window.seconds if d else 0.0,
            rows_per_s_before=b.rows / baseline.seconds if b else 0.0,
            rows_per_s_during=d.rows / window.seconds if d else 0.0,
            mean_ms_before=b.total_exec_time_ms / b.calls if b and b.calls else None,
            mean_ms_during=d.total_exec_time_ms / d.calls if d and d.calls else None,
        )
        if abs(change.time_ms_per_s_during - change.time_ms_per_s_before) >= LEAST_CHANGE_MS:
            changes.append(change)
    changes.sort(key=lambda c: -abs(c.time_ms_per_s_during - c.time_ms_per_s_before))
    return changes[:top]


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
    live: bool = True,
) -> FactsRecord:
    """The facts of a window, sampled now (`live`) or read from the store: compared with the baseline, its heaviest
    statements explained (a past window's calls still running now are not its calls)."""
    baseline = stored.window if stored else None
    rows = {t.name.split(".", 1)[-1]: t.n_live_tup for t in window.tables}
    dead = {t.name.split(".", 1)[-1]: t.n_dead_tup for t in window.tables}
    plans = judge_statements(target, window, rows, live=live, dead_rows=dead)
    return FactsRecord(
        window=window,
        baseline=baseline,
        baseline_source=stored.source if stored else "",
        abnormal=abnormal_metrics(window, baseline),
        plans=plans,
        alert=alert,
        coverage=[*coverage, *sampling_coverage(window)],
        changed=changed_statements(window, baseline),
    )
