"""`python -m bench ask`: the ask path measured on held-out questions (bench/ask_questions.yaml).

Routing accuracy and macro-F1 (the router trains only on dbcrew/data/questions.yaml), retrieval
recall@3 against the labelled manual sections, DQA's tool selection accuracy (TSA: the gold
look-up chosen) and tool format accuracy (TFA: the parameters validate against the look-up's
model), slot accuracy, instance answers checked against values SQL computes on the planted shop,
refusals of unsafe requests (some hidden by invisible or bidi characters), whether an answer says
that its question named another database than the target, and the latency of an offline answer once the index is built.

Before any of that, `leakage` checks that the test set is held out in fact, not only in name: the
TF-IDF cosine of every test question to its nearest training question (both with their table,
index and setting names replaced by slot words) must stay below LEAKAGE_LIMIT, or the run fails.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
import pydantic
import yaml
from sklearn.metrics import accuracy_score, f1_score

from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.shop import DemoShop
from dbcrew.operators.docs import DEBIAN_MANUAL, docs_index
from dbcrew.operators.lookups import CatalogueNames, catalogue_names
from dbcrew.operators.registry import get
from dbcrew.roles.ask.answer import ask
from dbcrew.roles.ask.instance import MissingSlot, fill_slots, invocation
from dbcrew.roles.ask.routing import (
    QUESTIONS as TRAINING,
)
from dbcrew.roles.ask.routing import (
    SLOT_WORDS,
    load_questions,
    masked,
    pipeline,
    router,
)
from dbcrew.targets import PostgresTarget, parse_target
from dbcrew.vocabulary import Lookup, Route

QUESTIONS = Path(__file__).with_name("ask_questions.yaml")
LEAKAGE_LIMIT = 0.8


class Leakage(SystemExit):
    """A test question is a near-copy of a training question: the numbers would not measure generalization."""


def _text(item: str | dict) -> str:
    return item if isinstance(item, str) else item["q"]


def _section_hit(found: str, gold: list[str]) -> bool:
    return any(found == g or ("#" not in g and found.partition("#")[0] == g) for g in gold)


def _test_masked(item: str | dict) -> str:
    """A test question with the names its gold parameters hold replaced by the training templates' slot words."""
    text = _text(item)
    params = item.get("params", {}) if isinstance(item, dict) else {}
    for key, slot in (("table", "table"), ("index", "index"), ("name", "setting")):
        if key in params:
            text = re.sub(rf"\b{re.escape(params[key])}\b", SLOT_WORDS[slot], text)
    return text


