"""Question classification routing (DQA's QCR) for `dbcrew ask`, offline.

Two parts. A deterministic check catches every request to change something (a write verb in
command position, or a data-changing SQL statement in the text) whatever the classifier thinks,
so no unsafe request slips through a misclassification; the classifier can only add refusals.
Then a TF-IDF (words and character n-grams) + logistic-regression classifier, trained from the
project's own labelled questions (dbcrew/data/questions.yaml), picks the route, and a second one
picks the look-up of an instance question. Training takes a second; the models are trained once
per version of the data and pickled into the user's cache directory.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from dbcrew.build_cache import cached_build
from dbcrew.roles.ask.question_features import annotate, annotate_all
from dbcrew.vocabulary import Lookup, Route

# The kernel's package data (pyproject.toml: dbcrew = ["data/*.yaml"]), wherever dbcrew is installed.
QUESTIONS = Path(str(files("dbcrew").joinpath("data", "questions.yaml")))
MODEL_VERSION = 4
# Names that fill the training templates: made up, so no name of a real database is learnt.
TRAIN_TABLES = (
    "invoices",
    "users",
    "events",
    "payments",
    "accounts",
    "shipments",
    "sessions",
    "page_views",
)
TRAIN_INDEXES = (
    "invoices_pkey",
    "users_email_idx",
    "events_created_at_idx",
    "payments_account_id_idx",
)
TRAIN_SETTINGS = (
    "work_mem",
    "shared_buffers",
    "max_connections",
    "autovacuum_naptime",
    "random_page_cost",
    "effective_cache_size",
    "log_min_duration_statement",
    "checkpoint_timeout",
)
UNSAFE_CONFIDENCE = 0.6
CLOSE_CALL = 0.2  # probability margin under which the instance route needs a cue of its own
# Without a target's catalogue, a snake_case name that is not PostgreSQL's own (pg_*) or a name next
# to "table"/"index" is the best sign that a question names one of the database's objects.
_OBJECT_NAME = re.compile(
    r"\b(?!pg_)[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z]\w*\s+(?:table|index)\b", re.IGNORECASE
)
SLOT_WORDS = {"table": "tablename", "index": "indexname", "setting": "settingname"}

# -- the deterministic unsafe check -----------------------------------------------------------------

_POLITE = (
    r"(?:(?:please|pls|kindly|now|then|also|just|quickly|go ahead and|and|can you|could you|would you|will you|"
    r"i want you to|i need you to|i'd like you to|i would like you to|you should|you must|you are now [\w ]+?,|let's|lets|help me)\s+)*"
)
_ALWAYS = (
    "drop",
    "delete",
    "truncate",
    "insert",
    "wipe",
    "purge",
    "erase",
    "rename",
    "grant",
    "revoke",
    "reindex",
    "cluster",
    "vacuum",
    "alter",
    "backfill",
    "update",
    "remove",
    "kill",
    "terminate",
    "restart",
    "reload",
    "shutdown",
    "execute",
    "run",
    "create",
    "add",
    "set",
    "change",
    "increase",
    "raise",
    "lower",
    "decrease",
    "reduce",
    "bump",
    "disable",
    "enable",
    "turn",
    "reset",
    "modify",
    "fix",
    "move",
    "clean",
    "write",
)
# Verbs that also start harmless requests: a write only with a change-ish object.
_NEEDS_OBJECT = {
    "run": r"(?:update|delete|insert|drop|truncate|alter|vacuum|reindex|cluster|create|grant|revoke)\b",
    "execute": r"(?:update|delete|insert|drop|truncate|alter|vacuum|reindex|cluster|create|grant|revoke|this|the following)\b",
    "create": r"(?:an? |the |new )?(?:unique )?(?:index|table|user|role|database|schema|extension|column|view|trigger|function|backup)",
    "add": r"(?:an? |the |new )?(?:index|column|constraint|user|role|trigger|partition|foreign key|primary key|row|record)",
    "write": r"(?:to|into) (?:the )?(?:table|database)",
    "clean": r"up\b",
    "turn": r"(?:off|on)\b",
}
_SQL_WRITE = re.compile(
    r"\b(?:delete\s+from|insert\s+into|update\s+\S+\s+set|truncate\s+(?:table\s+)?[a-z_\"]|"
    r"drop\s+(?:table|index|database|schema|view|role|user|extension|function|trigger|owned)\b|"
    r"alter\s+(?:table|system|database|role|user|index|schema|sequence)\s+\S+\s+\S+|"
    r"create\s+(?:unique\s+)?(?:table|index|database|role|user|schema|extension|function|trigger)\s+\S+|"
    r"grant\s+\S+.*\s+to\s|revoke\s+\S+.*\s+from\s|vacuum\s+(?:full\s+)?[a-z_\"]+\s*;|"
    r"pg_terminate_backend|pg_cancel_backend|pg_stat_reset|pg_reload_conf|lo_unlink|set_config)",
    re.IGNORECASE,
)
# A question about a write ("what does DROP INDEX CONCURRENTLY do?") is knowledge, not a request.
_ASKS_ABOUT = re.compile(
    r"^\s*(?:what|how|why|when|which|is|are|does|do|should|explain|describe|difference|can i|"
    r"could i|tell me)\b",
    re.IGNORECASE,
)
_COMPARES = re.compile(r"\b(?:vs\.?|versus|difference|compared?)\b", re.IGNORECASE)
# What may follow a command's name when a comparison lists it ("between VACUUM FULL and CLUSTER"):
# its modifiers, nothing that names an object to act on.
_BARE_COMMAND = re.compile(
    r"(?:(?:full|freeze|verbose|analy[sz]e|concurrently|only|cascade|restrict|table|index)\b\s*)*"
    r"[\W_]*",
    re.IGNORECASE,
)
# A question asking for a method: its answer is the manual's even when it names one of the tables.
_HOW_TO = re.compile(
    r"^\s*(?:how (?:do|can|should|would|could) (?:i|we|you)|how to|what(?:'s| is) the (?:best|right|safest) way)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[.;:!?\n]+|,\s*|\s+(?:and then|and|then|but)\s+", re.IGNORECASE)
# A question that asks to choose ("which is better?", "should I ... or ...?") compares what it lists.
_CHOOSES = re.compile(
    r"\b(?:which|better|best|worse|faster|slower|safer|cheaper|prefer\w*|rather than|instead of|pros and cons|trade-?offs?|"
    r"when (?:to|should i)|should i)\b",
    re.IGNORECASE,
)
_ALTERNATIVE = re.compile(r"\s*(?:or|vs\.?|versus)\s+(\w+)\b\s*(.*)", re.IGNORECASE)


# Words that make a write verb the first half of a noun ("vacuum health", "update frequency"): in a
# list after the first clause ("assess index health, vacuum health and configuration") such a pair
# names something to look at, not a command.
_COMPOUND_HEADS = re.compile(
    r"(?:health|status|state|settings?|configuration|config|activity|progress|frequency|"
    r"history|performance|behaviou?r|lag|times?|counts?|rates?|delays?|thresholds?|"
    r"workers?|costs?|age|debt|stats|statistics)\b"
)


def _commands_offered(verb: str, rest: str) -> bool:
    """Whether `verb rest` lists commands to choose between on no object ("vacuum full or cluster"):
    each alternative a command word with only its modifiers after it."""
    alternatives = 0
    while not _BARE_COMMAND.fullmatch(rest):
        head = _BARE_COMMAND.match(rest)
        offered = _ALTERNATIVE.fullmatch(rest[head.end() if head else 0 :])
        if offered is None or offered.group(1).lower() not in _ALWAYS:
            return False
        alternatives += 1
        rest = offered.group(2)
    return alternatives > 0


def write_request(question: str) -> str | None:
    """The words that make `question` a request to change the database (None when it asks for none).

    A question about commands is not a request to run one: a clause that compares ("VACUUM FULL vs
    CLUSTER") or, in a question asking to choose, offers commands on no object ("vacuum full or
    cluster, which is better?") names them; "vacuum orders or cluster it" still asks for a write."""
    text = " ".join(question.split())
    compares = bool(_COMPARES.search(text))
    chooses = bool(_CHOOSES.search(text))
    named: list[str] = []  # clauses that name commands rather than ask for them
    for position, clause in enumerate(_CLAUSE.split(text)):
        if _COMPARES.search(clause):
            named.append(clause)
            continue  # "VACUUM FULL vs VACUUM": the verb names a command being compared, not one asked for
        found = re.match(_POLITE + r"(\w+)\b\s*(.*)", clause.strip(), re.IGNORECASE)
        if not found:
            continue
        verb, rest = found.group(1).lower(), found.group(2).lower()
        if position > 0 and found.start(1) == 0 and _COMPOUND_HEADS.match(rest):
            continue  # a list item with nothing asking for it: a noun, not a command
        if compares and position > 0 and found.start(1) == 0 and _BARE_COMMAND.fullmatch(rest):
            continue  # "... between VACUUM FULL and CLUSTER?": the second command compared, on no object
        if chooses and _commands_offered(verb, rest):
            named.append(clause)
            continue  # "vacuum full or cluster, which is better?": commands offered for a choice
        if verb in _ALWAYS and (verb not in _NEEDS_OBJECT or re.match(_NEEDS_OBJECT[verb], rest)):
            return clause.strip()
    rid = re.search(r"\b(?:get rid of|do away with|clear out|empty out)\b", text, re.IGNORECASE)
    if rid:
        return rid.group(0)
    sql = _SQL_WRITE.search(text)
    if sql and not _ASKS_ABOUT.match(text) and not any(sql.group(0) in c for c in named):
        return sql.group(0)
    return None


# -- the classifiers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Labelled:
    text: str
    route: Route
    lookup: Lookup | None = None
    template: str = (
        ""  # the line of questions.yaml it came from: variants of one template stay in one fold
    )


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        table=rng.choice(TRAIN_TABLES),
        index=rng.choice(TRAIN_INDEXES),
        setting=rng.choice(TRAIN_SETTINGS),
    )


