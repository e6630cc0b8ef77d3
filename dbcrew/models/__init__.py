"""Typed contracts shared by planner, workers, monitor and report (ARCHITECTURE.md, Contracts)."""

from dbcrew.models.brief import Brief
from dbcrew.models.catalogue import CatalogueEntry
from dbcrew.models.finding import Finding, Severity
from dbcrew.models.plan import AgentSpec, Role, Strategy, TaskSpec
from dbcrew.models.report import CoverageEntry, Phases, Report, RootCause

__all__ = [
    "AgentSpec",
    "Brief",
    "CatalogueEntry",
    "CoverageEntry",
    "Finding",
    "Phases",
    "Report",
    "Role",
    "RootCause",
    "Severity",
    "Strategy",
    "TaskSpec",
]
