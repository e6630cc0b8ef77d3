"""report.json, schema_version 1: the stable machine interface of a review."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from dbcrew.models.finding import Finding, Severity
from dbcrew.models.interval import PastInterval
from dbcrew.models.plan import PlanEdit
from dbcrew.vocabulary import Cause, FindingCode, Scenario

SCHEMA_VERSION = 1


class CoverageStatus(StrEnum):
    RAN = "ran"
    SKIPPED = "skipped"
    FAILED = "failed"


class SkipKind(StrEnum):
    """Why a check did not run, or failed: the kinds of a coverage entry's structured cause."""

    MISSING_EXTENSION = (
        "missing_extension"  # an extension it needs is not installed, or not preloaded
    )
    NO_SOURCE = "no_source"  # it needs an artifact nothing on this target can collect
    PRIVILEGE = "privilege"  # the review's role was refused; `grant` fixes it
    FAULT = "fault"  # its operator failed, after self-correction and the monitor
    UPSTREAM_FAILED = "upstream_failed"  # a task it needs failed
    UPSTREAM_INCOMPLETE = (
        "upstream_incomplete"  # a task it needs did not complete (failed or skipped)
    )
    REMOVED = "removed"  # a re-plan took it out of the plan
    NOT_PLANNED = "not_planned"
    STOPPED = "stopped"  # the run was stopped (Ctrl-C, SIGTERM) before it completed
    DEADLINE = (
        "deadline"  # work that can wait stood down before the run's deadline (dbcrew/deadline.py)
    )


# PostgreSQL's own words for a refused privilege (aclcheck_error): the error carries no structured field
# naming the object, so its message is read once, where the failure becomes a cause.
_DENIED = re.compile(
    r"permission denied for (view|table|relation|sequence|function|schema) ([\w.\"]+)"
)


def grant_for(message: str, role: str) -> str | None:
    """The GRANT that gives `role` what a permission-denied error says it lacked; None for any other error.

    `role` is SQL already, the name quoted by the caller (dbcrew/operators/sql.py quote_ident): a role named
    `Monitor` or `dbcrew-monitor` is granted to as `"Monitor"`, never to `monitor` or a syntax error."""
    denied = _DENIED.search(message)
    if denied is None:
        return None
    kind, name = denied.groups()
    if kind == "function":
        return f"GRANT EXECUTE ON FUNCTION {name} TO {role};"
    if kind == "schema":
        return f"GRANT USAGE ON SCHEMA {name} TO {role};"
    return f"GRANT SELECT ON {name} TO {role};"


class SkipCause(BaseModel):
    """The structured cause behind a coverage reason, traced through failed upstream tasks to the root.

    The reason text in report.json is `render()` of it: the cause is built once where it happens
    and never read back from the text.
    """

    kind: SkipKind
    detail: str = Field(
        "",
        description="the cause's own words: an error message, a missing capability, a re-plan's reason",
    )
    upstream: str | None = Field(None, description="the task whose failure this one follows")
    root: SkipCause | None = Field(None, description="that upstream task's own cause")
    grant: str | None = Field(
        None, description="the statement that gives the review's role what it lacked"
    )

    @classmethod
    def of_failure(cls, message: str, role: str) -> SkipCause:
        """The cause of a failure from its message: a privilege with its GRANT when the target refused `role` (SQL,
        quoted: `grant_for`), else a fault."""
        grant = grant_for(message, role)
        return cls(
            kind=SkipKind.PRIVILEGE if grant else SkipKind.FAULT, detail=message, grant=grant
        )

    def render(self) -> str:
        """The human reason: e.g. `upstream collect_statements failed: permission denied for view pg_stat_statements (GRANT ...)`."""
        if self.kind in (SkipKind.UPSTREAM_FAILED, SkipKind.UPSTREAM_INCOMPLETE):
            verb = "failed" if self.kind is SkipKind.UPSTREAM_FAILED else "did not complete"
            return f"upstream {self.upstream} {verb}" + (
                f": {self.root.render()}" if self.root else ""
            )
        if self.kind is SkipKind.REMOVED:
            return f"removed from the plan: {self.detail}"
        if self.kind is SkipKind.NOT_PLANNED:
            return "not planned"
        return self.detail + (f" ({self.grant})" if self.grant else "")


