"""A pass's session time (dbcrew/operators/window/session_time.py): bounded to its heaviest slices plus an "other" remainder
by wait, summed when passes merge (a bucket, a bucket of buckets, a diagnosis window), and read back as the window's
time slices, so a past interval's attribution is the live one's."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from dbcrew.operators.diagnose.attribution import attribute, kinds_share
from dbcrew.operators.window.evidence import WindowEvidence
from dbcrew.operators.window.passes import PassBody, TargetFacts, as_stored, merge, window_of_parts
from dbcrew.operators.window.session_time import (
    OTHER,
    TOP_SLICES,
    SessionTime,
    SliceKey,
    bounded,
    session_time_of,
)

UPDATE = ("IO:WalSync", "upd", "update", "public.accounts")
UPDATE_CPU = ("CPU", "upd", "update", "public.accounts")


def tail(n: int, wait: str = "CPU") -> Counter[SliceKey]:
    """`n` statements sampled once each: a long tail."""
    return Counter({(wait, f"s{i:03}", "select", f"public.t{i:03}"): 1 for i in range(n)})


def test_the_heaviest_slices_are_kept_and_the_rest_summed_by_wait_under_other() -> None:
    counts = (
        Counter({UPDATE: 50, UPDATE_CPU: 40})
        + tail(TOP_SLICES + 10, "CPU")
        + tail(5, "IO:DataFileRead")
    )
    rows = bounded(counts)
    assert rows[0] == (*UPDATE, 50) and rows[1] == (*UPDATE_CPU, 40)
    assert sum(r[4] for r in rows) == sum(counts.values()), (
        "no sample is lost: the remainder keeps it"
    )
    other = {r[0]: r[4] for r in rows if r[1] == OTHER}
    # 2 heavy slices + 28 of the 45 one-sample slices kept; the other 17 summed by their wait.
    assert len(rows) - len(other) == TOP_SLICES
    assert sum(other.values()) == len(counts) - TOP_SLICES
    by_wait = Counter[str]()
    for r in rows:
        by_wait[r[0]] += r[4]
    assert by_wait == Counter(
        {"CPU": 40 + TOP_SLICES + 10, "IO:WalSync": 50, "IO:DataFileRead": 5}
    ), "the wait events stay exact"


def test_a_tally_becomes_a_pass_body_with_its_texts_by_digest_and_none_without_samples() -> None:
    names: dict[str, str] = {}

    def named(text: str) -> str:
        names[f"d-{text}"] = text
        return f"d-{text}"

    got = session_time_of({UPDATE: 3}, {"upd": "UPDATE accounts SET b = b + 1 WHERE id = 1"}, named)
    assert got is not None and got.texts == {"upd": "d-UPDATE accounts SET b = b + 1 WHERE id = 1"}
    assert session_time_of({}, {}, named) is None
    body = PassBody(session_time=got)
    again = PassBody.model_validate_json(as_stored(body))
    assert again.session_time == got, "stored and read back the same"


def test_stored_compact_each_statement_once_and_its_own_relation_left_out() -> None:
    lock = ("Lock:transactionid", "upd", "update", "public.other")
    st = SessionTime.of(bounded(Counter({UPDATE: 5, UPDATE_CPU: 4, lock: 1})), {"upd": "dupd"})
    assert st.statements == [("upd", "update", "public.accounts", "dupd")]
    assert sorted(st.slices) == [
        ("CPU", 0, None, 4),
        ("IO:WalSync", 0, None, 5),
        ("Lock:transactionid", 0, "public.other", 1),
    ]
    assert st.counts() == Counter({UPDATE: 5, UPDATE_CPU: 4, lock: 1}) and st.texts == {
        "upd": "dupd"
    }


def pass_with(counts: Counter[SliceKey]) -> PassBody:
    rows = bounded(counts)
    return PassBody(
        session_time=SessionTime.of(rows, {r[1]: f"d{r[1]}" for r in rows if r[1] != OTHER})
    )


def test_merging_sums_samples_and_a_merge_of_merges_is_one_merge_when_nothing_fell_into_the_remainder() -> (
    None
):
    passes = [pass_with(Counter({UPDATE: i + 1, UPDATE_CPU: 2 * i})) for i in range(12)]
    minutes = [merge([(15.0, p) for p in passes[i : i + 4]]) for i in range(0, 12, 4)]
    hour = merge([(60.0, m) for m in minutes])
    flat = merge([(15.0, p) for p in passes])
    assert hour.session_time == flat.session_time
    assert hour.session_time is not None and hour.session_time.counts() == Counter(
        {UPDATE: sum(range(1, 13)), UPDATE_CPU: 2 * sum(range(12))}
    ), "counts add up (not weighted by seconds: a sample is a sample)"
    assert hour.session_time.texts == {"upd": "dupd"}


def test_downsampling_a_long_tail_keeps_the_total_and_the_heavy_statement() -> None:
    # Each pass has its own long tail of one-off statements beside the steady update.
    passes = [pass_with(Counter({UPDATE: 10}) + tail(TOP_SLICES + 5, f"W{p}")) for p in range(8)]
    minute = merge([(15.0, p) for p in passes])
    assert minute.session_time is not None
    rows = minute.session_time.rows()
    assert len(rows) <= TOP_SLICES + 8, "bounded again: the top slices and one remainder per wait"
    assert minute.session_time.samples == sum(
        p.session_time.samples for p in passes if p.session_time
    )
    assert rows[0] == (*UPDATE, 80)
    assert set(minute.session_time.texts) == {r[1] for r in rows if r[1] != OTHER}


def test_a_window_of_stored_passes_attributes_its_time_as_a_live_window_does() -> None:
    counts = Counter({UPDATE: 30, UPDATE_CPU: 20, ("CPU", "sel", "select", "public.accounts"): 10})
    texts = {
        "dupd": "UPDATE accounts SET b = b + 1 WHERE id = $1",
        "dsel": "SELECT * FROM accounts",
    }
    parts = [(15.0, pass_with(counts)) for _ in range(4)]
    window = window_of_parts(parts, texts, TargetFacts(), datetime.now(UTC))
    live = WindowEvidence(
        started_at=0,
        seconds=60,
        interval=15,
        time_slices=window.time_slices,
        statement_texts={"upd": texts["dupd"], "sel": texts["dsel"]},
    )
    assert window.statement_texts == live.statement_texts
    attribution = attribute(window)
    assert attribution is not None and attribution.samples == 240
    assert (
        attribution.by_statement[0].label == texts["dupd"]
        and attribution.by_statement[0].share == 0.833
    )
    assert kinds_share(window, "update") == kinds_share(live, "update") == 200 / 240, (
        "the update's own flushes are its time"
    )
    assert (
        attribute(window_of_parts([(15.0, PassBody())], {}, TargetFacts(), datetime.now(UTC)))
        is None
    )
