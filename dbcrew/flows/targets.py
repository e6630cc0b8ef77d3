"""review_target: review one database of the published inventory, by name.

This is what the on-demand form, each target's schedule and the fleet start. The inventory is
published to the Prefect server (a block of its own type), not read from a worker's disk, so any worker of
the pool on any machine reviews any target; the password is fetched on the reviewing machine
from the source the entry names and never becomes a parameter.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.blocks.core import Block
from prefect.blocks.system import Secret
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.settings import PREFECT_API_URL
from prefect.variables import Variable
from pydantic import Field

from dbcrew.errors import TargetError, UsageError
from dbcrew.flows.artifacts import post_alert
from dbcrew.flows.dispatch import ran_sync
from dbcrew.flows.incident_diagnosis import keep_with_incident
from dbcrew.flows.phases import InRunPhases
from dbcrew.flows.review import conduct, run_link
from dbcrew.flows.target_slots import target_limit, target_slot
from dbcrew.flows.worker import planned_stop
from dbcrew.inventory import (
    Inventory,
    PasswordFromEnv,
    PasswordFromSecret,
    TargetEntry,
    parse_inventory,
)
from dbcrew.models import Report
from dbcrew.models.target_run import TargetRun
from dbcrew.roles.crew.context import RunContext
from dbcrew.roles.report.alerts import AlertNotDelivered, notify
from dbcrew.roles.report.recording import failed_report
from dbcrew.secrets import secret
from dbcrew.targets import PostgresTarget, parse_target

INVENTORY_BLOCK = "fleet"
# A Prefect variable: the digest of the inventory last published, set after its block (`publish_inventory`).
INVENTORY_VERSION = "dbcrew_inventory_version"
ON_DEMAND = (
    "on-demand"  # the deployment of review_target a user (or the fleet) starts with a target's name
)
ON_DEMAND_DEPLOYMENT = f"review_target/{ON_DEMAND}"


class InventoryBlock(Block):
    """The published targets inventory (no passwords: only where each one comes from)."""

    _block_type_name = "dbcrew inventory"
    _block_type_slug = "dbcrew-inventory"
    _description = "The databases dbcrew reviews: targets.yaml, as checked and published by `dbcrew inventory publish`."

    inventory: dict[str, Any]


def publish_inventory(inventory: Inventory) -> None:
    """Store the inventory on the server, then its digest (what tells every process it changed), and make each
    target's concurrency limit (one review at a time)."""
    published = inventory.model_dump(mode="json")
    InventoryBlock(inventory=published).save(INVENTORY_BLOCK, overwrite=True)
    # After the block: a process that reads this digest finds the block that has it.
    ran_sync(Variable.set(INVENTORY_VERSION, _digest(published), overwrite=True))
    with get_client(sync_client=True) as client:
        for entry in inventory.targets:
            client.upsert_global_concurrency_limit_by_name(target_limit(entry.name), 1)


def _digest(published: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(published, sort_keys=True).encode()).hexdigest()[:32]


# Per Prefect API: (the digest of the inventory read, the inventory); each value replaced whole, never changed.
_kept: dict[str, tuple[str, Inventory]] = {}


def _api() -> str:
    return str(PREFECT_API_URL.value() or "")


def published_inventory() -> Inventory:
    """The inventory as published now: this process's last read while the published digest is the same, else
    one read of its block, every entry checked.

    Every review needs its own entry, and the watcher and the fleet the whole inventory: a read of the block
    each time was O(targets) a review, on the server (the block, 136 KiB for 1,000 targets, sent whole) and on
    the worker (every entry checked: a third of a worker's CPU in a nightly fleet of 1,000, profiled). The
    digest is one small read; the block is read again only when another publish changed it. An inventory
    published without a digest (by an older dbcrew) is read every time."""
    version = ran_sync(Variable.get(INVENTORY_VERSION, default=None))
    held = _kept.get(_api())
    if held is not None and version is not None and held[0] == version:
        return held[1]
    try:
        block = ran_sync(InventoryBlock.load(INVENTORY_BLOCK))
    except ValueError:
        raise UsageError(
            "no inventory on this Prefect server: run `dbcrew inventory publish targets.yaml` "
            "(or `dbcrew server`)"
        ) from None
    inventory = parse_inventory(block.inventory, "the published inventory")
    _kept[_api()] = (_digest(block.inventory), inventory)
    return inventory


def published_entry(name: str) -> TargetEntry:
    """`name`'s entry in the published inventory (UsageError when it holds none)."""
    return published_inventory().get(name)


def resolve_password(entry: TargetEntry) -> str | None:
    """The entry's password from its source, on this machine; None leaves it to libpq (~/.pgpass)."""
    source = entry.password
    if isinstance(source, PasswordFromEnv):
        password = secret(source.env)  # PGPASSWORD is held out of the environment by the CLI
        if password is None:
            raise TargetError(
                f"target {entry.name}: environment variable {source.env} (its password) is not set on this worker"
            )
        return password
    if isinstance(source, PasswordFromSecret):
        try:
            return str(ran_sync(Secret.load(source.secret)).get())
        except ValueError:
            raise TargetError(
                f"target {entry.name}: no Secret block named {source.secret!r} (its password)"
            ) from None
    return None


def connect_entry(entry: TargetEntry) -> PostgresTarget:
    return parse_target(entry.url, password=resolve_password(entry))


@flow(name="review_target", flow_run_name="{request.target}", validate_parameters=True)
def review_target(
    request: TargetRun = Field(
        description="the target, by its name in the inventory, and this run's overrides"
    ),
) -> Report | State[Any]:
    """Review one database of the inventory as `request` asks; one review per target at a time (its global
    concurrency limit: dbcrew/flows/target_slots.py).

    Then tell the target's alert URLs (from the published inventory, never a parameter: they carry
    tokens) about new problems, or that the run failed.
    """
    entry = published_entry(request.target)
    run = RunContext.of(entry.request(request), parse_target(entry.url), Path(), link=run_link())
    try:
        run.target = connect_entry(
            entry
        )  # the same target, with its password from the entry's source
        with target_slot(
            entry.name, run.settings.window_seconds + run.settings.deadline_after_window_seconds
        ):
            report = conduct(
                run, InRunPhases
            )  # no subflow or task run per phase (dbcrew/flows/phases.py)
    except Exception as exc:
        if stopped := planned_stop():  # the stop's doing, not the target's: tell nobody
            return stopped
        tell(run, entry, failed_report(run, exc))
        raise
    if stopped := planned_stop():  # a report cut short by the stop is no news either
        return stopped
    if request.incident is not None:
        keep_with_incident(run, report, request.incident)
    tell(run, entry, report)
    return report


def tell(run: RunContext, entry: TargetEntry, report: Report) -> None:
    """Send the run's alert to the entry's URLs. A delivery that fails is logged as an error and posted as the
    run's alert artifact; the review's own outcome stands."""
    if not entry.alerts:
        return
    try:
        sent = notify(report, entry.alerts)
    except AlertNotDelivered as exc:
        get_run_logger().error("alert not delivered: %s", exc)
        post_alert(run, "Not delivered (the review itself stands):", str(exc))
        return
    if sent is not None:
        get_run_logger().info("alert sent to %d URLs: %s", len(entry.alerts), sent.title)
        post_alert(run, f"Sent to {len(entry.alerts)} URLs:", f"{sent.title}\n{sent.body}")
