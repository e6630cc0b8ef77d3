"""`dbcrew inventory check --connect` on a real server: each target's address and credential, one line each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dbcrew.lab.embedded import EmbeddedPostgres, _free_port


def test_check_connect_tests_every_target_and_fails_with_exit_2_without_printing_a_password(
    pg: EmbeddedPostgres, tmp_path: Path
):
    """One reachable target, a closed port, an unknown role and a password variable that is not set."""
    good = pg.dsn("postgres")
    inventory = tmp_path / "targets.yaml"
    inventory.write_text(f"""
targets:
  - name: good
    url: {good}
    password: {{env: GOOD_PASSWORD}}
  - name: closed
    url: {good.replace(f":{pg.port}/", f":{_free_port()}/")}
  - name: stranger
    url: {good.replace("postgres@", "nobody_here@")}
  - name: unset
    url: {good}
    password: {{env: UNSET_PASSWORD}}
""")
    env = {**os.environ, "GOOD_PASSWORD": "s3cret-never-shown"}
    env.pop("UNSET_PASSWORD", None)
    result = subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", "inventory", "check", "--connect", str(inventory)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = {ln.split()[0]: ln for ln in result.stdout.splitlines() if ln.strip()}
    assert result.returncode == 2, result.stdout + result.stderr
    assert sorted(lines) == ["closed", "good", "stranger", "unset"], result.stdout
    assert " ok " in lines["good"] and "PostgreSQL 18" in lines["good"], lines["good"]
    assert "as postgres" in lines["good"]
    assert " failed " in lines["closed"] and "cannot connect" in lines["closed"]
    assert " failed " in lines["stranger"] and "nobody_here" in lines["stranger"]
    assert " failed " in lines["unset"] and "UNSET_PASSWORD" in lines["unset"]
    assert result.stderr.strip().splitlines() == [
        "dbcrew: error: 3 of 4 targets failed the connection check: closed, stranger, unset"
    ]
    assert "s3cret-never-shown" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
