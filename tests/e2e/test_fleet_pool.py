"""Acceptance 2 of issue 31: a fleet watched by two workers on one pool, Prefect and the store on PostgreSQL.

One `dbcrew server --local-postgres` for the module (the Prefect server's database and the store on a
PostgreSQL it manages, and its own worker): starting it, with its cluster and its fleet, is the costly
part, and what `--local-postgres` itself promises (a review's run kept in that PostgreSQL, its history in
the store there, the PostgreSQL stopped with the command) is checked on the same server (first test,
and the fixture's end) rather than on a second one of its own.

Real processes, as a fleet user runs them: that server and a second worker started with the
documented `prefect worker start --pool dbcrew` line from its own home (PREFECT_HOME, reports, memory),
as another machine would; TARGETS databases of one embedded cluster (bench/scale.py's fleet, each made
from a template), all watched every EVERY seconds with the targets' alerts at a webhook receiver, and
SCHEDULED of them on one shared cron schedule. In turn:
- both workers hold a share, and every target is sampled by one of them at a time: their stints
  (watch_tenures) never overlap and every stored pass lies in exactly one (read from the store);
- the second worker killed with SIGKILL: its targets sampled again by the first, the stretch nobody
  watched stored as a gap naming it;
- lock contention injected into one target: its incident, its diagnosis run, the alert naming the cause;
- the shared schedule's slot run while the pool's reviews queue admits none (as test_schedules.py): its
  reviews wait until Prefect marks them Late, a slot no worker can start is alerted (the sign that the
  supervisor judged the schedules since), no review is told late, and every review completes.
Every step waits for what the store, Prefect or the receiver shows (dbcrew/lab/waiting.py), never for a duration;
the figures a loaded host may change (seconds to the takeover, intervals sampled) are printed, not asserted.
"""

from __future__ import annotations

import itertools
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    FlowRunFilterTags,
)
from prefect.client.schemas.objects import FlowRun
from prefect.states import Scheduled

from bench import injections
from bench.scale import ANOMALY, Fleet, Store, coverage, far_slot, own_home_worker, store_ready
from dbcrew.flows.deploy import POOL
from dbcrew.flows.queues import PoolQueue
from dbcrew.inventory import MissedSlots, ScheduleGroup
from dbcrew.lab.crew_server import CrewServer, running_crew_server
from dbcrew.lab.embedded import EmbeddedPostgres
from dbcrew.lab.waiting import wait_for
from dbcrew.store.leases import tenures
from dbcrew.store.samples import open_samples
from dbcrew.vocabulary import Scenario
from tests.e2e.conftest import SOON_LATE
from tests.webhooks import receiving_webhooks

pytestmark = pytest.mark.timeout(1500)

TARGETS = 20
SCHEDULED = 3  # targets on the shared cron schedule (its slot's reviews)
EVERY = 2.0
QUIET_PASSES = 10  # each target's passes before the injection: the detector's history
ANOMALY_SECONDS = 20.0
# the shared cron schedule: its slot never fires during the test
NIGHTLY = far_slot(datetime.now(UTC))
SCHEDULE = ScheduleGroup(cron=NIGHTLY, scenario=Scenario.HEALTH, missed=MissedSlots.COLLAPSE).name
WAIT = 300.0


def inventory(fleet: Fleet, hook: str) -> str:
    lines = ["targets:"]
    for i, (name, dsn) in enumerate(fleet.dsns.items()):
        lines += [
            f"  - name: {name}",
            f"    url: {dsn}",
            "    window: 1",
            f"    watch: {{every: {EVERY:g}}}",
            f'    alerts: ["{hook}/{name}"]',
        ]
        if i < SCHEDULED:
            lines.append(f'    schedule: "{NIGHTLY}"')
    return "\n".join(lines) + "\n"


def worker_name(holder: str) -> str:
    """A lease holder's worker (name@host:pid/group -> name)."""
    return holder.split("@")[0]


def check_one_holder_at_a_time(store: Store, backend_url: str, since: datetime) -> None:
    """Per target: the holders' stints never overlap, and every pass stored since `since` lies in exactly one."""
    backend = open_samples(backend_url).backend
    passes = store.passes(since, datetime.now(UTC))
    for name, ends in passes.items():
        stints = tenures(backend, name)
        for earlier, later in itertools.pairwise(stints):
            assert earlier.ended_at < later.started_at, (
                f"{name}: two holders at once: {earlier} {later}"
            )
        for at in ends:
            owners = [s.holder for s in stints if s.started_at <= at <= s.ended_at]
            assert len(owners) == 1, f"{name}: the pass at {at} belongs to {owners}"


def reviews_of(client: SyncPrefectClient, slot: FlowRun) -> list[FlowRun]:
    return client.read_flow_runs(
        flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[slot.id])
        )
    )


@dataclass
class Pool:
    """The module's `dbcrew server --local-postgres` watching the fleet, and what the tests read it through."""

    server: CrewServer
    fleet: Fleet
    store: Store
    prefect_database: str  # the Prefect server's database, as its start line names it
    received: list[dict[str, object]]  # the alerts at the webhook receiver
    work: Path


