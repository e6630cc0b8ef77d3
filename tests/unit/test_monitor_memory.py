"""The monitor reads the run's short-term memory: an outage seen before in this run makes a retry wait for the target."""

from __future__ import annotations

from dbcrew.models.report import Decision
from dbcrew.roles.crew.monitor import OUTAGE_WAIT_FIRST, OUTAGE_WAIT_MAX, outage_wait
from dbcrew.vocabulary import Action


def decision(leaf: str) -> Decision:
    return Decision(
        task_id="collect_activity",
        error="TargetError: cannot connect",
        leaf=leaf,
        branch="reach",
        confidence=1.0,
        remedy="instruction: retry",
    )


def test_a_retry_waits_for_the_target_only_after_the_same_outage_was_seen_in_this_run():
    assert outage_wait("connection", Action.RETRY, []) == 0.0  # the first failure: a plain retry
    assert outage_wait("connection", Action.RETRY, [decision("connection")]) == OUTAGE_WAIT_FIRST
    assert (
        outage_wait(
            "connection_dropped",
            Action.RETRY,
            [decision("connection"), decision("connection_dropped")],
        )
        == 2 * OUTAGE_WAIT_FIRST
    )
    assert outage_wait("connection", Action.RETRY, [decision("connection")] * 20) == OUTAGE_WAIT_MAX
    # Other failures teach nothing about the target's reachability, and other remedies do not retry.
    assert outage_wait("connection", Action.RETRY, [decision("statement_timeout")]) == 0.0
    assert outage_wait("statement_timeout", Action.RETRY, [decision("connection")]) == 0.0
    assert outage_wait("connection", Action.SKIP, [decision("connection")]) == 0.0
