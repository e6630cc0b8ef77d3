"""`make bench`: every benchmark section in turn, or those named (`python -m bench tables faults`).

Each section is a module of this package with a `main()` that prints its own table; a section
is listed in SECTIONS so the order of the printout is stable.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _scratch(prefix: str) -> str:
    """A folder for this run only, removed when the run ends."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


os.environ.setdefault("PREFECT_HOME", _scratch("dbcrew-bench-prefect-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# Benchmarks review throw-away clusters: their lessons belong in a throw-away memory, not the user's.
os.environ.setdefault(
    "DBCREW_STORE_URL", str(Path(_scratch("dbcrew-bench-store-")) / "store.duckdb")
)

SECTIONS = (
    "orchestration",
    "tables",
    "hypo",
    "error_tree",
    "plan",
    "faults",
    "diagnose",
    "fleet",
    "cli",
    "ask",
    "llm",
    "watch",
    "noise",
    "scale",
)

# `scale` builds a fleet (1,000 databases, a server and two workers for 30 minutes at its defaults):
# run by name only, never as part of `make bench`.
BY_DEFAULT = tuple(name for name in SECTIONS if name != "scale")


def main(argv: list[str]) -> int:
    """Sections by name; options after the names (`diagnose --suite generalization --levels 2`) go to the one section named."""
    first_option = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    chosen, options = argv[:first_option] or list(BY_DEFAULT), argv[first_option:]
    unknown = [name for name in chosen if name not in SECTIONS]
    if unknown:
        print(
            f"bench: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}",
            file=sys.stderr,
        )
        return 2
    if options and len(chosen) != 1:
        print("bench: options go to one section: name exactly one before them", file=sys.stderr)
        return 2
    for name in chosen:
        print(f"== {name} ==", flush=True)
        section = importlib.import_module(f"bench.{name}")
        section.main(options) if options else section.main()
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
