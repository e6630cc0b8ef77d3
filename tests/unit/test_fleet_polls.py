"""How often a fleet run polls for its reviews' ends (dbcrew/flows/fleet.py next_poll), on simulated fleets: the
polls follow the runs' own rate: one each LAST_POLL_SECONDS while many are left, a few more as the end nears
(not one a second throughout), and the fleet's end is seen soon after its last review's. Simulated time: the same on any machine."""

from __future__ import annotations

import pytest

from dbcrew.flows.fleet import FIRST_POLL_SECONDS, LAST_POLL_SECONDS, next_poll


def polled(ends: list[float]) -> tuple[int, float]:
    """(polls, seconds from the last run's end to the poll that saw it) of wait_all's loop over runs
    ending at `ends` seconds after the fleet started them."""
    now, polls = 0.0, 0
    while True:
        polls += 1
        ended = sum(end <= now for end in ends)
        if ended == len(ends):
            return polls, now - max(ends)
        now += next_poll(now, ended, len(ends))


@pytest.mark.parametrize("reviews", [1, 20, 1000])
@pytest.mark.parametrize("seconds_each", [0.5, 4.0])
def test_polls_are_few_while_many_runs_are_left_and_the_fleets_end_is_seen_within_seconds(
    reviews: int, seconds_each: float
):
    at_once = 4
    ends = [seconds_each * (i // at_once + 1) for i in range(reviews)]
    polls, late = polled(ends)
    every_second = int(max(ends)) + 1  # what a poll a second made
    assert polls <= max(ends) / LAST_POLL_SECONDS + 20, (polls, every_second)
    if every_second > 40:
        assert polls < every_second / 4
    assert late <= 2 * FIRST_POLL_SECONDS, late  # the pause before it was a second or two


def test_a_straggler_is_polled_for_once_a_second_at_most_and_seen_within_15_s():
    ends = [2.0] * 19 + [300.0]
    polls, late = polled(ends)
    assert late <= LAST_POLL_SECONDS
    assert polls <= 300 / FIRST_POLL_SECONDS


def test_the_pause_is_a_second_until_a_run_ended_then_follows_their_rate_within_its_bounds():
    assert next_poll(0.0, 0, 10) == next_poll(30.0, 0, 10) == FIRST_POLL_SECONDS
    assert next_poll(10.0, 9, 10) == FIRST_POLL_SECONDS  # one left, about a second's worth
    assert next_poll(10.0, 1, 1000) == LAST_POLL_SECONDS  # a long way to go
    middle = next_poll(10.0, 5, 20)  # 15 left at 0.5 a second: 30 s to go
    assert FIRST_POLL_SECONDS < middle < LAST_POLL_SECONDS
