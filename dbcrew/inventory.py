"""The targets inventory (`targets.yaml`): which databases the crew reviews, when, and how.

A password never appears in the inventory: an entry says where it comes from (the worker's
environment, libpq's ~/.pgpass, or a Prefect Secret block by name), and the URL is refused when
it carries one. The inventory is checked whole before anything is deployed; a mistake is one
line naming the entry and the field (`targets[2].schedule: ...`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

import psycopg
import yaml
from cronsim import CronSim, CronSimError
from psycopg.conninfo import conninfo_to_dict
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dbcrew.errors import TargetError, UsageError
from dbcrew.models.request import ReviewRequest
from dbcrew.models.target_run import TargetRun
from dbcrew.settings.run import Settings
from dbcrew.settings.thresholds import Thresholds
from dbcrew.targets import parse_target
from dbcrew.targets.postgres import SCHEMES
from dbcrew.vocabulary import Scenario

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,47}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PasswordFromEnv(_Strict):
    """The password is the value of an environment variable on the machine that runs the review."""

    env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class PasswordFromSecret(_Strict):
    """The password is the value of a Prefect Secret block (shared by every worker of the pool)."""

    secret: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]


# "pgpass": libpq finds the password itself (~/.pgpass or PGPASSFILE on the reviewing machine).
PasswordSource = Literal["pgpass"] | PasswordFromEnv | PasswordFromSecret


class WatchSettings(_Strict):
    """`watch:` of an entry: the watcher samples the target between reviews (docs/watch.md).

    Targets watched at the same interval are a group, shared over the workers of the pool's `watch` queue (each
    worker's share one long-lived flow run: dbcrew/flows/watching.py); each incident detected starts a diagnosis run of
    the incident's interval when `diagnose` holds.
    """

    every: float = Field(
        15.0, ge=1.0, le=3600.0, description="seconds between two samples of the target"
    )
    diagnose: bool = Field(
        True, description="each incident starts a diagnosis of its interval, which alerts"
    )

    @property
    def group(self) -> str:
        """The watching group this target belongs to: one per sampling interval."""
        return f"every-{self.every:g}s".replace(".", "-")


class MissedSlots(StrEnum):
    """What becomes of a target's scheduled reviews whose time passed while nothing ran them (`dbcrew server`
    was down): Prefect keeps them Scheduled, and a worker would run them all, late and back to back,
    each reviewing the same database as it is now."""

    COLLAPSE = "collapse"  # the newest of them runs, once; the older ones are cancelled
    SKIP = "skip"  # all are cancelled; the next slot is the next review


class ScheduleGroup(_Strict):
    """The targets reviewed by one deployment and one cron schedule (dbcrew/flows/fleet.py `scheduled_reviews`).

    Everything that shapes the scheduled run rather than each target's review must be equal in a group:
    when it fires (the cron, its fields as written: UTC), what it runs (the scenario, named in the
    deployment and its alerts) and what a slot missed while nothing ran it becomes (`missed`: one run
    reviews every target of the group, so a group cannot collapse for one target and skip for another).
    A target's own window, thresholds, password, alert URLs and tags are read by its review from its
    entry, so they may differ within a group. The number of deployments and schedules is then the
    number of distinct groups, however many targets share them.
    """

    cron: str
    scenario: Scenario
    missed: MissedSlots

    @property
    def name(self) -> str:
        """The deployment's name, stable across publishes: `health-0-2-x-x-x` for "0 2 * * *"; `-skip` when
        missed slots are skipped (collapse, the default, adds nothing)."""
        fields = re.sub(r"[^a-z0-9]+", "-", self.cron.replace("*", "x").lower()).strip("-")
        skip = "-skip" if self.missed is MissedSlots.SKIP else ""
        return f"{self.scenario.value}-{fields}{skip}"


class TargetEntry(_Strict):
    """One database of the fleet."""

    name: Annotated[
        str,
        Field(
            pattern=NAME_PATTERN,
            description="lowercase letters, digits, dashes; names deployments and limits",
        ),
    ]
    url: str = Field(description="postgresql://user@host:port/dbname, never with a password")
    password: PasswordSource = "pgpass"
    tags: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(default_factory=list)
    schedule: str | None = Field(
        None, description="cron expression (UTC) for this target's own scheduled review"
    )
    missed: MissedSlots = Field(
        MissedSlots.COLLAPSE,
        description="scheduled reviews missed while `dbcrew server` was down: collapse (run the latest once) or skip",
    )
    scenario: Scenario = Scenario.HEALTH
    window: float = Field(
        10.0, ge=1.0, description="seconds the review samples activity and counters"
    )
    thresholds: dict[str, float] = Field(
        default_factory=dict, description="names of dbcrew.settings.thresholds.Thresholds"
    )
    alerts: list[str] = Field(
        default_factory=list,
        description="Apprise URLs told about new problems, failed runs, incidents and watching gaps",
    )
    watch: WatchSettings | None = Field(
        None, description="sample the target between reviews and diagnose its incidents"
    )

    def request(self, run: TargetRun) -> ReviewRequest:
        """The review `run` asks of this target, as its entry says where the run leaves an override empty; a past
        interval is diagnosed from the watcher's samples (or from `run.prometheus`), with the signals of the
        incident that started it."""
        settings = Settings(
            window_seconds=run.window or self.window,
            alert=run.alert,
            thresholds=Thresholds(**self.thresholds),
        )
        return ReviewRequest(
            target=self.url,
            scenario=Scenario.DIAGNOSE
            if run.interval is not None
            else run.scenario or self.scenario,
            brain=run.brain,
            settings=settings,
            interval=run.interval,
            prometheus=run.prometheus,
            signals=run.incident.signals if run.incident is not None else [],
        )

    @field_validator("url")
    @classmethod
    def _url_without_password(cls, url: str) -> str:
        if url.startswith(SCHEMES):
            try:
                has_password = bool(conninfo_to_dict(url).get("password"))
            except psycopg.ProgrammingError:
                has_password = False  # malformed: parse_target below says how
            if has_password:
                raise ValueError(
                    "the URL carries a password: remove it and name its source in `password` (env, pgpass or secret)"
                )
        try:
            parse_target(url)
        except TargetError as exc:
            raise ValueError(str(exc)) from None
        return url

    @field_validator("schedule")
    @classmethod
    def _cron(cls, schedule: str | None) -> str | None:
        if schedule is None:
            return None
        try:
            next(iter(CronSim(schedule, datetime.now(UTC))))
        except (CronSimError, StopIteration) as exc:
            raise ValueError(
                f"{schedule!r} is not a cron expression ({exc or 'never fires'})"
            ) from None
        return schedule

    @field_validator("thresholds")
    @classmethod
    def _known_thresholds(cls, overrides: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(overrides) - set(Thresholds.model_fields))
        if unknown:
            raise ValueError(
                f"unknown threshold {unknown[0]!r}: names are the fields of dbcrew.settings.thresholds.Thresholds"
            )
        Thresholds(**overrides)
        return overrides

    @property
    def schedule_group(self) -> ScheduleGroup | None:
        """The group whose deployment reviews this target on its schedule; None when it has no schedule."""
        if self.schedule is None:
            return None
        return ScheduleGroup(
            cron=" ".join(self.schedule.split()), scenario=self.scenario, missed=self.missed
        )

    @property
    def password_label(self) -> str:
        """Where the password comes from, for people (never the password itself)."""
        if isinstance(self.password, PasswordFromEnv):
            return f"env {self.password.env}"
        if isinstance(self.password, PasswordFromSecret):
            return f"secret {self.password.secret}"
        return "pgpass"


class Inventory(_Strict):
    targets: list[TargetEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Inventory:
        seen: set[str] = set()
        for entry in self.targets:
            if entry.name in seen:
                raise ValueError(f"two targets are named {entry.name!r}")
            seen.add(entry.name)
        named: dict[str, ScheduleGroup] = {}
        for group in self.schedule_groups():
            other = named.setdefault(group.name, group)
            if other != group:
                raise ValueError(
                    f"the schedules {other.cron!r} and {group.cron!r} would share the deployment name "
                    f"{group.name!r}: write one of them another way"
                )
        return self

    def names(self) -> list[str]:
        return [t.name for t in self.targets]

    def get(self, name: str) -> TargetEntry:
        for entry in self.targets:
            if entry.name == name:
                return entry
        raise UsageError(
            f"no target named {name!r} in the inventory (known: {', '.join(self.names())})"
        )

    def select(self, tag: str | None) -> list[TargetEntry]:
        """Every target, or those carrying `tag`."""
        return [t for t in self.targets if tag is None or tag in t.tags]

    def schedule_groups(self) -> dict[ScheduleGroup, list[TargetEntry]]:
        """The scheduled targets by schedule group (one deployment, one cron schedule each), in the inventory's
        order."""
        groups: dict[ScheduleGroup, list[TargetEntry]] = {}
        for entry in self.targets:
            if (group := entry.schedule_group) is not None:
                groups.setdefault(group, []).append(entry)
        return groups

    def on_schedule(self, name: str) -> tuple[ScheduleGroup, list[TargetEntry]]:
        """The schedule group of that name and its targets; UsageError when no target is on it (any more)."""
        for group, entries in self.schedule_groups().items():
            if group.name == name:
                return group, entries
        known = ", ".join(g.name for g in self.schedule_groups()) or "none"
        raise UsageError(f"no target of the inventory is on the schedule {name!r} (known: {known})")

    def watch_groups(self) -> dict[str, list[TargetEntry]]:
        """The watched targets by watching run (WatchSettings.group), in the inventory's order."""
        groups: dict[str, list[TargetEntry]] = {}
        for entry in self.targets:
            if entry.watch is not None:
                groups.setdefault(entry.watch.group, []).append(entry)
        return groups


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not re.fullmatch(r"PasswordFrom\w+|literal\[.*\]|function-after\[.*\]", part):
            text += f".{part}" if text else part
    return text


def validation_line(exc: ValidationError) -> str:
    """The first error of a validation, as `targets[1].url: message` (one line)."""
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    where = _location(tuple(error["loc"]))
    return f"{where}: {message}" if where else message


def parse_inventory(data: object, source: str = "inventory") -> Inventory:
    try:
        return Inventory.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source}: {validation_line(exc)}") from None


def load_inventory(path: Path) -> Inventory:
    """Read and check `targets.yaml`; any problem is a UsageError of one line."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the inventory ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}: not valid YAML{where}") from None
    return parse_inventory(data, str(path))