class CoverageEntry(BaseModel):
    check: str
    status: CoverageStatus
    reason: str = Field(
        "",
        description="the human text: the cause rendered, or a note on a check that ran partially",
    )
    cause: SkipCause | None = Field(
        None, description="why it did not run (or failed), structured; None when it ran"
    )
    unjudged: list[FindingCode] = Field(
        default_factory=list,
        description="codes the check ran for but could not judge (counters too young, an outage, a"
        " privilege; the reason says which): history keeps their earlier findings unresolved",
    )

    @classmethod
    def of(cls, check: str, status: CoverageStatus, cause: SkipCause) -> CoverageEntry:
        """An entry whose reason is its cause rendered."""
        return cls(check=check, status=status, reason=cause.render(), cause=cause)


class RootCause(BaseModel):
    code: Cause
    confidence: float
    evidence: dict[str, Any] = Field(default_factory=dict)
    solution: str = ""
    time_share: float | None = Field(
        None,
        description="share of the window's active session time the cause explains"
        " (dbcrew/operators/diagnose/attribution.py); None where it cannot be measured that way",
    )


class Hypothesis(BaseModel):
    """A cause only a model proposed that the measured evidence did not confirm: shown apart from the
    root causes, never counted as one (dbcrew/operators/diagnose/support.py)."""

    code: Cause
    confidence: float = Field(description="the model's own confidence, as it said it")
    expert: str = Field(description="the LLM expert that proposed it")
    explanation: str = Field("", description="the model's explanation, as data")
    unconfirmed: str = Field(description="why the measurements do not support it")
    time_share: float | None = Field(
        None, description="share of the sampled active time it explains; None where not measured"
    )


class TeamMember(BaseModel):
    """One agent of the plan the run executed, its tasks and why the planner put them on the team."""

    agent: str
    role: str
    tasks: list[str] = Field(default_factory=list)
    why: list[str] = Field(
        default_factory=list, description="per task, in order: why it is on the team"
    )
    seconds: list[float | None] = Field(
        default_factory=list,
        description="per task, in order: its wall seconds; None for a task that did not run",
    )
    cpu_seconds: list[float | None] = Field(
        default_factory=list,
        description="per task, in order: the CPU seconds its worker's thread spent (the database server's"
        " work not in it); None for a task that did not run",
    )

    def spent(self) -> list[str]:
        """Per task, in order: its wall and CPU seconds, or that it did not run; [] for a report older
        than these figures."""
        if not self.seconds:
            return []
        return [
            "did not run" if wall is None or cpu is None else f"{wall:.2f} s, {cpu:.2f} s CPU"
            for wall, cpu in zip(self.seconds, self.cpu_seconds, strict=True)
        ]


class Phases(BaseModel):
    plans: int = 0
    replans: int = 0
    alerts: int = 0
    instructions: int = 0
    reused_tasks: int = Field(
        0, description="completed tasks a re-plan kept instead of running again"
    )
    reexecuted_tasks: int = Field(
        0, description="task runs a recovery caused: reruns and replacements"
    )
    lessons_applied: int = Field(
        0, description="plan edits taken from long-term memory before the first run"
    )
    regenerations: int = Field(
        0,
        description="re-plan proposals asked again because the gap-narrow rules refused some of their edits",
    )


class LlmUsage(BaseModel):
    """What the run's one brain spent: HTTP calls and tokens, and the questions the rules answered instead."""

    calls: int = Field(
        0,
        description="chat completions answered, repairs included (not the client's retries of failed requests)",
    )
    prompt_tokens: int = 0
    completion_tokens: int = 0
    questions: int = Field(
        0, description="questions the roles asked the LLM brain (plan, critique, summary, ...)"
    )
    fallbacks: int = Field(
        0,
        description="of those, questions the rules brain answered because the endpoint gave no usable answer",
    )


class LlmDiagnosis(BaseModel):
    """What the LLM experts of one diagnosis did, spent and were refused (RCAgent's controller counters)."""

    experts: list[str] = Field(
        default_factory=list, description="experts the alert and the abnormal metrics called in"
    )
    samples: int = Field(
        1, description="answers drawn per expert (self-consistency votes over their codes)"
    )
    calls: int = Field(0, description="chat completions sent")
    cached: int = Field(0, description="answers taken from the response cache instead of a call")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = Field(0, description="observations the experts asked for")
    snapshots: int = Field(
        0,
        description="observations too long to show whole: a head and a key to expand shown instead",
    )
    repairs: int = Field(0, description="answers json-repair made parseable without asking again")
    regenerations: int = Field(
        0, description="answers asked for again because they could not be used"
    )
    reflections: int = Field(
        0, description="lines of inquiry the experts scored (D-Bot's tree search)"
    )
    backtracks: int = Field(
        0, description="low-scoring branches abandoned for a better earlier point of the search"
    )
    corrections: dict[str, int] = Field(
        default_factory=dict, description="corrective messages sent: unknown_tool, repeated_action"
    )
    accepted: list[str] = Field(
        default_factory=list,
        description="'expert: code' proposals that passed the guard and the vote",
    )
    rejected: list[str] = Field(
        default_factory=list,
        description="'expert: code: why' proposals the hallucination guard refused",
    )
    fallbacks: list[str] = Field(
        default_factory=list,
        description="experts that gave no answer and why: the rules' causes stood",
    )
    stopped: str = Field(
        "", description="the budget that ran out (calls, tokens, seconds), empty when none did"
    )


