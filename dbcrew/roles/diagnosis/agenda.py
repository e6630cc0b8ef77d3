"""What an LLM expert's loop is for, on the shared agent loop (dbcrew/roles/agent/controller.py): the
diagnosis's prompts, its final action (`propose_causes`, whose arguments are the causes put forward)
and how a prompted turn reads (one JSON object; a bare {"causes": ...} is the proposal)."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from dbcrew.roles.agent.controller import Agenda, Controller, parse_json
from dbcrew.roles.diagnosis.guard import ProposedCause
from dbcrew.roles.diagnosis.tools import PROPOSE


class CauseProposal(BaseModel):
    """The arguments of propose_causes: the causes an expert puts forward."""

    causes: list[ProposedCause]


def json_turn(text: str) -> tuple[Any, bool]:
    """A prompted diagnosis turn: one JSON object, a bare {"causes": ...} being the proposal."""
    value, repaired = parse_json(text)
    if isinstance(value, dict) and "causes" in value and "action" not in value:
        value = {"action": PROPOSE, "args": value}  # a bare final answer is a proposal
    return value, repaired


DIAGNOSIS = Agenda(
    system="diagnose_system.j2",
    task="diagnose_expert.j2",
    feedback="diagnose_feedback.j2",
    finish=PROPOSE,
    result=CauseProposal,
    read=json_turn,
)


def run_expert(
    controller: Controller, expert: str, context: dict[str, Any], sample: int = 0
) -> list[ProposedCause]:
    """The causes one expert proposes after a tree search of at most `steps` calls (dbcrew/roles/agent/tree.py),
    on a controller whose agenda is DIAGNOSIS. BudgetExhausted, BrainError (EndpointDown included) or
    GaveUp otherwise."""
    return cast(CauseProposal, controller.run({**context, "expert": expert}, sample)).causes
