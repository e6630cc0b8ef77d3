"""A review's process imports the heavy libraries only when a step needs them (each flow run on a worker is a
fresh process: what it imports at start it pays for on every review)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("bm25s", "scipy", "sklearn", "faiss", "matplotlib", "pandas")
PROBE = f"""
import sys
from pathlib import Path
import dbcrew.flows.review, dbcrew.flows.targets, dbcrew.flows.fleet
from dbcrew.targets import parse_target
from dbcrew.roles.crew.context import RunContext
monitor = RunContext(target=parse_target("postgresql://u@127.0.0.1:5432/db"), out_dir=Path(".")).monitor()
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_starting_a_review_loads_no_heavy_library_until_a_step_needs_it():
    loaded = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    assert loaded == "", f"imported at start: {loaded}"


MOVED_WINDOW = """
import sys
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.roles.report.comparing import judge_quiet
def window(level):
    return WindowEvidence(started_at=0, seconds=10, interval=1, series={"db.xact_commit": [level + i % 3 for i in range(10)]})
print(judge_quiet(window(5000), [], window(10))[0], "scipy" in sys.modules)
"""


def test_a_window_that_left_the_baseline_is_judged_without_scipy():
    """The KS test of the baseline comparison (history, every health review) runs in plain Python."""
    out = subprocess.run(
        [sys.executable, "-c", MOVED_WINDOW],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert out.split() == ["False", "False"], out


def test_the_monitor_builds_its_error_tree_at_the_first_alert():
    from dbcrew.error_tree import ErrorTree
    from dbcrew.roles.brains.rules import RulesBrain
    from dbcrew.roles.crew.monitor import Monitor

    built: list[int] = []

    def tree() -> ErrorTree:
        built.append(1)
        from dbcrew.error_tree import load_tree

        return load_tree()

    monitor = Monitor(tree, RulesBrain())
    assert built == []
    assert monitor.tree is monitor.tree and built == [1]


def test_a_composed_plan_imports_no_scikit_learn():
    """The plan is made before the window: what it imports is on the diagnosis's critical path."""
    probe = """
import sys
import dbcrew.operators
from dbcrew.models import Brief
from dbcrew.models.crew import PlanRequest
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.planner import make_plan
from dbcrew.vocabulary import Scenario
brief = Brief(server_version="18.1", server_version_num=180001, database="d", current_user="u")
request = PlanRequest(scenario=Scenario.DIAGNOSE, brief=brief, catalogue=prune(brief, catalogue()).available,
                      alert="sessions wait on a lock another session holds")
strategy = make_plan(RulesBrain(), request, max_rounds=2).strategy
print(strategy.rationale.startswith("composed"), "sklearn" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.split() == ["True", "False"], out
