"""redact masks every password its patterns find, and a text none of them could match passes as it is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dbcrew.redact import _PATTERNS, MASK, redact

# Pieces of the texts the patterns look for, in other cases and in a Unicode case variant (LONG S, U+017F,
# matches s under the patterns' ignore-case), mixed with ordinary text.
PIECES = st.sampled_from(
    [
        "password",
        "PASSWORD",
        "PaSsWoRd",
        "pa\u017f\u017fword",
        "pass word",
        "=",
        " ",
        "'",
        "''",
        "$$",
        "$x$",
        "E'",
        "?",
        "&",
        "://",
        "postgresql",
        "user",
        ":",
        "@",
        "host",
        "/",
        "x",
        "secret",
        "\\'",
        "\n",
    ]
)


def substituted(text: str) -> str:
    """What the patterns alone make of `text` (redact without its search for what they need)."""
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


@given(st.lists(PIECES | st.text(max_size=3), max_size=12).map("".join))
def test_redact_is_the_patterns_substitutions(text: str) -> None:
    assert redact(text) == substituted(text)


def test_passwords_are_masked_and_other_text_is_kept() -> None:
    assert redact("ALTER ROLE app PASSWORD 'hunter2'") == f"ALTER ROLE app PASSWORD {MASK}"
    assert redact("host=db password=hunter2 user=app") == f"host=db password={MASK} user=app"
    assert "hunter2" not in redact("postgresql://app:hunter2@db/shop")
    assert redact("public.items_pkey") == "public.items_pkey"
