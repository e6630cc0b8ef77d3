"""The report folder, checked before any work: writable, a folder, and never mixed with an older run.

A review writes report.json/md/html, charts/ and workspace.duckdb into one folder. Found out after
the review (an existing file, /proc/x, a read-only disk) it costs the whole run and a traceback;
reused as it is, the previous run's workspace tables leak into the new report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dbcrew.cli.console import fail
from dbcrew.errors import UsageError
from dbcrew.workspace import holder

# What a run leaves in its folder: the only names a re-run may remove.
RUN_FILES = ("report.json", "report.md", "report.html", "workspace.duckdb", "workspace.duckdb.wal")
RUN_FOLDERS = ("charts",)
WORKSPACE = "workspace.duckdb"


def prepare_out(folder: Path) -> Path:
    """Make `folder` ready for a new run or raise UsageError (one line) saying why it cannot be.

    A folder holding a previous report starts clean (only the files a run writes are removed), and
    so does one a review left without its report (killed: its workspace, which no process holds any
    more), with a note; a folder a running review writes into, or holding anything else, is refused
    rather than mixed with or deleted.
    """
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: exists and is not a folder")
    if folder.is_dir():
        entries = {p.name for p in folder.iterdir()}
        if WORKSPACE in entries:
            running = holder(folder / WORKSPACE)
            if running is not None:
                raise UsageError(
                    f"--out {folder}: a review ({running}) is writing there; give another folder"
                )
        if entries and "report.json" not in entries and WORKSPACE not in entries:
            raise UsageError(
                f"--out {folder}: not empty and holds no earlier report; give a new or empty folder"
            )
        foreign = entries - set(RUN_FILES) - set(RUN_FOLDERS)
        if foreign:
            raise UsageError(
                f"--out {folder}: holds {sorted(foreign)[0]!r} besides an earlier report; give a new or empty folder"
            )
        if "report.json" not in entries and WORKSPACE in entries:
            fail(
                f"dbcrew: note: --out {folder}: taking over the workspace of a review that ended without"
                " its report (no process holds it)"
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            (folder / name).unlink(missing_ok=True)
        for name in RUN_FOLDERS:
            if (folder / name).exists():
                shutil.rmtree(folder / name)
        probe = folder / ".dbcrew-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(
            f"--out {folder}: cannot write there ({exc.strerror or type(exc).__name__})"
        ) from None
    return folder
