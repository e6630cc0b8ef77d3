"""One watcher's share loop as its own process (as a worker on another machine would run it), for
tests/integration/test_watch_share.py: `python -m tests.integration.share_watcher STORE_URL HOLDER EVERY INVENTORY`.

INVENTORY is a JSON file {name: url} read again at every tick, so a test adds and removes targets
by rewriting it. SIGTERM is a planned stop (leases released); SIGKILL is a death.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path

from dbcrew import stopping
from dbcrew.store.leases import LeaseBook
from dbcrew.store.samples import open_samples
from dbcrew.targets import PostgresTarget, parse_target
from roles.sharing import ShareLoop, lease_for


def main(store_url: str, holder: str, every: float, inventory: Path) -> None:
    logging.basicConfig(level=logging.WARNING, format=f"{holder} %(asctime)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: stopping.request("SIGTERM"))
    store = open_samples(store_url)

    def names() -> list[str]:
        return sorted(json.loads(inventory.read_text()))

    def connect(name: str) -> PostgresTarget:
        return parse_target(json.loads(inventory.read_text())[name])

    book = LeaseBook(store.backend, holder, f"every-{every:g}s", lease_for(every))
    ShareLoop(book, store, every, names, connect, refresh=0.0).run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4]))
