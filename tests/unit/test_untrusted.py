"""Untrusted text made plain: what a reader sees is what a program matches on."""

from __future__ import annotations

from dbcrew.text.untrusted import CUT_MARK, model_text, visible

FULL_WIDTH_DROP_TABLE = "\uff44\uff52\uff4f\uff50 \uff54\uff41\uff42\uff4c\uff45"
FULL_WIDTH_SHOP2 = "\uff53\uff48\uff4f\uff50\uff12"


def test_visible_removes_what_cannot_be_seen_and_folds_lookalikes() -> None:
    assert visible("d\u200brop\u2060 \u202etable\ufeff cust\u00adomers") == "drop table customers"
    assert visible(FULL_WIDTH_DROP_TABLE) == "drop table"  # full-width letters, by NFKC
    assert visible("a\tb\r\n\u2028c\x1b[31m d") == "a b c[31m d"  # ESC gone, line breaks a space
    assert visible(f"{FULL_WIDTH_SHOP2} et caf\u00e9") == "shop2 et caf\u00e9"  # accents kept


def test_model_text_is_bounded_and_says_it_was_cut() -> None:
    assert model_text("short") == "short"
    cut = model_text("word " * 100, limit=40)
    assert len(cut) <= 40 and cut.endswith(CUT_MARK)
