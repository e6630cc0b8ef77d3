"""The run context: a review request being run, and what is only about it.

`RunContext` is the request (ReviewRequest's options) plus what the run adds: its id, its folder,
its start, its one brain, its CPU clock, its deadline and monitor. The phases' steps
(dbcrew/roles/crew/run.py), the spine (dbcrew/roles/spine.py), the report and its record (dbcrew/roles/report/) all
take it; `operator_context` is what an operator sees of it, and `brief_of`/`identity_for` say
which target it reviewed (the probe's brief, the identity the store keeps its history under).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field, PrivateAttr

from dbcrew.deadline import CpuClock, Deadline
from dbcrew.error_tree import load_tree
from dbcrew.llm.base import Brain
from dbcrew.models import Brief, RootCause
from dbcrew.models.report import LlmAdditions
from dbcrew.models.request import ReviewRequest, TargetURL
from dbcrew.operators.collect.probe import BRIEF_KEY
from dbcrew.operators.registry import OperatorContext
from dbcrew.roles.brains import make_brain
from dbcrew.roles.crew.memory import target_identity
from dbcrew.roles.crew.monitor import Monitor
from dbcrew.roles.crew.worker import await_target
from dbcrew.settings.thresholds import Thresholds
from dbcrew.store import Store
from dbcrew.targets import PostgresTarget
from dbcrew.workspace import Workspace


class RunContext(ReviewRequest):
    """A request being run: its options (ReviewRequest's, declared there once) and what the run adds.

    Its serialized form is password-free (it is a flow parameter). Two things travel only in
    process, as private attributes pydantic never dumps: the target's password (inside `target`)
    and the run's one brain (`shared_brain`). Prefect hands a subflow's parameters over by
    reference and keeps private attributes when it rebuilds a model, so every phase of the run,
    Prefect subflow or plain call, asks the same brain.
    """

    target: TargetURL
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    out_dir: Path
    link: str = Field(
        "", description="where to see the run: the Prefect UI page of its flow run, when known"
    )
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    _brain: Brain | None = PrivateAttr(default=None)
    _clock: CpuClock = PrivateAttr(default_factory=CpuClock.start)

    @classmethod
    def of(
        cls, request: ReviewRequest, target: PostgresTarget, out_dir: Path, link: str = ""
    ) -> RunContext:
        """The run of `request` on `target` (resolved from its URL or secret), writing into `out_dir`."""
        options = {
            name: getattr(request, name) for name in ReviewRequest.model_fields
        }  # by reference: the password stays
        return cls.model_validate(
            {**options, "target": target, "target_secret": None, "out_dir": out_dir, "link": link}
        )

    @property
    def shared_brain(self) -> Brain:
        """The run's one brain, made on first use: its usage and fall-backs add up over every phase."""
        if self._brain is None:
            self._brain = make_brain(self.brain)
        return self._brain

    @property
    def consults_llm(self) -> bool:
        """Whether the run's brain is an LLM: its catalogue then holds the operators that ask it (a
        diagnosis's LLM experts), which a rules run never plans."""
        return self.brain != "rules"

    @property
    def deadline(self) -> Deadline:
        """When the run's answer is due: its window plus `deadline_after_window_seconds`, from its start."""
        s = self.settings
        return Deadline.after(
            self.started_at,
            s.window_seconds + s.deadline_after_window_seconds,
            s.deadline_reserve_seconds,
        )

    @property
    def clock(self) -> CpuClock:
        """The CPU this process spent since the run started (in this process), for the coverage."""
        return self._clock

    @property
    def workspace_path(self) -> Path:
        return self.out_dir / "workspace.duckdb"

    @property
    def worker_retries(self) -> int:
        """Self-corrections a worker may make: none when reflection is switched off."""
        return self.settings.worker_retries if self.settings.ablations.reflection else 0

    def monitor(self) -> Monitor | None:
        """The monitor, or None when it is switched off (a failed task then just fails)."""
        if not self.settings.ablations.monitor:
            return None
        target = self.target
        reads_memory = (
            self.settings.ablations.memory
        )  # the run's short-term memory, read while it runs
        return Monitor(
            load_tree,
            self.shared_brain,
            await_target=(lambda budget: await_target(target, budget)) if reads_memory else None,
            outage_budget=self.settings.outage_wait_seconds,
        )


@dataclass(frozen=True)
class RunsLlmExperts:
    """The run's LLM experts as its diagnosis step consults them (dbcrew/operators/registry.py: LlmExperts):
    the run's one brain, and the time left before its deadline's reserve when the step starts. The LLM
    diagnosis is imported at the first consultation, not before: it pulls in the openai client (3 s of
    imports on 2 cores), which would otherwise delay the probe and the window of a live diagnosis."""

    run: RunContext

    def __call__(
        self, workspace: Workspace, rules: list[RootCause], thresholds: Thresholds
    ) -> LlmAdditions:
        from dbcrew.roles.diagnosis.review import consult

        return consult(
            self.run.shared_brain, workspace, rules, thresholds, self.run.deadline.until_reserve()
        )


def operator_context(run: RunContext, brief: Brief | None) -> OperatorContext:
    return OperatorContext(
        target=run.target,
        workspace=Workspace(run.workspace_path),
        settings=run.settings,
        brief=brief,
        run_dir=run.out_dir,
        interval=run.interval,
        prometheus=run.prometheus,
        llm_experts=RunsLlmExperts(run) if run.consults_llm else None,
    )


def brief_of(run: RunContext) -> Brief | None:
    """The probe's brief from the run's workspace (None when the run failed before the probe)."""
    if not run.workspace_path.exists():
        return None
    body = Workspace(run.workspace_path).observation(BRIEF_KEY)
    return None if body is None else Brief.model_validate_json(body)


def identity_for(run: RunContext, store: Store) -> str:
    """The target's identity: from the probe, else the one last recorded for its display, else the display."""
    brief = brief_of(run)
    if brief is not None:
        return target_identity(run.target, brief)
    return store.identity_of(run.target.display) or run.target.display
