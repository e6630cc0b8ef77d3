"""The targets inventory: what a valid targets.yaml gives, and the one line each mistake gets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.errors import UsageError
from dbcrew.inventory import PasswordFromEnv, PasswordFromSecret, load_inventory
from tests.cli_here import dbcrew_here

GOOD = """
targets:
  - name: shop
    url: postgresql://monitor@db1.example.com:5432/shop
    password: {env: SHOP_PASSWORD}
    tags: [prod, eu]
    schedule: "0 2 * * *"
    window: 30
    thresholds: {long_running_query_seconds: 300}
    alerts: ["json://hooks.example.com/dbcrew"]
    watch: {every: 15}
  - name: billing
    url: postgresql://monitor@db2.example.com/billing
    password: {secret: billing-password}
    scenario: diagnose
  - name: reports
    url: postgresql://monitor@/reports?host=/var/run/postgresql
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    return path


def test_a_valid_inventory_gives_typed_entries(tmp_path: Path):
    inventory = load_inventory(write(tmp_path, GOOD))
    shop, billing, reports = inventory.targets
    assert inventory.names() == ["shop", "billing", "reports"]
    assert shop.password == PasswordFromEnv(env="SHOP_PASSWORD") and shop.window == 30.0
    assert (
        billing.password == PasswordFromSecret(secret="billing-password")
        and billing.scenario == "diagnose"
    )
    assert reports.password == "pgpass" and reports.schedule is None and reports.window == 10.0
    assert [t.name for t in inventory.select("eu")] == ["shop"] and len(inventory.select(None)) == 3
    with pytest.raises(UsageError, match=r"no target named 'nope'.*shop, billing, reports"):
        inventory.get("nope")


def test_watched_targets_group_by_their_interval(tmp_path: Path):
    text = GOOD.replace("  - name: reports\n", "  - name: reports\n    watch: {every: 15}\n")
    text = text.replace(
        "    scenario: diagnose\n",
        "    scenario: diagnose\n    watch: {every: 60, diagnose: false}\n",
    )
    groups = load_inventory(write(tmp_path, text)).watch_groups()
    assert {g: [e.name for e in entries] for g, entries in groups.items()} == {
        "every-15s": ["shop", "reports"],
        "every-60s": ["billing"],
    }
    assert groups["every-60s"][0].watch is not None and not groups["every-60s"][0].watch.diagnose


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("monitor@db1", "monitor:hunter2@db1"), "targets[0].url: the URL carries a password"),
        (
            ('"0 2 * * *"', '"0 25 * * *"'),
            "targets[0].schedule: '0 25 * * *' is not a cron expression",
        ),
        (
            ("long_running_query_seconds", "no_such_threshold"),
            "targets[0].thresholds: unknown threshold 'no_such_threshold'",
        ),
        (("scenario: diagnose", "scenario: tune"), "targets[1].scenario:"),
        (("{secret: billing-password}", "{vault: x}"), "targets[1].password"),
        (("name: billing", "name: shop"), "two targets are named 'shop'"),
        (("name: reports", "name: Reports!"), "targets[2].name:"),
        (("window: 30", "window: 0"), "targets[0].window:"),
        (("every: 15", "every: 0.5"), "targets[0].watch.every:"),
        (("every: 15", "evry: 15"), "targets[0].watch.evry:"),
        (("mysql", "mysql"), None),
    ],
)
def test_each_mistake_is_one_line_naming_the_field(
    tmp_path: Path, change: tuple[str, str], message: str | None
):
    text = GOOD.replace(*change)
    if message is None:  # a URL of another kind
        text = GOOD.replace(
            "postgresql://monitor@db2.example.com/billing", "mysql://root@db2/billing"
        )
        message = "targets[1].url: unsupported target"
    with pytest.raises(UsageError) as caught:
        load_inventory(write(tmp_path, text))
    text = str(caught.value)
    assert message in text and "\n" not in text and "hunter2" not in text, text


def test_the_cli_checks_an_inventory_with_exit_2_and_no_traceback(tmp_path: Path):
    bad = write(tmp_path, GOOD.replace("monitor@db1", "monitor:hunter2@db1"))
    result = subprocess.run(
        [sys.executable, "-m", "dbcrew.cli", "inventory", "check", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "password" in lines[0], result.stderr
    assert "hunter2" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    # The first as a user runs it (a process), the others through the same entry point in this process
    # (tests/cli_here.py: no interpreter each).
    result = dbcrew_here("inventory", "check", str(write(tmp_path, GOOD)))
    assert result.returncode == 0 and "password: env SHOP_PASSWORD" in result.stdout, result.stderr
    missing = dbcrew_here("server", "--inventory", str(tmp_path / "none.yaml"))
    assert (
        missing.returncode == 2
        and "cannot read the inventory" in missing.stderr
        and "Traceback" not in missing.stderr
    )
