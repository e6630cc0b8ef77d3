"""A past interval to diagnose from the watcher's stored samples, and the times a user writes for it.

`dbcrew diagnose --from T1 --to T2` takes ISO 8601 times (a time without a zone is the local
time of the machine that reads it) or times relative to now (`-30m`, `-2h`, `-90s`, `-1d`,
`now`); `PastInterval` holds them as UTC and refuses an interval that ends before it starts or
ends in the future (what has not happened yet has no samples).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Self

from pydantic import AwareDatetime, BaseModel, Field, model_validator

RELATIVE = re.compile(r"-(\d+(?:\.\d+)?)([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
CLOCK_SKEW = timedelta(seconds=5)  # an end a few seconds ahead is the user's clock, not the future


class PastInterval(BaseModel):
    """A stretch of the past, in UTC: what `diagnose --from --to` looks at."""

    start: AwareDatetime = Field(description="when the interval began (UTC)")
    end: AwareDatetime = Field(description="when it ended (UTC); not in the future")

    @model_validator(mode="after")
    def _ordered_and_past(self) -> Self:
        if self.end <= self.start:
            raise ValueError(
                f"the interval must end after it starts ({self.start:%Y-%m-%d %H:%M:%S} to {self.end:%Y-%m-%d %H:%M:%S} UTC)"
            )
        if self.end > datetime.now(UTC) + CLOCK_SKEW:
            raise ValueError(
                f"the interval ends in the future ({self.end:%Y-%m-%d %H:%M:%S} UTC): only the past has samples"
            )
        self.start, self.end = self.start.astimezone(UTC), self.end.astimezone(UTC)
        return self

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def describe(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M:%S} to {self.end:%H:%M:%S} UTC ({self.seconds:.0f} s)"


def parse_moment(text: str, now: datetime) -> datetime:
    """`text` as an aware time: `now`, `-30m` style offsets from `now`, or ISO 8601; ValueError in one line otherwise."""
    raw = text.strip()
    if raw == "now":
        return now
    relative = RELATIVE.fullmatch(raw)
    if relative:
        return now - timedelta(**{UNITS[relative.group(2)]: float(relative.group(1))})
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: write ISO 8601 (2026-11-25T03:12, with a zone or local) or -30m, -2h, -1d, now"
        ) from None
    return moment if moment.tzinfo else moment.astimezone()
