"""Which questions are over the whole catalogue, which way they ask, and the thresholds they give."""

from __future__ import annotations

import pytest

from dbcrew.roles.ask.catalogue_wide import recognized, threshold


@pytest.mark.parametrize(
    ("question", "prop", "negated"),
    [
        ("which tables have no primary key?", "primary_key", True),
        ("list the tables with a primary key", "primary_key", False),
        ("do any foreign keys lack an index?", "unindexed_foreign_keys", False),
        ("which tables have an invalid index", "invalid_indexes", False),
        ("are there tables without any index", "has_index", True),
        ("which tables have autovacuum turned off", "autovacuum_on", True),
        ("show tables with per-table autovacuum overrides", "autovacuum_overrides", False),
        ("have all tables been analyzed? if not, which were not?", "analyzed", True),
        ("any tables bigger than 2 GB?", "size", False),
    ],
)
def test_the_property_and_its_direction_are_read_from_the_question(
    question: str, prop: str, negated: bool
):
    wide = recognized(question, names_an_object=False)
    assert wide is not None and (wide.property.name, wide.negated) == (prop, negated)


@pytest.mark.parametrize(
    "question",
    [
        "which three tables are the heaviest?",  # a ranking: largest_tables, not a property
        "how close is this database to transaction id wraparound",
        "which tables have the oldest relfrozenxid",
    ],
)
def test_questions_without_a_property_are_not_catalogue_wide(question: str):
    assert recognized(question, names_an_object=False) is None


def test_a_question_naming_a_table_is_not_catalogue_wide():
    assert recognized("which indexes on orders are invalid?", names_an_object=True) is None


def test_thresholds_carry_their_unit_and_direction():
    five = threshold("which tables are larger than 5 MB?")
    assert five is not None and (five.above, five.value, five.unit) == (True, 5 * 1024**2, "bytes")
    rows = threshold("tables holding more than 50,000 rows?")
    assert rows is not None and (rows.value, rows.unit, rows.phrase()) == (
        50000,
        "rows",
        "more than 50,000 rows",
    )
    small = threshold("tables under 100 kB")
    assert small is not None and (small.above, small.value) == (False, 100 * 1024)
    assert threshold("top 5 tables") is None