def leakage(data: dict) -> float:
    """The largest cosine of a test question to the training set; raises Leakage above LEAKAGE_LIMIT."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    raw = yaml.safe_load(TRAINING.read_text())
    train = sorted(
        {q.text for q in load_questions()}
        | {masked(t) for templates in raw[Route.INSTANCE].values() for t in templates}
    )
    test = [_test_masked(item) for items in data.values() for item in items]
    vectors = TfidfVectorizer(sublinear_tf=True).fit(train + test)
    similarity = cosine_similarity(vectors.transform(test), vectors.transform(train))
    nearest = similarity.argmax(axis=1)
    worst = sorted(
        ((similarity[i, j], test[i], train[j]) for i, j in enumerate(nearest)), reverse=True
    )
    for score, question, closest in worst[:5]:
        print(f"  nearest {score:.2f}: {question!r} ~ {closest!r}")
    print(
        f"test-to-training TF-IDF cosine: max {worst[0][0]:.2f}, mean {statistics.mean(s for s, _, _ in worst):.2f} "
        f"(limit {LEAKAGE_LIMIT})"
    )
    over = [w for w in worst if w[0] > LEAKAGE_LIMIT]
    if over:
        raise Leakage(
            f"{len(over)} test questions are near-copies of training questions, e.g. {over[0][1]!r} ~ {over[0][2]!r}"
        )
    return worst[0][0]


def cross_validation() -> None:
    """Grouped 5-fold cross-validation on the training questions alone: how features and model were chosen."""
    from sklearn.model_selection import GroupKFold, cross_val_predict

    questions = load_questions()
    texts, groups = [q.text for q in questions], [q.template for q in questions]
    routes = cross_val_predict(
        pipeline(), texts, [q.route.value for q in questions], groups=groups, cv=GroupKFold(5)
    )
    print(
        f"training-set grouped 5-fold CV: route macro-F1 "
        f"{f1_score([q.route.value for q in questions], routes, average='macro'):.3f}",
        end="",
    )
    lookups = [q for q in questions if q.lookup is not None and q.text == masked(q.template)]
    predicted = cross_val_predict(
        pipeline(),
        [q.text for q in lookups],
        [q.lookup.value for q in lookups],
        groups=[q.template for q in lookups],
        cv=GroupKFold(5),
    )
    print(
        f", look-up macro-F1 {f1_score([q.lookup.value for q in lookups], predicted, average='macro'):.3f}"
    )


def routing(data: dict, names: CatalogueNames | None) -> None:
    """Routes as `ask` takes them: with the shop's names masked when a target is given (names), else the bare text."""
    r = router()
    gold, predicted = [], []
    for route, items in data.items():
        for item in items:
            gold.append(route)
            question = _text(item)
            predicted.append(
                r.route(
                    question, fill_slots(question, names).objects_masked if names else None
                ).value
            )
    misses = [(g, p) for g, p in zip(gold, predicted) if g != p]
    for (g, p), q in zip(
        zip(gold, predicted), [_text(i) for items in data.values() for i in items]
    ):
        if g != p:
            print(f"  misrouted {g} -> {p}: {q!r}")
    print(
        f"routing {'with the shop as target' if names else 'without a target'}: {len(gold)} test questions, "
        f"accuracy {accuracy_score(gold, predicted):.3f}, "
        f"macro-F1 {f1_score(gold, predicted, average='macro'):.3f}, misrouted {len(misses)}"
    )
    for route in Route:
        print(
            f"  {route.value:10s} F1 {f1_score(gold, predicted, labels=[route.value], average='macro'):.3f}"
        )


def refusals(data: dict) -> None:
    unsafe = data[Route.UNSAFE]
    refused = sum(a.refused and a.route is Route.UNSAFE for a in (ask(q) for q in unsafe))
    print(f"unsafe requests refused: {refused}/{len(unsafe)}")


def retrieval(data: dict) -> None:
    index = docs_index(DEBIAN_MANUAL)
    hits = 0
    for item in data[Route.PRODUCT]:
        found = [h.passage.section for h in index.search(item["q"], 3)]
        hit = any(_section_hit(f, item["sections"]) for f in found)
        hits += hit
        if not hit:
            print(f"  miss: {item['q']!r} -> {found}")
    print(
        f"retrieval recall@3: {hits}/{len(data[Route.PRODUCT])} = {hits / len(data[Route.PRODUCT]):.3f}"
    )


def latency(data: dict) -> None:
    questions = [_text(i) for route in (Route.PRODUCT, Route.GENERAL) for i in data[route]]
    ask(questions[0])  # the index and router load once per process
    times = []
    for q in questions:
        start = time.perf_counter()
        ask(q)
        times.append(time.perf_counter() - start)
    print(
        f"offline knowledge answer latency over {len(times)} questions: mean {statistics.mean(times) * 1000:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms"
    )


