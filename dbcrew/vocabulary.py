"""The crew's typed vocabulary: scenarios, operator categories, task statuses, plan problems,
remedies, finding and root-cause codes.

Codes are the stable API of report.json (shared/finding-codes.md); they are StrEnums so a code
is checked where it is written, compares equal to its string in stored reports, and serializes
as that string. tests/unit/test_vocabulary.py keeps `FindingCode` and `RootCauseCode` in step
with finding-codes.md.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Scenario(StrEnum):
    """What a run is for; each has a playbook in dbcrew/roles/brains/playbooks.py."""

    HEALTH = "health"  # the periodic health review
    DIAGNOSE = "diagnose"  # root causes of a performance anomaly happening now


BrainName = Literal["rules", "openai"]  # a dropdown in the Prefect UI's run form


class Category(StrEnum):
    """Operator categories (D-Bot's categories -> tools -> APIs); playbooks draw on them."""

    COLLECT = "collect"
    CHECKS = "checks"
    ADVISE = "advise"
    DIAGNOSE = "diagnose"
    PAINT = "paint"


class TaskStatus(StrEnum):
    """How a task of the plan ended."""

    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class ProblemKind(StrEnum):
    """Why a plan may not run as drafted: a validator's objection (dbcrew/roles/crew/validators.py) or a critic's."""

    DUPLICATE_ID = "duplicate_id"
    DUPLICATE_AGENT = "duplicate_agent"
    UNKNOWN_OPERATOR = "unknown_operator"  # not in the catalogue pruned for this target
    MISSING_AGENT = "missing_agent"
    WRONG_ROLE = "wrong_role"  # the operator belongs to another role than its agent's
    UNKNOWN_DEPENDENCY = "unknown_dependency"
    UNKNOWN_ARTIFACT = "unknown_artifact"  # a task says it produces a name no operator declares
    BAD_PARAMS = "bad_params"  # parameters the operator's model rejects
    CYCLE = "cycle"
    MISSING_INPUT = "missing_input"  # an artifact the operator needs comes from no upstream task
    EMPTY_PLAN = "empty_plan"  # no task: nothing would be reviewed
    # a critic's objections (an LLM brain's critique, dbcrew/prompts/critique.j2)
    MISSING_CHECK = (
        "missing_check"  # a check the scenario (or a signal the alert names) needs is not planned
    )
    IDLE_AGENT = "idle_agent"  # an agent of the team has no task
    UNFIT_TASK = "unfit_task"  # a task that cannot serve its goal


class RemedyKind(StrEnum):
    """How the monitor's remedy is carried out: at once by the tasker, or by the planner re-planning."""

    INSTRUCTION = "instruction"
    REPLAN = "replan"


class Action(StrEnum):
    """The monitor's remedies (dbcrew/error_tree/tree.yaml names one per leaf)."""

    # instructions the tasker applies at once
    RETRY = "retry"
    USE_EQUIVALENT = "use_equivalent"
    SKIP = "skip"
    CHANGE_PARAMS = "change_params"  # retry with parameters the monitor changed
    REORDER = "reorder"  # run the task after the ones it turned out to depend on
    # re-plan edits
    REPLACE_OPERATOR = "replace_operator"
    ADD_AGENT = "add_agent"
    REMOVE_SUBGRAPH = "remove_subgraph"

    @property
    def kind(self) -> RemedyKind:
        replans = self in (Action.REPLACE_OPERATOR, Action.ADD_AGENT, Action.REMOVE_SUBGRAPH)
        return RemedyKind.REPLAN if replans else RemedyKind.INSTRUCTION


class EditSource(StrEnum):
    """Who made a plan edit."""

    REPLAN = "replan"  # the planner narrowing the gap after a logic failure
    MONITOR = "monitor"  # an instruction the tasker applied at once
    MEMORY = "memory"  # a lesson from long-term memory, applied before the first run


class Route(StrEnum):
    """Where `dbcrew ask` sends a question (DQA's question classification routing, QCR)."""

    UNSAFE = "unsafe"  # a write or destructive request: refused, the crew is read-only
    OFF_TOPIC = "off_topic"  # not about databases: declined
    GENERAL = "general"  # database knowledge that holds for any engine: answered from the manual and knowledge
    PRODUCT = "product"  # PostgreSQL's own features and settings: retrieval over the manual, cited
    INSTANCE = "instance"  # about the target's own state: read-only look-ups (tool invocation)
    ANALYSIS = "analysis"  # a whole review or diagnosis: the planner forms a team


class Lookup(StrEnum):
    """The read-only look-ups an instance question becomes (dbcrew/operators/lookups.py, dbcrew/operators/table_lookups.py), one per kind of answer."""

    TABLE_SIZE = "table_size"
    TABLE_COLUMNS = "table_columns"
    TABLE_INDEXES = "table_indexes"
    TABLE_STATS = "table_stats"
    TABLE_KEYS = "table_keys"
    TABLE_AUTOVACUUM = "table_autovacuum"
    INDEX_INFO = "index_info"
    SETTING = "setting"
    ACTIVITY = "activity"
    LOCKS = "locks"
    DATABASE_SIZE = "database_size"
    LARGEST_TABLES = "largest_tables"
    LIST_TABLES = "list_tables"
    SERVER_VERSION = "server_version"
    EXTENSIONS = "extensions"
    WRAPAROUND = "wraparound"


class FindingCode(StrEnum):
    """Health checks: the state of the database (finding-codes.md, first table)."""

    CACHE_HIT_RATIO_LOW = "cache_hit_ratio_low"
    INDEX_UNUSED = "index_unused"
    INDEX_DUPLICATE = "index_duplicate"
    INDEX_INVALID = "index_invalid"
    INDEX_MISSING = "index_missing"
    INDEXES_TOO_MANY = "indexes_too_many"
    FK_WITHOUT_INDEX = "fk_without_index"
    TABLE_WITHOUT_PRIMARY_KEY = "table_without_primary_key"
    TABLE_BLOAT = "table_bloat"
    INDEX_BLOAT = "index_bloat"
    DEAD_TUPLES_HIGH = "dead_tuples_high"
    AUTOVACUUM_DISABLED = "autovacuum_disabled"
    STATISTICS_STALE = "statistics_stale"
    XID_WRAPAROUND_RISK = "xid_wraparound_risk"
    MXID_WRAPAROUND_RISK = "mxid_wraparound_risk"
    SEQUENCE_EXHAUSTION = "sequence_exhaustion"
    LONG_RUNNING_QUERY = "long_running_query"
    IDLE_IN_TRANSACTION = "idle_in_transaction"
    BLOCKING_LOCKS = "blocking_locks"
    CONNECTIONS_SATURATION = "connections_saturation"
    SLOW_QUERY = "slow_query"
    TEMP_FILES_SPILL = "temp_files_spill"
    CHECKPOINTS_TOO_FREQUENT = "checkpoints_too_frequent"
    REPLICATION_LAG = "replication_lag"
    REPLICATION_SLOT_INACTIVE = "replication_slot_inactive"
    SETTING_SUBOPTIMAL = "setting_suboptimal"
    EXTENSION_MISSING = "extension_missing"
    PRIVILEGE_INSUFFICIENT = "privilege_insufficient"


class RootCauseCode(StrEnum):
    """Root causes of a performance anomaly (finding-codes.md, second table, D-Bot's taxonomy).

    A root cause may also be any `FindingCode` when that state caused the anomaly: see `Cause`.
    """

    WORKLOAD_MANY_INSERTS = "workload_many_inserts"
    WORKLOAD_LARGE_INSERT = "workload_large_insert"
    WORKLOAD_HIGH_UPDATES = "workload_high_updates"
    WORKLOAD_MANY_DELETES = "workload_many_deletes"
    WORKLOAD_LARGE_FETCH = "workload_large_fetch"
    QUERY_POOR_JOIN = "query_poor_join"
    QUERY_CORRELATED_SUBQUERY = "query_correlated_subquery"
    SYNC_COMMIT_PRESSURE = "sync_commit_pressure"
    LOCK_CONTENTION = "lock_contention"
    VACUUM_INTERFERENCE = "vacuum_interference"
    CPU_CONTENTION = "cpu_contention"
    IO_CONTENTION = "io_contention"
    MEMORY_PRESSURE = "memory_pressure"


# What a root cause may name: a cause of the taxonomy, or a health state that caused the anomaly.
Cause = RootCauseCode | FindingCode


def cause_code(text: str) -> Cause:
    """The code a string names, as a root cause first; ValueError for anything outside the vocabulary."""
    try:
        return RootCauseCode(text)
    except ValueError:
        return FindingCode(text)
