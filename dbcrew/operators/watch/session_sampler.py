"""The watcher's session samples between two passes: pg_stat_activity every `step` seconds on the pass's session.

One pg_stat_activity read per pass (every 15 s by default) says what the sessions did at one
instant, too few samples for a share of the time: a past interval's diagnosis could not attribute
its time to statements and relations as a live one does. So between passes a thread samples the
target's sessions every `step` seconds (1 s at the default interval, as pg_ash does; at least
MIN_PER_PASS per pass at a shorter one) into one `ActivityTally`, the live sampler's
(dbcrew/operators/window/readers.py), and the next pass takes the tally and starts a new one.

The thread (one per watched target, asleep between its samples) reads on the pass's own session
(no second connection per target), under a lock the pass holds for its reads. All the samplers of
one watcher keep one pace (`SamplePace`): together they take at most a budget of samples a second
(DBCREW_WATCH_SESSION_SAMPLES), the step of each widening with the number of targets. A sample
costs the target a pg_stat_activity read and the watcher a few tenths of a millisecond; a thousand
targets at 1 s each took both cores of a 2-core host with the watchers, the targets and the store
on it (`python -m bench scale`, 1,000 targets: a round of 60 s took three to five minutes), so
the watcher's sampling must not grow with its share of the fleet. A sample that fails (the target
went away: the pass then fails too and records the gap) ends the thread; the next pass that reads
the target starts it again. The tally says how many samples were taken, so a pass whose thread
stopped early has fewer samples, not wrong shares.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import psycopg

from dbcrew.errors import TargetError
from dbcrew.operators.window.readers import ActivityTally, sessions
from dbcrew.targets import Resumable

SESSION_STEP = 1.0  # seconds between two session samples at the default interval (pg_ash's rate)
MIN_PER_PASS = 5  # session samples per pass at the least, at a shorter interval (within the budget)
SAMPLES_PER_SECOND = 50.0  # one watcher's session samples a second over all its targets, by default


def session_step(every: float, step: float | None = None) -> float:
    """The seconds between two session samples for passes every `every` seconds (`step`:
    DBCREW_WATCH_SESSION_STEP's, at most; SESSION_STEP by default)."""
    return min(step or SESSION_STEP, every / MIN_PER_PASS)


@dataclass
class SamplePace:
    """The step shared by one watcher's session samplers: `base` seconds (`session_step`), or longer so that the
    samplers sampling now take at most `per_second` samples a second together (as many targets as the budget
    at `base`; twice as many at twice the step, and so on)."""

    base: float
    per_second: float = SAMPLES_PER_SECOND
    _sampling: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self) -> float:
        """Seconds until a sampler's next sample, with as many samplers as sample now."""
        return max(self.base, self._sampling / self.per_second)

    def join(self) -> None:
        with self._lock:
            self._sampling += 1

    def leave(self) -> None:
        with self._lock:
            self._sampling -= 1


@dataclass
class SessionSampler:
    """Samples `session` at `pace` into `tally` until closed; `lock` guards the session and the tally."""

    session: Resumable
    pace: SamplePace
    lock: threading.Lock = field(default_factory=threading.Lock)
    tally: ActivityTally = field(default_factory=ActivityTally)
    _closed: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling, or start again after a failed sample ended the thread."""
        if self._closed.is_set() or (self._thread is not None and self._thread.is_alive()):
            return
        self._thread = threading.Thread(
            target=self._loop, name="dbcrew-watch-sessions", daemon=True
        )
        self._thread.start()

    def take(self) -> ActivityTally:
        """The samples since the last `take` (the caller holds `lock`); a new tally begins."""
        taken, self.tally = self.tally, ActivityTally()
        return taken

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10 * self.pace.step() + 5)

    def _loop(self) -> None:
        self.pace.join()
        try:
            while not self._closed.wait(self.pace.step()):
                with self.lock:
                    if self._closed.is_set():
                        return
                    try:
                        rows = self.session.run(lambda conn: sessions(conn, self.tally.samples))
                    except (TargetError, psycopg.Error):
                        # Not swallowed: the pass reads the same session next, and fails too (its gap says
                        # why) or starts the sampling again.
                        return
                    self.tally.add(rows)
        finally:
            self.pace.leave()
