"""What one run may do to its target and how hard it may try (`Settings`, a flow parameter), the
recovery features it may switch off (`Ablations`) and its target's declared machine (`Machine`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dbcrew.settings.thresholds import Thresholds


class Ablations(BaseModel):
    """Recovery features that can be switched off, to measure what each is worth (ROMAS's ablations)."""

    monitor: bool = Field(
        True, description="classify alerts; off: a failed task just fails and its dependents skip"
    )
    reflection: bool = Field(
        True,
        description="plan self-reflection and worker self-correction (retries, reconnect-and-resume)",
    )
    gap_narrow: bool = Field(
        True,
        description="minimal plan edits; off: a re-plan takes the whole new plan and reruns all",
    )
    memory: bool = Field(True, description="long-term lessons across runs on the same target")
    composition: bool = Field(
        True,
        description="the rules' team composed from the alert; off: the scenario's fixed playbook, whatever the alert",
    )
    knowledge: bool = Field(
        True,
        description="knowledge chunks retrieved for the diagnosis's experts and causes; off: none (ablation)",
    )

    def off(self) -> list[str]:
        return [f"no-{name.replace('_', '-')}" for name, on in self.model_dump().items() if not on]


class Machine(BaseModel):
    """The target's machine, when the user declares it (otherwise measured for a local target)."""

    memory_bytes: int | None = Field(None, gt=0)
    cpus: int | None = Field(None, gt=0)


class Settings(BaseModel):
    """What a run may do to its target and how hard it may try."""

    model_config = ConfigDict(allow_inf_nan=False)

    window_seconds: float = Field(10.0, ge=0, description="seconds to sample activity and counters")
    deadline_after_window_seconds: float = Field(
        60.0,
        ge=0,
        description="a run's deadline is its window plus this, from its start (dbcrew/deadline.py):"
        " the work that can wait (charts, a model's experts) stands down before it",
    )
    deadline_reserve_seconds: float = Field(
        15.0,
        ge=0,
        description="the time before the deadline kept for writing the causes found: work that can"
        " wait does not start once less is left",
    )
    activity_samples: int = 5
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 1_000
    max_workers: int = 8
    target_sessions: int = Field(
        3,
        ge=1,
        le=64,
        description="sessions a review holds on its target at once: its reads wait (a second at most) for one"
        " of them rather than each opening a backend of its own",
    )
    worker_retries: int = Field(2, ge=0, le=2, description="self-corrections before an alert")
    max_reflection_rounds: int = 2
    max_replans: int = Field(3, ge=0, le=3)
    max_regenerations: int = Field(
        2, ge=0, le=5, description="times a re-plan proposal with refused edits is asked again"
    )
    target_wait_seconds: float = Field(
        30.0,
        ge=0,
        le=600,
        description="how long a task waits, probing with growing pauses,"
        " for a target that stopped answering; then the run says it is incomplete",
    )
    outage_wait_seconds: float = Field(
        60.0,
        ge=0,
        le=600,
        description="how long, in all, one run's retries wait for a target"
        " that failed the same way before in the run (the monitor's memory); then they probe once",
    )
    ablations: Ablations = Field(default_factory=Ablations)
    store_url: str | None = Field(
        None,
        description="the shared store of history, memory and baselines (dbcrew.store);"
        " None: DBCREW_STORE_URL of the process that runs the review. A flow parameter:"
        " never a password here",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    machine: Machine = Field(default_factory=Machine)
    alert: str = Field(
        "", description="diagnosis: the alert text that started it (data, never instructions)"
    )
    baseline_path: str | None = Field(
        None, description="diagnosis: a saved quiet-period window to compare against"
    )
