"""A past interval's diagnosis attributes its time as a live one does, from the watcher's stored session samples.

The watcher samples the server (every second here, its sessions five times a second between passes:
dbcrew/operators/watch/session_sampler.py) while it is quiet, then while an update flood of single-row
autocommit updates runs (bench/injections.py), during which a live diagnosis samples its own window;
once the flood ended, its interval is diagnosed from the stored passes alone
(bench/history_accuracy.py's case, as `python -m bench watch --suite accuracy` runs it). Both name
the flood, and both reports carry their time attribution: the share-led rules that tell many updates
from commit pressure ran on history's samples as on the live ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.diagnose import DiagnosisServer
from bench.history_accuracy import case

EVERY = 1.0
CAUSE = "workload_high_updates"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiagnosisServer]:
    started = DiagnosisServer.start(tmp_path_factory.mktemp("history-attribution"))
    yield started
    started.stop()


def test_history_names_the_update_flood_live_names_with_the_same_time_attribution(
    server: DiagnosisServer, tmp_path: Path
) -> None:
    live, history, _incident = case(server, CAUSE, tmp_path, EVERY)
    live_found = [rc.code for rc in live.root_causes]
    history_found = [rc.code for rc in history.root_causes]
    assert CAUSE in live_found, f"live: {live_found}"
    assert CAUSE in history_found, (
        f"history: {history_found}: {history.diagnosis.process if history.diagnosis else ''}"
    )
    assert history.interval is not None and history.diagnosis is not None
    attribution = history.diagnosis.time_attribution
    assert attribution is not None, "the past interval's report has its time attribution"
    assert attribution.by_statement and any(
        "inj_" in s.label or "UPDATE" in s.label.upper() for s in attribution.by_statement
    ), f"the flood's statement is where the time went: {attribution.by_statement}"
    assert any(p.name == "time_attribution.png" for p in (tmp_path / "history").rglob("*.png")), (
        "and its chart, as a live report's"
    )
