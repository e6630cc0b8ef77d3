"""D-Bot's tree search over one agent's lines of inquiry (a diagnosis's expert, ask's look-ups):
expand, observe, reflect, score, backtrack.

Each node is the conversation at one point of the search (its messages, the actions taken on its
path, the observations it still shows whole). A model turn expands the current node into a child.
The model scores its line of inquiry with `reflect` (a hypothesis code, a score from 0 to 1, a
note); a node it did not score inherits its parent's score, the root starts at PRIOR_SCORE. When a
reflection scores below BACKTRACK_BELOW, or a proposal is made on such a branch, the branch is
closed back to the last node that scored well (or the root), and the search resumes from the best
open node with a note of what was abandoned and why: the abandoned observations are no longer sent,
only the lesson. A proposal on a branch that scores well ends the search; when the steps run out,
the best-scoring proposal made on any branch is the expert's answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

REFLECT = (
    "reflect"  # the tool with which the model scores its line of inquiry; the controller answers it
)
PRIOR_SCORE = 0.5  # an unscored line of inquiry: neither promising nor abandoned
BACKTRACK_BELOW = 0.4


@dataclass
class Node:
    messages: list[dict[str, Any]]
    seen: set[str] = field(
        default_factory=set
    )  # action signatures on this path: a repeat is corrected
    shown: list[tuple[int, str, str]] = field(
        default_factory=list
    )  # (message index, tool, observation) shown whole
    parent: Node | None = None
    score: float = PRIOR_SCORE
    hypothesis: str = ""
    note: str = ""  # the reflection's own words: the lesson an abandoned branch leaves
    scored: bool = False  # a reflection on this node set its score
    observed: list[str] = field(default_factory=list)  # the tools observed on this node's turn
    closed: bool = False
    depth: int = 0

    def child(self) -> Node:
        """The next turn's node: the path so far, the parent's score until a reflection says otherwise."""
        return Node(
            messages=list(self.messages),
            seen=set(self.seen),
            shown=list(self.shown),
            parent=self,
            score=self.score,
            hypothesis=self.hypothesis,
            depth=self.depth + 1,
        )


@dataclass
class Search:
    """The nodes of one agent's search, the branches it abandoned, and the results (an expert's
    proposals, ask's answers) made on the way."""

    root: Node
    nodes: list[Node] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    candidates: list[tuple[float, BaseModel]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.nodes.append(self.root)

    def expand(self, node: Node) -> Node:
        child = node.child()
        self.nodes.append(child)
        return child

    def low(self, node: Node) -> bool:
        return node.score < BACKTRACK_BELOW

    def backtrack(self, node: Node) -> Node:
        """Close the branch that ends in `node` (back to its last well-scored ancestor, or the root) and
        return the best open node to resume from: the highest score, the deepest among equals."""
        branch: list[Node] = []
        cursor: Node | None = node
        while (
            cursor is not None
            and cursor is not self.root
            and not (cursor.scored and not self.low(cursor))
        ):
            cursor.closed = True
            branch.append(cursor)
            cursor = cursor.parent
        observed = [tool for n in reversed(branch) for tool in n.observed]
        self.abandoned.append(
            f"{node.hypothesis or 'an unnamed hypothesis'} scored {node.score:g} after observing "
            f"{', '.join(observed) or 'nothing new'}"
            + (f": {node.note[:200]}" if node.note else "")
        )
        return max((n for n in self.nodes if not n.closed), key=lambda n: (n.score, n.depth))

    def best_candidate(self) -> BaseModel | None:
        """The proposal of the best-scoring branch (the earliest among equals), None when none was made."""
        if not self.candidates:
            return None
        return max(enumerate(self.candidates), key=lambda ic: (ic[1][0], -ic[0]))[1][1]
