"""What an expert reads (`Facts`: the window, its baseline, the heavy statements' plans, the run's
thresholds) and what it proposes (`Candidate`: a cause with its strength and evidence).

A cause's criterion (dbcrew/operators/diagnose/causes/) returns a `Proposal`, what only the window can say
(how strong, on what evidence, about which objects); the declaration adds the rest (the code, the
expert, the indicators), so the criterion cannot name another cause than the one declared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from dbcrew.operators.diagnose.judgements import StatementPlan
from dbcrew.operators.window.anomaly import AbnormalMetric
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.metrics import COMMITS, Metric
from dbcrew.settings.thresholds import Thresholds
from dbcrew.vocabulary import Cause


class Candidate(BaseModel):
    """A cause one expert proposes, with how far its evidence exceeds the threshold (strength >= 1)."""

    code: Cause
    expert: str
    strength: float
    evidence: dict[str, object] = Field(default_factory=dict)
    indicators: list[str] = Field(
        default_factory=list, description="metrics whose abnormality supports it"
    )
    objects: list[str] = Field(default_factory=list)

    @property
    def base_confidence(self) -> float:
        return min(0.9, 0.6 + 0.15 * math.log2(max(self.strength, 1.0)))


@dataclass(frozen=True)
class Proposal:
    """What a cause's criterion found on the window: how far its evidence exceeds the threshold
    (strength >= 1), the evidence, and the objects (tables) it is about."""

    strength: float
    evidence: dict[str, object] = field(default_factory=dict)
    objects: list[str] = field(default_factory=list)


@dataclass
class Facts:
    window: WindowEvidence
    baseline: WindowEvidence | None
    abnormal: list[AbnormalMetric]
    plans: list[StatementPlan] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)  # the run's: what "too much" means

    @property
    def abnormal_names(self) -> set[str]:
        return {m.name for m in self.abnormal}

    def per_commit(self, metric: Metric) -> float:
        commits = self.window.mean(COMMITS)
        return self.window.mean(metric) / commits if commits else 0.0
