"""Whether the measured evidence supports a cause only a model proposed.

The hallucination guard (dbcrew/roles/diagnosis/guard.py) makes sure a model's cause cites values the
window really holds; it does not make the cause true. A small model citing the insert rate
correctly can still call it CPU contention. So a cause only a model names becomes a root cause only
where the measurements the rules judge by stand behind it:

- where the window's sessions were sampled one by one, the cause must explain at least
  `minor_time_share` of the active time (dbcrew/operators/diagnose/attribution.py, the same share the
  cross review drops a cause under): a cause that explains almost none of the time is refuted;
- where its time cannot be seen in the samples (a window sampled too thinly, a cause whose time is
  no session's), the expert owning it must find its own criterion met on the same facts.

Otherwise it is the model's unconfirmed hypothesis, shown apart from the root causes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dbcrew.operators.diagnose.attribution import cause_time
from dbcrew.operators.diagnose.candidates import Candidate, Facts
from dbcrew.operators.diagnose.experts import CAUSE_TIME, EXPERTS
from dbcrew.vocabulary import Cause


@dataclass(frozen=True)
class Support:
    """The verdict on a model's cause: confirmed or not, why, and its share of the active time (None
    where not measured)."""

    confirmed: bool
    why: str
    time_share: float | None = None


def expert_candidates(facts: Facts) -> list[Candidate]:
    """Every expert's candidates on `facts`: the causes whose criterion the measurements meet."""
    return [c for expert in EXPERTS.values() for c in expert(facts)]


def support(code: Cause, facts: Facts, candidates: Sequence[Candidate]) -> Support:
    """Whether the window's measurements support `code` (see the module's docstring); `candidates`
    are the experts' on the same facts (`expert_candidates`)."""
    own = next((c for c in candidates if c.code == code), None)
    claimant = own or Candidate(code=code, expert="model", strength=0.0)
    others = [c for c in candidates if c.code != code]
    explained = cause_time([*others, claimant], facts.window, CAUSE_TIME).get(code)
    minor = facts.thresholds.diagnosis.minor_time_share
    if explained is not None:
        share = explained.share
        if share >= minor:
            return Support(True, f"explains {share:.0%} of the sampled active time", share)
        return Support(
            False,
            f"explains {share:.0%} of the sampled active time, under minor_time_share ({minor:.0%})",
            share,
        )
    if own is not None:
        return Support(
            True, f"the {own.expert} expert's criterion holds ({own.strength:.1f}x its threshold)"
        )
    return Support(
        False,
        "no expert's criterion holds on the measurements, and its time cannot be seen in the"
        " sampled sessions",
    )
