"""The composed plan on alerts written outside the code's vocabulary (issue 34, acceptance 1).

`python -m bench plan`: for every alert of bench/plan_cases.yaml (development: looked at while the
planner's matching and dbcrew/knowledge/symptoms/ were written) and bench/plan_cases_heldout.yaml (held
out: written before any tuning and never tuned on), the rules brain plans a diagnosis of a target
with every capability, and the case counts as found when the plan holds the operators that find its
cause. Printed per part: recall, the share of the full diagnosis playbook's operators the plan runs
(the mean over the alerts; a fallback to the playbook counts 100 %), how many alerts fell back, and
the misses. No database: planning is what is measured. Goals: recall >= 0.95, share <= 60 %.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

import dbcrew.operators  # noqa: F401  (registers operators)
from dbcrew.models import Brief
from dbcrew.models.crew import PlanRequest
from dbcrew.operators.registry import catalogue
from dbcrew.roles.brains.rules import RulesBrain
from dbcrew.roles.crew.capabilities import prune
from dbcrew.roles.crew.planner import make_plan
from dbcrew.vocabulary import Scenario

HERE = Path(__file__).resolve().parent
PARTS = (("development", HERE / "plan_cases.yaml"), ("held out", HERE / "plan_cases_heldout.yaml"))
RECALL_GOAL, SHARE_GOAL = 0.95, 0.60
BRIEF = Brief(
    server_version="18.1",
    server_version_num=180001,
    database="bench",
    current_user="monitor",
    extensions=["pg_stat_statements", "hypopg"],
    preloaded_libraries=["pg_stat_statements"],
    can_read_all_stats=True,
)


def planned_operators(alert: str, compose: bool = True) -> tuple[set[str], str]:
    request = PlanRequest(
        scenario=Scenario.DIAGNOSE,
        brief=BRIEF,
        catalogue=prune(BRIEF, catalogue()).available,
        alert=alert,
        compose=compose,
    )
    strategy = make_plan(RulesBrain(), request, max_rounds=2).strategy
    return {t.operator for t in strategy.tasks}, strategy.rationale


def found(case: dict[str, Any], ops: set[str]) -> bool:
    wanted = [name in ops for name in case["find"]]
    return any(wanted) if case.get("any") else all(wanted)


def main(argv: list[str] | None = None) -> None:
    full, _ = planned_operators("", compose=False)
    print(
        f"command: python -m bench {' '.join(sys.argv[1:]) or 'plan'}; load average"
        f" {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores"
    )
    print(f"the full diagnosis playbook: {len(full)} operators")
    print(f"{'part':<13}{'alerts':>7}{'recall':>9}{'share':>8}{'fallbacks':>11}{'ms/plan':>9}")
    totals = {"n": 0, "hits": 0, "share": 0.0}
    misses: list[str] = []
    for part, path in PARTS:
        cases = yaml.safe_load(path.read_text())
        hits, share, fallbacks = 0, 0.0, 0
        started = time.perf_counter()
        for case in cases:
            ops, rationale = planned_operators(case["alert"])
            ok = found(case, ops)
            hits += ok
            share += len(ops) / len(full)
            fallbacks += "not composed" in rationale
            if not ok:
                misses.append(
                    f"  {part}: {case['alert'][:70]!r} wants {case['find']}, planned"
                    f" {sorted(ops - {'sample_anomaly_window', 'cross_review_causes'})}"
                )
        ms = (time.perf_counter() - started) * 1000 / len(cases)
        print(
            f"{part:<13}{len(cases):>7}{hits / len(cases):>9.1%}{share / len(cases):>8.1%}"
            f"{fallbacks:>11}{ms:>9.1f}"
        )
        totals["n"] += len(cases)
        totals["hits"] += hits
        totals["share"] += share
    recall, share = totals["hits"] / totals["n"], totals["share"] / totals["n"]
    verdict = "meets" if recall >= RECALL_GOAL and share <= SHARE_GOAL else "MISSES"
    print(
        f"all {totals['n']}: recall {recall:.1%}, share {share:.1%}: {verdict} the goals"
        f" (recall >= {RECALL_GOAL:.0%}, share <= {SHARE_GOAL:.0%})"
    )
    if misses:
        print("misses:")
        print("\n".join(misses))


if __name__ == "__main__":
    main(sys.argv[1:])