def instance(data: dict, elsewhere: list[dict], wide: list[dict]) -> None:
    """Everything that needs the planted shop: routing with a target, TSA/TFA, answers checked by SQL,
    questions naming another database than the target (`elsewhere`), whose answers must say so, and
    questions over the whole catalogue (`wide`), answered from every table."""
    items = data[Route.INSTANCE]
    with tempfile.TemporaryDirectory(prefix="bench-ask-") as work:
        pg = EmbeddedPostgres(Path(work) / "data").start()
        shop = None
        try:
            pg.psql("CREATE DATABASE shop;")
            shop = DemoShop(pg.dsn("shop")).build()
            target = parse_target(pg.dsn("shop"))
            selected = formatted = slotted = correct = 0
            times = []
            with psycopg.connect(pg.dsn("shop"), autocommit=True) as conn:
                with target.session() as session:
                    names = catalogue_names(session)
                routing(data, names)
                for item in items:
                    try:
                        call = invocation(item["q"], names, router())
                    except MissingSlot as exc:
                        print(f"  no slot: {item['q']!r}: {exc}")
                        continue
                    selected += call.lookup == Lookup(item["tool"])
                    try:
                        get(call.lookup).params_model.model_validate(call.params)
                        formatted += 1
                    except pydantic.ValidationError:
                        pass
                    slotted += call.params == item["params"]
                    start = time.perf_counter()
                    answer = ask(item["q"], target)
                    times.append(time.perf_counter() - start)
                    row = conn.execute(item["check"]).fetchone()
                    expected = [word for value in row for word in str(value).split()]
                    ok = all(word in answer.answer for word in expected)
                    correct += ok
                    if not ok or call.lookup != Lookup(item["tool"]):
                        print(
                            f"  wrong: {item['q']!r} -> {call.lookup.value} {call.params}: {answer.answer[:160]!r}"
                        )
            n = len(items)
            print(
                f"instance questions: {n}; TSA {selected / n:.3f}, TFA {formatted / n:.3f}, slot accuracy {slotted / n:.3f}, "
                f"answers correct {correct}/{n} = {correct / n:.3f}"
            )
            print(
                f"offline instance answer latency: mean {statistics.mean(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
            )
            noted = 0
            for item in elsewhere:
                answer = ask(item["q"], target)
                said = item["names"] in (answer.reason or "") and item["names"] in answer.answer
                noted += said
                if not said:
                    print(f"  not noted: {item['q']!r}: {answer.answer[:160]!r}")
            print(
                f"questions naming another database: {len(elsewhere)}; noted {noted}/{len(elsewhere)} = "
                f"{noted / len(elsewhere):.3f}"
            )
            with psycopg.connect(pg.dsn("shop"), autocommit=True) as conn:
                catalogue_wide(wide, target, conn)
        finally:
            if shop is not None:
                shop.close()
            pg.stop()


def catalogue_wide(items: list[dict], target: PostgresTarget, conn: psycopg.Connection) -> None:
    """Questions over every table: routed to the instance, and naming exactly the shop's tables `check`
    lists (run after the answer, on the same shop), or saying that none has the property."""
    tables = {r[0] for r in conn.execute("SELECT relname FROM pg_stat_user_tables")}
    routed = correct = 0
    times = []
    for item in items:
        start = time.perf_counter()
        answer = ask(item["q"], target)
        times.append(time.perf_counter() - start)
        routed += answer.route is Route.INSTANCE
        (listed,) = conn.execute(item["check"]).fetchone()
        expected = set((listed or "").split())
        named = {t for t in tables if re.search(rf"(?<![\w]){re.escape(t)}(?!\w)", answer.answer)}
        says_none = bool(re.search(r"\bno(?:ne)?\b", answer.answer, re.IGNORECASE))
        ok = answer.route is Route.INSTANCE and named == expected and (bool(expected) or says_none)
        correct += ok
        if not ok:
            ran = ", ".join(t.operator for t in answer.tools) or "no look-up"
            print(f"  wrong: {item['q']!r} [{answer.route.value}; {ran}]: {answer.answer[:160]!r}")
    n = len(items)
    print(
        f"catalogue-wide questions: {n}; routed to the instance {routed}/{n}, answers correct {correct}/{n} = "
        f"{correct / n:.3f}; latency mean {statistics.mean(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )


def main() -> None:
    raw_test = yaml.safe_load(QUESTIONS.read_text())
    elsewhere = raw_test.pop("other_database")
    wide = raw_test.pop("catalogue")
    data = {Route(k): v for k, v in raw_test.items()}
    raw = yaml.safe_load(TRAINING.read_text())
    trained = sum(len(v) for k, v in raw.items() if k != Route.INSTANCE) + sum(
        len(v) for v in raw[Route.INSTANCE].values()
    )
    print(
        f"questions: {trained} for training (dbcrew/data/questions.yaml), {sum(len(v) for v in data.values())} held out for test"
    )
    leakage({**data, "catalogue": wide})
    cross_validation()
    routing(data, None)
    refusals(data)
    retrieval(data)
    latency(data)
    instance(data, elsewhere, wide)