class LlmAdditions(BaseModel):
    """What the LLM experts' step of a diagnosis added to the cross review's answer
    (dbcrew/operators/diagnose/llm_experts.py), as the report reads it from the workspace."""

    root_causes: list[RootCause] = Field(
        default_factory=list,
        description="the rules' causes in their order (corroborated where an expert agreed), then the"
        " causes only a model named that the measurements support",
    )
    hypotheses: list[Hypothesis] = Field(
        default_factory=list,
        description="causes a model named that the measurements do not support",
    )
    diagnosis: LlmDiagnosis | None = Field(
        None, description="what the experts did; None when there was no sampled window to show them"
    )


class TargetInfo(BaseModel):
    kind: str
    display: str
    server_version: str = ""


class GlobalStateRecord(BaseModel):
    """The paused crew's state as the monitor saw it: task lists and the failing worker's key facts."""

    done: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    running: list[str] = Field(
        default_factory=list, description="tasks that were running at the alert and finished first"
    )
    pending: list[str] = Field(default_factory=list)
    error: str = ""
    logs: list[str] = Field(default_factory=list)
    history: list[str] = Field(default_factory=list, description="the failing task's attempts")
    reflection: str = ""
    workers: list[str] = Field(default_factory=list, description="what each paused worker reported")


class Decision(BaseModel):
    """One monitor decision, kept for the report (alert -> leaf -> remedy)."""

    task_id: str
    error: str
    leaf: str
    branch: str
    confidence: float
    remedy: str
    detail: str = ""
    state: GlobalStateRecord | None = Field(
        None, description="the global state the monitor saw, compacted"
    )


class StatementChange(BaseModel):
    """One statement (queryid, userid) whose execution time per second changed most from the baseline to the window.

    Per-second figures, so a baseline and a window of different lengths compare; a mean is None where the
    statement did not run (a statement new in the window has no mean before)."""

    queryid: int
    userid: int
    query: str = Field(description="its normalised text as the server keeps it: data, never markup")
    time_ms_per_s_before: float
    time_ms_per_s_during: float
    calls_per_s_before: float
    calls_per_s_during: float
    rows_per_s_before: float
    rows_per_s_during: float
    mean_ms_before: float | None = None
    mean_ms_during: float | None = None


class TimeShare(BaseModel):
    """One line of a time attribution: what the time went to, its active-session samples and their share."""

    label: str
    samples: int
    share: float


class TimeAttribution(BaseModel):
    """Where a window's database time went (ASH-style): its active-session samples by wait class, wait
    event, statement and relation, each list heaviest first (the lightest left out)."""

    samples: int = Field(description="active-session samples over the window (all of the time)")
    by_wait_class: list[TimeShare] = Field(default_factory=list)
    by_wait_event: list[TimeShare] = Field(default_factory=list)
    by_statement: list[TimeShare] = Field(default_factory=list)
    by_relation: list[TimeShare] = Field(default_factory=list)


class DiagnosisSection(BaseModel):
    """D-Bot's report sections beyond the root causes: title, anomaly description, diagnosis process."""

    title: str
    anomaly_description: str
    abnormal_metrics: list[str] = Field(default_factory=list)
    changed_statements: list[StatementChange] = Field(
        default_factory=list,
        description="the statements whose time per second changed most against the baseline, most first",
    )
    experts: list[str] = Field(default_factory=list, description="experts the anomaly called in")
    process: list[str] = Field(
        default_factory=list, description="what each expert and the cross review concluded"
    )
    time_attribution: TimeAttribution | None = Field(
        None,
        description="where the window's active time went; None where sessions were not sampled",
    )


class HistoryItem(BaseModel):
    """One finding's place in the target's history: its code and object, severity, and when it was first seen."""

    code: str
    object: str
    severity: Severity
    first_seen: datetime

    @property
    def is_problem(self) -> bool:
        """`info` never counts as a problem (finding-codes.md), as for a Finding."""
        return self.severity is not Severity.INFO


