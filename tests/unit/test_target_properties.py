"""Properties of target URL parsing: whatever a user types, the password stays private and errors are one line.

The URLs are built from their parts (user, password, host, port, database) the way a user or a
tool writes them, percent-encoded, so each property can compare the parsed target to the parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from dbcrew.errors import TargetError, UsageError
from dbcrew.targets import parse_target
from dbcrew.targets.postgres import _decode_password, redact_url, split_password

# libpq holds conninfo values as C strings: a NUL can never be part of a name.
names = st.text(st.characters(exclude_characters="\x00", codec="utf-8"), min_size=1, max_size=12)
hostnames = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){0,2}\Z")
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
# libpq splits a host on commas (its failover list) even when they are percent-encoded.
socket_dirs = st.lists(
    names.filter(lambda n: "/" not in n and "," not in n), min_size=1, max_size=3
).map(lambda parts: "/" + "/".join(parts))


@dataclass(frozen=True)
class Parts:
    """A target as its parts; `url()` writes it as a user would."""

    user: str
    password: str | None
    host: str
    port: int | None
    dbname: str
    socket_in_authority: bool = False  # `postgresql://u@%2Fdir/db` instead of `?host=/dir`

    @property
    def is_socket(self) -> bool:
        return self.host.startswith("/")

    def url(self, *, with_password: bool = True) -> str:
        creds = quote(self.user, safe="")
        if self.password is not None and with_password:
            creds += ":" + quote(self.password, safe="")
        db = quote(self.dbname, safe="")
        if self.is_socket and not self.socket_in_authority:
            port = f"&port={self.port}" if self.port else ""
            return f"postgresql://{creds}@/{db}?host={quote(self.host, safe='/')}{port}"
        host = (
            f"[{self.host}]"
            if ":" in self.host and not self.is_socket
            else quote(self.host, safe="")
        )
        return f"postgresql://{creds}@{host}{f':{self.port}' if self.port else ''}/{db}"


targets = st.builds(
    Parts,
    user=names,
    password=st.none() | names,
    host=hostnames | ipv4 | ipv6 | socket_dirs,
    port=st.none() | st.integers(1, 65535),
    dbname=names,
    socket_in_authority=st.booleans(),
)


def identity(dsn: str) -> dict[str, str]:
    """What decides which database a connection reaches."""
    params = conninfo_to_dict(dsn)
    return {k: str(params[k]) for k in ("user", "host", "port", "dbname") if k in params}


@given(targets)
@example(Parts("postgres", None, "/var/run/postgresql", None, "shop"))
@example(Parts("admin", "p@ss:w/rd%&x=y", "::1", 5433, "shop"))
def test_the_parsed_target_reaches_the_database_the_url_names(parts: Parts):
    target = parse_target(parts.url())
    expected = {"user": parts.user, "host": parts.host, "dbname": parts.dbname}
    if parts.port:
        expected["port"] = str(parts.port)
    assert identity(target.dsn) == expected


@given(targets)
def test_the_password_changes_nothing_shareable(parts: Parts):
    """dsn and display are the same with or without the password: it cannot be in either."""
    with_password, without = parse_target(parts.url()), parse_target(parts.url(with_password=False))
    assert (with_password.dsn, with_password.display) == (without.dsn, without.display)
    assert "password" not in conninfo_to_dict(with_password.dsn)
    assert redact_url(parts.url()) == parts.url(with_password=False)


@given(targets.filter(lambda p: p.password is not None))
def test_the_password_is_split_off_and_decoded_as_written(parts: Parts):
    public, secret = split_password(parts.url())
    assert public == parts.url(with_password=False) and secret is not None
    assert _decode_password(secret) == parts.password


@given(targets, st.from_regex(r"\A[A-Z0-9]{12,20}\Z"))
def test_a_distinctive_password_appears_nowhere(parts: Parts, secret: str):
    url = Parts(
        parts.user, secret, parts.host, parts.port, parts.dbname, parts.socket_in_authority
    ).url()
    assume(secret not in url.replace(secret, "", 1))
    target = parse_target(url)
    assert secret not in target.dsn + target.display + repr(target) + redact_url(url)


@given(targets)
def test_the_display_parses_back_to_the_same_target(parts: Parts):
    target = parse_target(parts.url())
    again = parse_target(target.display)
    assert identity(again.dsn) == identity(target.dsn) and again.display == target.display


@given(targets.filter(lambda p: p.is_socket))
def test_a_socket_target_displays_its_directory_in_the_query(parts: Parts):
    display = parse_target(parts.url()).display
    port = f"&port={parts.port}" if parts.port else ""
    assert (
        display
        == f"postgresql://{quote(parts.user, safe='')}@/{quote(parts.dbname, safe='')}?host={quote(parts.host, safe='/')}{port}"
    )
    assert "[" not in display and "]" not in display  # nothing a console could read as markup


def one_line_target_error_or_target(url: str) -> None:
    try:
        parse_target(url)
    except TargetError as exc:
        assert isinstance(exc, UsageError)
        message = str(exc)
        assert message and "\n" not in message and "\r" not in message


@given(st.text())
@example("postgresql://u:sec\x00ret@h/db")
@example("postgresql://u@h1:1,h2:2/db")
@example("postgresql://[::1")
@example("postgresql://u@h/%99")
def test_any_text_is_a_target_or_one_line_of_error(text: str):
    one_line_target_error_or_target(text)
    one_line_target_error_or_target("postgresql://" + text)


url_pieces = st.sampled_from(
    [
        "%",
        "%zz",
        "%00",
        "@",
        ":",
        "/",
        "?",
        "&",
        "=",
        "[",
        "]",
        ",",
        "#",
        "x",
        "\n",
        "\x00",
        "host",
        "port",
        "password",
        "sslmode",
        "99999",
        "-1",
        "::1",
    ]
)


@given(
    st.lists(url_pieces, max_size=12).map("".join), st.lists(url_pieces, max_size=12).map("".join)
)
@example("%zz", "")
@example("", "port")
@settings(max_examples=300)
def test_a_malformed_url_never_quotes_its_password(before: str, after: str):
    secret = "Zq7Kp2Wm9Xv4"
    url = f"postgresql://u:{before}{secret}@h{after}"
    try:
        target = parse_target(url)
    except TargetError as exc:
        assert secret not in str(exc) and "\n" not in str(exc)
    else:
        assert secret not in target.dsn + target.display


def test_what_the_properties_found():
    """Each of these once crashed the CLI, leaked the password or displayed a different database."""
    cases = {
        "postgresql://u:se%zzcret@h/db": "password is not valid percent-encoded",  # libpq quoted the token
        "postgresql://u:sec\x00ret@h/db": "NUL",  # libpq stopped at the NUL: the password's start became the port
        "postgresql://u@h:port/db": "the port is not a number",
        "postgresql://u:sec/ret@h/db": "unencoded @",  # libpq read host u, port sec, database ret@h/db
        "postgresql://u:sec@ret@h/db": "unencoded @",  # libpq read password sec, host ret@h
        "postgresql://u@h1:1,h2:2/db": "one server at a time",
        "postgresql://u:secret@h/%99": "not UTF-8",  # psycopg's UnicodeDecodeError reached the CLI as an internal error
    }
    for url, message in cases.items():
        try:
            parse_target(url)
        except TargetError as exc:
            assert message in str(exc) and "sec" not in str(exc)
        else:
            raise AssertionError(f"{url!r} parsed")
    assert (
        parse_target("postgresql://u@/db").display == "postgresql://u@/db"
    )  # libpq's default socket, not localhost
    assert parse_target("postgresql://u@a%20b/db").display == "postgresql://u@a%20b/db"
    assert (
        parse_target("postgresql://u@[fe80::1%25eth0]:5/db").display
        == "postgresql://u@[fe80::1%25eth0]:5/db"
    )
    assert re.fullmatch(
        r"postgresql://u@/db\?host=/tmp/x", parse_target("postgresql://u@%2Ftmp%2Fx/db").display
    )