def masked(template: str) -> str:
    """A template with its slots as fixed words: the look-up classifier learns the question, not the name."""
    return template.format(**SLOT_WORDS)


def load_questions(path: Path = QUESTIONS) -> list[Labelled]:
    """The labelled questions; a template with slots twice with made-up names and once with its slot words."""
    raw = yaml.safe_load(path.read_text())
    rng = random.Random(7)
    out: list[Labelled] = []
    for route, entries in raw.items():
        grouped = entries.items() if route == Route.INSTANCE else [(None, entries)]
        for lookup, templates in grouped:
            for template in templates:
                texts = (
                    {fill(template, rng), fill(template, rng), masked(template)}
                    if "{" in template
                    else {template}
                )
                out.extend(
                    Labelled(text, Route(route), Lookup(lookup) if lookup else None, template)
                    for text in sorted(texts)
                )
    return out


def pipeline() -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline, make_union
    from sklearn.preprocessing import FunctionTransformer

    features = make_union(
        TfidfVectorizer(
            analyzer="word", ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"[A-Za-z_0-9]+"
        ),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True),
    )
    return make_pipeline(
        FunctionTransformer(annotate_all),
        features,
        LogisticRegression(C=20.0, max_iter=2000, class_weight="balanced"),
    )


class Router:
    """The route classifier and the look-up classifier of instance questions."""

    def __init__(self, path: Path = QUESTIONS):
        questions = load_questions(path)
        self.routes = pipeline().fit(
            [q.text for q in questions], [q.route.value for q in questions]
        )
        raw = yaml.safe_load(path.read_text())[Route.INSTANCE]
        pairs = [(masked(t), lookup) for lookup, templates in raw.items() for t in templates]
        self.lookups = pipeline().fit([p[0] for p in pairs], [p[1] for p in pairs])

    def route(self, question: str, masked_question: str | None = None) -> Route:
        """The classifier's route; a write request is UNSAFE whatever it says. `masked_question` is the
        question with the target's table and index names replaced by slot words: naming one of them
        makes a question about this database, unless it is a write request or asks for a whole review."""
        if write_request(question) is not None:
            return Route.UNSAFE
        probabilities = self.routes.predict_proba([masked_question or question])[0]
        ranked = sorted(zip(probabilities, self.routes.classes_), reverse=True)
        # Without a write verb or statement the classifier alone must be sure: its doubt about
        # "why isn't autovacuum cleaning X" must not refuse a question about the database.
        # A question ("why isn't autovacuum cleaning X?") asks about a change, it requests none.
        if ranked[0][1] == Route.UNSAFE and (
            ranked[0][0] < UNSAFE_CONFIDENCE
            or _ASKS_ABOUT.match(question)
            or _COMPARES.search(question)  # "CLUSTER versus VACUUM FULL - which one ...?"
        ):
            ranked = ranked[1:]
        names_object = masked_question is not None and any(
            w in masked_question for w in (SLOT_WORDS["table"], SLOT_WORDS["index"])
        )
        # A close call between this database and the manual, on a question that names nothing of the
        # target and points at no server ("the purpose of the pg_stat_statements extension"), is
        # knowledge: a look-up would answer another question than the one asked.
        if (
            ranked[0][1] == Route.INSTANCE
            and ranked[1][1] in (Route.PRODUCT, Route.GENERAL)
            and ranked[0][0] - ranked[1][0] < CLOSE_CALL
            and not (names_object or (masked_question is None and _OBJECT_NAME.search(question)))
            and "__here__" not in annotate(question)
        ):
            ranked = ranked[1:]
        route = Route(ranked[0][1])
        if _HOW_TO.match(question) and (
            route is Route.ANALYSIS or (route is Route.INSTANCE and not names_object)
        ):
            # "how can I find the slowest queries?", "what's the safest way to add an index to a
            # large table?": a method, not a run or a look-up (unless it names one of the tables)
            return Route.PRODUCT
        if names_object and route in (Route.GENERAL, Route.PRODUCT) and _HOW_TO.match(question):
            return (
                route  # "how do I index orders without blocking writes?": a method, from the manual
            )
        if names_object and route in (Route.GENERAL, Route.PRODUCT, Route.OFF_TOPIC):
            return Route.INSTANCE
        return route

    def lookups_ranked(self, masked_question: str) -> list[Lookup]:
        """The look-ups for an instance question whose names were replaced by SLOT_WORDS, likeliest first."""
        probabilities = self.lookups.predict_proba([masked_question])[0]
        return [
            Lookup(name)
            for _, name in sorted(zip(probabilities, self.lookups.classes_), reverse=True)
        ]


def asks_method(question: str) -> bool:
    """Whether the question asks how to do something ("how do I ...", "what's the best way to ...")."""
    return bool(_HOW_TO.match(question))


@lru_cache(maxsize=2)
def router(path: Path = QUESTIONS) -> Router:
    """The trained router: from the cache when this version of the questions was trained before."""
    digest = hashlib.sha256(f"{MODEL_VERSION}:".encode() + path.read_bytes()).hexdigest()[:16]
    return cached_build("router", digest, Router, lambda: Router(path))