class History(BaseModel):
    """What changed since the target's previous runs that saw the database (none: the first run).

    new: never seen before; persisting: in a recent run too (never absent from enough runs in a
    row to be resolved), not worse than its worst there; absent: in a recent run, not in this one,
    not yet resolved; resolved: absent from a few runs in a row now (dbcrew.roles.report.comparing's
    RESOLVED_AFTER_ABSENT_RUNS), only when the check that finds it ran and could judge its code;
    regressed: worse than in the recent runs, or back after it had been resolved; not_judged: in
    the previous run, missing now from a check that could not judge its code (it did not run, or
    its counters were too young, the target restarted, a privilege was missing).
    """

    previous_run_id: str | None = None
    previous_started_at: datetime | None = None
    new: list[HistoryItem] = Field(default_factory=list)
    persisting: list[HistoryItem] = Field(default_factory=list)
    resolved: list[HistoryItem] = Field(default_factory=list)
    regressed: list[HistoryItem] = Field(default_factory=list)
    absent: list[HistoryItem] = Field(
        default_factory=list,
        description="seen in a recent run, not in this one, not yet absent long enough to be resolved",
    )
    not_judged: list[HistoryItem] = Field(default_factory=list)


class HistoryUnavailable(BaseModel):
    """Why a run has no history: the shared store could not be used. The review's findings stand; nothing was
    compared with earlier runs, and the run is not kept for later ones."""

    store: str = Field(description="where the store is: a file path or a password-free URL")
    reason: str = Field(description="the store's error, in one line")

    def describe(self) -> str:
        return f"history unavailable: the store {self.store} cannot be used: {self.reason}"


class Report(BaseModel):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    target: TargetInfo
    scenario: Scenario
    interval: PastInterval | None = Field(
        None,
        description="a diagnosis of a past interval: the interval, diagnosed from stored samples",
    )
    started_at: datetime
    finished_at: datetime
    brain: str = Field(
        description="which brain answered, e.g. 'openai, 3 of 9 questions fell back to rules'"
    )
    coverage: list[CoverageEntry] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    root_causes: list[RootCause] = Field(default_factory=list)
    hypotheses: list[Hypothesis] = Field(
        default_factory=list,
        description="causes only a model proposed that the measured evidence did not confirm:"
        " the model's unconfirmed hypotheses, not root causes",
    )
    phases: Phases = Field(default_factory=Phases)
    plan: str = Field(
        "", description="how the plan was made: composed from the alert, or which playbook and why"
    )
    team: list[TeamMember] = Field(
        default_factory=list, description="the executed plan's agents and why each is on the team"
    )
    llm: LlmUsage = Field(default_factory=LlmUsage)
    summary: str = Field(
        "", description="the rules' summary, from the findings and the coverage, whatever the brain"
    )
    model_summary: str = Field(
        "",
        description="the LLM brain's own summary, as data: control, bidi and zero-width characters"
        " removed, bounded, shown quoted beside the summary and never in its place",
    )
    decisions: list[Decision] = Field(default_factory=list)
    edits: list[PlanEdit] = Field(
        default_factory=list, description="every plan edit: memory, monitor, re-plans"
    )
    declined: list[str] = Field(
        default_factory=list,
        description="re-plan edits not applied: refused by the gap-narrow rules"
        " (after regeneration) or dropped as not improving the plan, each with why",
    )
    unfixed_before: list[str] = Field(
        default_factory=list,
        description="errors earlier runs left unfixed on this target (long-term memory), each with"
        " what became of its operator in this run",
    )
    ablations: list[str] = Field(
        default_factory=list, description="recovery features switched off for this run"
    )
    partial: str = Field(
        "", description="why the review stopped short (re-plan budget spent), empty when it did not"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="what the reader should know about how the review ran (e.g. as a superuser)",
    )
    charts: list[str] = Field(default_factory=list)
    captions: dict[str, str] = Field(
        default_factory=dict, description="chart path -> what the chart shows"
    )
    diagnosis: DiagnosisSection | None = None
    llm_diagnosis: LlmDiagnosis | None = Field(
        None, description="the LLM experts' part of a diagnosis; none for the rules brain"
    )
    history: History | None = Field(
        None, description="what changed since the target's previous run (the shared store)"
    )
    history_unavailable: HistoryUnavailable | None = Field(
        None,
        description="why `history` is missing although the review completed (the store could not be used);"
        " None when the store answered",
    )
    link: str = Field(
        "", description="where to see this run: the Prefect UI's flow-run page when known"
    )
    error: str = Field("", description="why the run failed; empty when it completed")
