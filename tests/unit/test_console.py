"""The CLI's console prints a target's text as data: no markup read, no control sequence left to the terminal."""

from __future__ import annotations

from dbcrew.cli import console

# A table name as a hostile or broken schema can hold: clear the screen, retitle the window, a bidi override.
NAME = 'public."x\x1b[2J\x1b]0;owned\x07\u202eroot"'


def test_a_names_escape_sequences_are_printed_as_escapes_not_sent_to_the_terminal() -> None:
    with console.out.capture() as shown:
        console.show(console.line("  warning ", ("index_missing", "yellow"), f" {NAME} [bold]x"))
    printed = shown.get()
    assert not any(ch in printed for ch in "\x1b\x07\u202e"), repr(printed)
    assert 'public."x\\x1b[2J\\x1b]0;owned\\x07\\u202eroot" [bold]x' in printed, repr(printed)
    with console.err.capture() as told:
        console.fail(f"dbcrew: error: {NAME}\n\tsecond line")
    assert "\x1b" not in told.get() and "\\x1b[2J" in told.get()
    assert told.get().split("\n")[1].strip() == "second line", "a newline is layout, kept"
