"""The rules brain's composed plan: the operators an alert concerns, matched as D-Bot matches tools.

An alert names symptoms in its own words ("the standby is 15 minutes behind"), or, from the
watcher, the abnormal metrics themselves (`host.cpu_busy 0.2 -> 0.97`). Two channels pick the
operators of the team from the catalogue the target can run:

- signals: a metric the run is about picks every operator declaring a prefix of it (`signals`).
  A watcher's incident gives its abnormal signals typed (`PlanRequest.signals`, its strongest
  STRONGEST_SIGNALS); any other metric name the alert's text carries counts as well;
- text: the alert is matched (faiss cosine, dbcrew/text/embedding.py: hashed n-grams, nothing
  downloaded) against each operator's document: its name, its description, the codes it emits and
  the knowledge chunks it owns (`knowledge`). The best match and those close to it join, a few at
  most; below the floor nothing matches. n-grams bridge spellings, not synonyms: both sides are
  matched by their `words`, which keep an identifier whole (`pg_wal`, `max_connections`: one thing,
  not the common `pg` and `max`) and add beside each word the head of its group in the glossary
  (dbcrew/knowledge/symptoms/terms.yaml: session, login, client -> connection), so an alert and a
  passage that name one thing in different words share a feature.

The team is then closed over the picks' needs (the producer of every artifact they need, and of
theirs), and every operator the scenario declares for each of its plans (`planned_for`: the
window's sampling, the cross review, its charts) is added. Each task says why it is on the team.
No alert and no signal, or ones that match nothing, is no composition: the scenario's playbook runs whole.

A composed plan also asks of its painters only the work the evidence calls for (`lean_params`): a
painter that can draw only what the root causes rest on (`CITED_ONLY`) does, where the playbook
draws its fixed charts whole. The charts are most of a diagnosis's CPU after its window (a chart of
six abnormal metrics about 0.2 CPU-s, of one or two 0.06-0.08 s; an expert about 0.003 s).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from dbcrew.models import CatalogueEntry, Role
from dbcrew.models.crew import PlanRequest
from dbcrew.models.incident import STRONGEST_SIGNALS
from dbcrew.operators.knowledge import chunks, symptoms, terms
from dbcrew.roles.brains.playbooks import PLAYBOOKS
from dbcrew.text import VectorIndex, tokens
from dbcrew.vocabulary import Category, Scenario

# A cosine of the alert to an operator's document below this is no match (the hashed n-grams of two
# unrelated English sentences score about 0.05-0.10 on shared function words and suffixes).
MATCH_FLOOR = 0.13
# Operators scoring within this share of the best match join it ...
MATCH_SHARE = 0.6
# ... a few at most: an alert is about one problem, and the team is small for a reason.
MAX_MATCHED = 3
# A painter's parameter (dbcrew/operators/diagnose/charts.py): draw only what the root causes rest on.
CITED_ONLY = "cited_only"
# A watcher's metric names: dotted lower-case words (host.cpu_busy, io.relation.read_time).
METRIC = re.compile(r"\b[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+\b")
# A setting, a view, a directory: snake_case words (max_connections, pg_stat_activity, pg_wal).
IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
# The plain inflections a glossary member also matches (sessions, logins, grows, growing, locked).
INFLECTIONS = ("s", "es", "ed", "d", "ing")


def composable(scenario: Scenario) -> tuple[Category, ...]:
    """What a composed plan of `scenario` may draw on: its playbook's categories and every health check
    (a diagnosis has no expert for a replica's lag or a full connection table; the checks judge them)."""
    return tuple(dict.fromkeys((*PLAYBOOKS[scenario], Category.CHECKS)))


@dataclass(frozen=True)
class Composition:
    """The operators of a composed plan, in catalogue order, each with why it is on the team."""

    operators: list[str]
    why: dict[str, str]
    matched: (
        int  # operators the alert picked (the rest: declared for the scenario, or needed by them)
    )
    # What the plan asks of an operator beyond its defaults (`lean_params`), by operator.
    params: dict[str, dict[str, object]]


def lean_params(entry: CatalogueEntry) -> dict[str, object]:
    """What a composed plan asks of `entry` beyond its defaults: a painter able to draw only what the root
    causes rest on does so (no panel for a cause the diagnosis does not propose)."""
    return {CITED_ONLY: True} if CITED_ONLY in entry.params_schema.get("properties", {}) else {}


def judged(metrics: list[str], catalogue: list[CatalogueEntry]) -> list[str]:
    """`metrics` without repeats, those of a family some operator of `catalogue` declares signals of."""
    families = {prefix.split(".")[0] for e in catalogue for prefix in e.signals}
    return [m for m in dict.fromkeys(metrics) if m.split(".")[0] in families]


def signals_named(request: PlanRequest) -> list[str]:
    """The metrics the run is about, in order: the strongest signals of the incident that started it (typed,
    as the watcher found them), then any other metric name the alert's text carries (a user's, Alertmanager's)."""
    typed = [s.name for s in request.signals[:STRONGEST_SIGNALS]]
    return judged([*typed, *METRIC.findall(request.alert)], request.catalogue)


def signal_of(entry: CatalogueEntry, metric: str) -> str | None:
    """The declared prefix of `entry` that `metric` falls under, if any."""
    return next((p for p in entry.signals if metric.startswith(p)), None)


@lru_cache(maxsize=4096)
def head_of(word: str) -> str | None:
    """The glossary head `word` names (itself or an inflection of a member: 'logins' -> connection,
    'deleting' -> delete, 'queries' -> query), or None."""
    folded = terms()
    stems = [word, *(word[: -len(end)] for end in INFLECTIONS if word.endswith(end))]
    stems += [stem + "e" for stem in stems[1:]]  # deleting -> delete, increased -> increase
    if word.endswith(("ies", "ied")):
        stems.append(word[:-3] + "y")  # queries -> query
    return next((folded[stem] for stem in stems if stem in folded), None)


def words(text: str) -> list[str]:
    """What a text is matched by: its tokens, each identifier it names whole, and beside each word the
    glossary head it names, when that is another word."""
    found = list(dict.fromkeys(IDENTIFIER.findall(text.lower())))
    for word in tokens(text):
        found.append(word)
        head = head_of(word)
        if head is not None and head != word:
            found.append(head)
    return found


def passages(entry: CatalogueEntry) -> list[str]:
    """What the alert is matched against, one passage at a time: the operator's name and description,
    each knowledge chunk it owns, and each code it emits (its checks', its chunks') with how that
    problem presents (dbcrew/knowledge/symptoms/). An alert is about one problem, so an operator matches as
    well as its best passage: one long document of them all would dilute every one."""
    owned = [c for c in chunks() if entry.knowledge and c.expert == entry.knowledge]
    codes = list(dict.fromkeys([*entry.checks, *(c.code for c in owned)]))
    presents = symptoms()
    texts = [
        f"{entry.name.replace('_', ' ')}. {entry.description}",
        *(f"{c.name}. {c.content}" for c in owned),
        *(f"{code.replace('_', ' ')}: {presents[code]}" for code in codes if code in presents),
    ]
    return [" ".join(words(text)) for text in texts]


@lru_cache(maxsize=8)
def _index(owners: tuple[int, ...], texts: tuple[str, ...]) -> VectorIndex:
    """One faiss index per distinct catalogue (a process plans many runs over the same one)."""
    return VectorIndex(list(texts), weighted=True)


def match_scores(queries: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
    """Each document's best cosine to any query, in order: a document (an operator's passages) matches
    as well as its best passage does to the closest query (texts already read by `words`)."""
    owners, texts = [], []
    for i, document in enumerate(documents):
        for text in document:
            owners.append(i)
            texts.append(text)
    index = _index(tuple(owners), tuple(texts))
    best = [0.0] * len(documents)
    for query in queries:
        for owner, score in zip(owners, index.scores(query)):
            best[owner] = max(best[owner], float(score))
    return best


def text_scores(alert: str, entries: list[CatalogueEntry]) -> list[float]:
    """The alert's cosine to each entry's best passage, in order."""
    return match_scores([" ".join(words(alert))], [passages(entry) for entry in entries])


def close_to_best(scores: Sequence[float]) -> list[int]:
    """The positions that match, best first: the best score and those within MATCH_SHARE of it, none
    under MATCH_FLOOR, MAX_MATCHED at most."""
    bar = max(MATCH_FLOOR, MATCH_SHARE * max(scores, default=0.0))
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [i for i in ranked if scores[i] >= bar][:MAX_MATCHED]


def shared_words(alert: str, entry: CatalogueEntry, limit: int = 4) -> list[str]:
    """The alert's words the operator's document also holds (prefix-close: 'replica' ~ 'replication')."""
    held = {w for text in passages(entry) for w in text.split()}
    found = [
        w
        for w in dict.fromkeys(tokens(alert))
        if len(w) > 2 and any(h.startswith(w[:5]) for h in held)
    ]
    return found[:limit]


def producers(catalogue: list[CatalogueEntry]) -> dict[str, CatalogueEntry]:
    """artifact -> the operator that produces it (the primary one, where equivalents exist)."""
    found: dict[str, CatalogueEntry] = {}
    for entry in sorted(catalogue, key=lambda e: e.equivalent_of is not None):
        for artifact in entry.produces:
            found.setdefault(artifact, entry)
    return found


def close_over_needs(
    chosen: dict[str, str], catalogue: list[CatalogueEntry]
) -> dict[str, str] | None:
    """`chosen` with the producer of every artifact its operators need, and theirs; None when one is missing."""
    entries = {e.name: e for e in catalogue}
    made = producers(catalogue)
    closed = dict(chosen)
    pending = list(chosen)
    while pending:
        entry = entries[pending.pop()]
        for artifact in entry.needs:
            producer = made.get(artifact)
            if producer is None:
                return None
            if producer.name not in closed:
                closed[producer.name] = f"produces {artifact}, which {entry.name} needs"
                pending.append(producer.name)
    return closed


def compose(request: PlanRequest) -> Composition | str:
    """The composed team's operators, or why there is none (the playbook then runs whole)."""
    alert = request.alert.strip()
    if not alert and not request.signals:
        return "no alert text or incident signal to compose a team from"
    categories = composable(request.scenario)
    candidates = [
        e
        for e in request.catalogue
        if e.category in categories
        and e.equivalent_of is None
        and e.role in (Role.TASKER, Role.PAINTER)
        and request.scenario not in e.planned_for
    ]
    chosen: dict[str, str] = {}
    found = {s.name for s in request.signals}
    for metric in signals_named(request):
        said = "the incident found abnormal" if metric in found else "the alert names"
        for entry in candidates:
            prefix = signal_of(entry, metric)
            if prefix is not None and entry.name not in chosen:
                chosen[entry.name] = f"judges {metric}, a signal {said} ({prefix}*)"
    scores = text_scores(alert, candidates) if candidates and alert else []
    best = max(scores, default=0.0)
    for i in close_to_best(scores):
        entry = candidates[i]
        if entry.name not in chosen:
            shared = ", ".join(shared_words(alert, entry)) or "its wording"
            chosen[entry.name] = (
                f"the alert matches its description (cosine {scores[i]:.2f}: {shared})"
            )
    if not chosen:
        return f"the alert matched no operator (best cosine {best:.2f}, under {MATCH_FLOOR})"
    matched = len(chosen)
    for entry in request.catalogue:
        if request.scenario in entry.planned_for and entry.name not in chosen:
            chosen[entry.name] = f"every {request.scenario} plan carries it (declared)"
    closed = close_over_needs(chosen, request.catalogue)
    if closed is None:
        return "a matched operator needs an artifact nothing on this target produces"
    planned = [e for e in request.catalogue if e.name in closed]
    params = {e.name: lean_params(e) for e in planned if lean_params(e)}
    for name in params:
        closed[name] += "; draws only what the root causes rest on"
    return Composition(
        operators=[e.name for e in planned], why=closed, matched=matched, params=params
    )
