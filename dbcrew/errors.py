"""The root of every error dbcrew raises on purpose, and the kernel's user-input errors.

One root makes "a failure dbcrew meant to report" one `except DbcrewError`, and anything else an
internal error. Each class stays in the module that raises it (a role's or an operator's error is
not the kernel's to import); one that callers also catch as a builtin (ValueError, RuntimeError,
LookupError) keeps that base beside its dbcrew one. The CLI turns a UsageError into exit code 2
with one clear line, never a traceback. tests/unit/test_errors.py holds this tree to the code:

DbcrewError             dbcrew.errors: every error dbcrew raises on purpose
├── UsageError          dbcrew.errors: bad input from the user; the CLI exits 2
│   ├── TargetError     dbcrew.errors: the target is unreachable, refuses us, is unsupported
│   ├── PrometheusError dbcrew.operators.window.prometheus.api: Prometheus does not answer, refuses the query, is not Prometheus
│   ├── OutNotWritable  dbcrew.errors: the run's folder refused a write (full, gone, read-only)
│   └── InvalidEnvironment  dbcrew.settings.environment, a ValueError: a DBCREW_* variable holds a bad value
├── BrainError          dbcrew.llm.base: the brain gave no usable answer
│   ├── EndpointDown    dbcrew.llm.base: the endpoint did not answer at all
│   ├── BudgetSpent     dbcrew.llm.base: the run's LLM time budget is spent
│   ├── GaveUp          dbcrew.roles.agent.controller: an agent loop used its steps without its final action
│   └── PlanRejected    dbcrew.roles.crew.planner: the plan kept problems after its reflection rounds
├── BudgetExhausted     dbcrew.roles.agent.budget: a limit of an agent loop ran out (a diagnosis's experts, ask's look-ups)
├── StoreUnavailable    dbcrew.store.backends, a RuntimeError: the store cannot be opened or used
├── UnknownArtifact     dbcrew.artifacts, a ValueError: a name no module declares as a workspace artifact
├── OperatorMisfit      dbcrew.operators.registry: the operator cannot serve its goal on this target
├── UnknownMetric       dbcrew.operators.window.metrics, a ValueError: a metric name the catalogue does not declare
├── Unplannable         dbcrew.operators.explain, a ValueError: the text may not be planned here
├── HypopgMissing       dbcrew.operators.hypothetical_indexes, a LookupError: no hypopg in the database
├── NoSamples           dbcrew.operators.window.store, a LookupError: the store (or Prometheus) holds no samples of the interval
├── StatementsUnreadable  dbcrew.operators.window.readers, a LookupError: the session cannot read pg_stat_statements now (the view revoked, the extension dropped)
├── AmbiguousSeries     dbcrew.operators.window.prometheus.source, a LookupError: several servers' series match the target's database
├── MissingSlot         dbcrew.roles.ask.instance, a ValueError: the question lacks a name the look-up needs
├── StoppedWaiting      dbcrew.flows.target_slots: the process was asked to stop while a run waited for its target's slot
├── AlertNotDelivered   dbcrew.roles.report.alerts, a RuntimeError: Apprise could not deliver to every URL
└── LlamaServerError    dbcrew.lab.llama_server, a RuntimeError: the local model's server could not be found, converted or started
"""

from __future__ import annotations

from pathlib import Path


class DbcrewError(Exception):
    """An error dbcrew raises on purpose: its message tells the user what failed (no traceback)."""


class UsageError(DbcrewError):
    """Bad input from the user: a malformed target, an unknown option value, a missing file."""


class TargetError(UsageError):
    """The target cannot be used: unreachable, authentication failed, not a supported kind."""


class OutNotWritable(UsageError):
    """The run's folder (--out, or the reports folder) refused a write: a full disk, a folder gone or made
    read-only. The folder the user gave cannot take the run; the review itself is not at fault."""

    def __init__(self, path: Path, what: str, reason: str):
        super().__init__(f"{path}: cannot write the {what}: {reason}")
        self.path = path