@contextmanager
def outside_base_temp() -> Iterator[Path]:
    """Outside pytest's base temp: another pytest run on the machine resets that folder to mode 0700, after
    which the clusters' system user can no longer traverse it (as tests/e2e/conftest.py's fleet cluster)."""
    path = Path(tempfile.mkdtemp(prefix="dbcrew-fleet-pool-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    """The fleet's cluster with TARGETS databases, `dbcrew server --local-postgres` watching them; at the end,
    the server stopped as Ctrl-C stops it, its local PostgreSQL stopped with it, on the port it kept."""
    with (
        outside_base_temp() as work,
        receiving_webhooks() as (hook, received),
        ExitStack() as stack,
    ):
        pg = EmbeddedPostgres(work / "fleet", settings={"max_connections": "150"}).start()
        stack.callback(pg.stop)
        fleet = Fleet([pg])
        fleet.make(TARGETS)
        (work / "targets.yaml").write_text(inventory(fleet, hook))
        (work / "server").mkdir()
        local = work / "local-pg"
        server: CrewServer = stack.enter_context(
            running_crew_server(
                work / "targets.yaml",
                work / "server",
                env=SOON_LATE,
                options=("--local-postgres", str(local)),
            )
        )
        prefect_url = re.search(r"Prefect database: (\S+)", server.banner)
        store_url = re.search(r"store: (\S+)", server.banner)
        assert prefect_url and store_url, server.banner
        yield Pool(server, fleet, Store(store_url[1], fleet), prefect_url[1], received, work)
        rest = server.stop()
        assert server.process.returncode == 0 and "stopped" in rest, rest
        assert not (local / "data" / "postmaster.pid").exists(), (
            "the local PostgreSQL stopped with it"
        )
        assert (local / "port").read_text() == prefect_url[1].split(":")[2].split("/")[0]


def test_one_command_runs_prefect_and_the_store_on_a_local_postgresql(pool: Pool) -> None:
    """The Prefect server keeps its state in the database `prefect` (read here by SQL: a review's flow run is
    a row there), the worker's review writes its history to the database `dbcrew_store` (read here by SQL:
    the run's row links the flow run). The target is one of the fleet's, on no schedule and never injected."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    assert pool.prefect_database.startswith("postgresql://postgres@127.0.0.1:")
    assert pool.prefect_database.endswith("/prefect") and pool.store.url.endswith("/dbcrew_store")
    assert pool.store.url.startswith("postgresql://"), pool.server.banner
    solo = list(pool.fleet.dsns)[SCHEDULED]
    with (
        temporary_settings(updates={PREFECT_API_URL: pool.server.api}),
        get_client(sync_client=True) as client,
    ):
        on_demand = client.read_deployment_by_name("review_target/on-demand")
        run = client.create_flow_run_from_deployment(
            on_demand.id, parameters={"request": {"target": solo}}
        )
        state = wait_for(
            lambda: (s := client.read_flow_run(run.id).state) and s.is_final() and s,
            "the on-demand review to end",
            600,
        )
    assert state.is_completed(), state
    with psycopg.connect(pool.prefect_database) as conn:
        (stored,) = conn.execute(
            "SELECT state_type FROM flow_run WHERE id = %s", (run.id,)
        ).fetchone() or ("none",)
    assert stored == "COMPLETED", "the Prefect server's state is in the local PostgreSQL"
    with psycopg.connect(pool.store.url) as conn:
        kept = conn.execute(
            "SELECT display FROM runs WHERE link LIKE %s", (f"%{run.id}%",)
        ).fetchall()
    assert len(kept) == 1 and solo in kept[0][0], kept


def test_two_workers_watch_a_fleet_on_postgresql_take_over_a_killed_one_and_queue_reviews_without_late_alerts(
    pool: Pool,
) -> None:
    server, fleet, store, received, work = (
        pool.server,
        pool.fleet,
        pool.store,
        pool.received,
        pool.work,
    )
    names = list(fleet.dsns)
    with ExitStack() as stack:
        second = stack.enter_context(own_home_worker(server.api, store.url, work / "second"))

        # Both workers hold a share; every target sampled by one of them at a time.
        shares = wait_for(
            lambda: (
                store_ready(store)
                and len(h := store.holders()) == TARGETS
                and len({worker_name(x) for x in h.values()}) == 2
                and h
            ),
            "every target leased, shared by both workers",
            WAIT,
        )
        t0 = datetime.now(UTC)
        wait_for(
            lambda: all(
                len(p) >= QUIET_PASSES for p in store.passes(t0, datetime.now(UTC)).values()
            ),
            f"{QUIET_PASSES} passes of every target",
            WAIT,
        )
        t1 = datetime.now(UTC)
        check_one_holder_at_a_time(store, store.url, t0)
        intervals, sampled, doubled = coverage(store.passes(t0, t1), t0, t1, EVERY)
        print(
            f"shares {dict(Counter(worker_name(h) for h in shares.values()))}; {sampled}/{intervals} target-intervals"
            f" sampled, {doubled} passes under half an interval after the one before"
        )

        # The second worker killed: its targets taken over by the first, the gap stored.
        held = sorted(t for t, h in store.holders().items() if worker_name(h) == "second")
        assert held, "the second worker holds a share"
        killed = datetime.now(UTC)
        second.send_signal(signal.SIGKILL)
        second.wait(timeout=60)

        def resampled() -> dict[str, datetime] | None:
            after = store.passes(killed, datetime.now(UTC))
            firsts = {t: after[t][0] for t in held if after.get(t)}
            return firsts if len(firsts) == len(held) else None

        firsts = wait_for(resampled, "the killed worker's targets sampled again", WAIT)
        assert all(worker_name(h) != "second" for h in store.holders().values())
        check_one_holder_at_a_time(store, store.url, t0)
        # The stretch from the killed worker's last pass to the taker's first: a gap once it missed an interval
        # (stored with the taker's first pass, in its transaction), named after the worker that stopped.
        lasts = store.passes(t0, killed)
        stretches = {t: (firsts[t] - lasts[t][-1]).total_seconds() for t in held}
        unwatched = sorted(t for t, s in stretches.items() if s > EVERY)
        ids = store.ids()
        gapped = (
            store.scalar(
                "SELECT count(DISTINCT target) FROM watch_gaps WHERE ended_at > %s AND reason LIKE %s"
                f" AND target IN ({', '.join(['%s'] * len(unwatched))})",
                (killed, "%second@% stopped renewing its lease%", *[ids[t] for t in unwatched]),
            )
            if unwatched
            else 0
        )
        assert gapped == len(unwatched), (stretches, gapped)
        print(
            f"{len(held)} targets of the killed worker sampled again {min(stretches.values()):.1f}"
            f"-{max(stretches.values()):.1f} s after its last pass; {len(unwatched)} gaps stored"
        )

        # An anomaly on one target: its incident diagnosed, the cause alerted to its URL.
        injected = names[-1]
        with injections.injected(fleet.dsns[injected], [ANOMALY], warmup=1.0):
            time.sleep(ANOMALY_SECONDS)  # the anomaly's length, not a wait for a result
        alert = wait_for(
            lambda: next(
                (
                    a
                    for a in received
                    if a["path"] == f"/{injected}" and ANOMALY in str(a.get("title"))
                ),
                None,
            ),
            "the incident's diagnosis alert naming the cause",
            WAIT,
        )
        assert "incident" in str(alert["title"]), alert
        wait_for(
            lambda: any(d for _, d in store.incidents(t0).get(injected, [])),
            "the diagnosis kept with the incident",
            WAIT,
        )
        others = {n: v for n, v in store.incidents(t0).items() if n != injected}
        print(
            f"incidents on the {TARGETS - 1} other targets: {sum(len(v) for v in others.values())}"
        )

        # The shared schedule's slot, its reviews waiting behind the pool's limit: none told late.
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with (
            temporary_settings(updates={PREFECT_API_URL: server.api}),
            get_client(sync_client=True) as client,
        ):
            before = len(received)
            deployment = client.read_deployment_by_name(f"scheduled_reviews/{SCHEDULE}")
            reviews_queue = client.read_work_queue_by_name(PoolQueue.REVIEWS, work_pool_name=POOL)
            fleet_queue = client.read_work_queue_by_name(PoolQueue.FLEET, work_pool_name=POOL)
            client.update_work_queue(reviews_queue.id, concurrency_limit=0)
            stuck = None
            try:
                slot = client.create_flow_run_from_deployment(
                    deployment.id
                )  # what its schedule does
                wait_for(
                    lambda: (
                        len(runs := reviews_of(client, slot)) == SCHEDULED
                        and all(r.state_name == "Late" for r in runs)
                    ),
                    "the slot's reviews marked Late while they wait for the pool's limit",
                    WAIT,
                )
                client.update_work_queue(fleet_queue.id, is_paused=True)
                stuck = client.create_flow_run_from_deployment(
                    deployment.id,
                    state=Scheduled(scheduled_time=datetime.now(UTC) - timedelta(minutes=2)),
                )
                wait_for(
                    lambda: [m for m in received[before:] if "have not started" in str(m["title"])],
                    "the alert of the slot no worker could start",
                    WAIT,
                )
            finally:
                if stuck is not None:
                    client.delete_flow_run(stuck.id)
                client.update_work_queue(fleet_queue.id, is_paused=False)
                client.update_work_queue(
                    reviews_queue.id, concurrency_limit=reviews_queue.concurrency_limit
                )
            done = wait_for(
                lambda: (
                    (state := client.read_flow_run(slot.id).state) and state.is_final() and state
                ),
                "the slot's run to end once its reviews could run",
                600,
            )
            assert done.is_completed(), done.message
            reviews = reviews_of(client, slot)
            assert sorted(r.name for r in reviews) == names[:SCHEDULED]
            assert all(r.state is not None and r.state.is_completed() for r in reviews)
            diagnoses = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["incident"]))
            )
            assert injected in [r.name for r in diagnoses], (
                "the incident's diagnosis was a run of the pool"
            )
        assert [m for m in received if "is late" in str(m["title"])] == [], (
            "no review was told late"
        )
