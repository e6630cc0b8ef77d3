"""One watcher's share loop as its own process (as a worker on another machine would run it), for
tests/integration/test_watch_share.py: `python -m tests.integration.share_watcher STORE_URL HOLDER EVERY INVENTORY [DIAGNOSED]`.

INVENTORY is a JSON file {name: url} read again at every tick, so a test adds and removes targets
by rewriting it. SIGTERM is a planned stop (leases released); SIGKILL is a death. With DIAGNOSED, each incident
its rounds report that is due for a diagnosis (dbcrew/roles/incident_diagnosis.py DiagnosisSchedule, as a worker's watching
decides to start a diagnosis run: dbcrew/flows/watching.py) is appended there as one JSON line, with the holder.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path

from dbcrew import stopping
from dbcrew.roles.incident_diagnosis import DiagnosisSchedule
from dbcrew.roles.sharing import ShareLoop, lease_for
from dbcrew.roles.watching import RoundReport
from dbcrew.store.leases import LeaseBook
from dbcrew.store.samples import open_samples
from dbcrew.targets import PostgresTarget, parse_target


def main(
    store_url: str, holder: str, every: float, inventory: Path, diagnosed: Path | None
) -> None:
    logging.basicConfig(level=logging.WARNING, format=f"{holder} %(asctime)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: stopping.request("SIGTERM"))
    store = open_samples(store_url)

    def names() -> list[str]:
        return sorted(json.loads(inventory.read_text()))

    def connect(name: str) -> PostgresTarget:
        return parse_target(json.loads(inventory.read_text())[name])

    book = LeaseBook(store.backend, holder, f"every-{every:g}s", lease_for(every))
    schedule = DiagnosisSchedule()

    def on_round(report: RoundReport) -> None:
        for outcome in report.outcomes:
            for incident in outcome.incidents():
                if diagnosed is not None and schedule.due(incident, report.at):
                    line = {
                        "holder": holder,
                        "key": outcome.key,
                        **incident.ref().model_dump(mode="json"),
                    }
                    with diagnosed.open("a") as out:
                        out.write(json.dumps(line) + "\n")

    ShareLoop(book, store, every, names, connect, refresh=0.0).run(on_round)


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        float(sys.argv[3]),
        Path(sys.argv[4]),
        Path(sys.argv[5]) if len(sys.argv) > 5 else None,
    )
