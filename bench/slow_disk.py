"""A slow data disk, for the outside suite's io_contention case.

I/O saturation is a disk slower than the work asks of it. The host the suite was written on has
23 GB of memory and a virtio disk the hypervisor caches (8 kB random reads in 65 us, 2 GB/s in
sequence): pgbench's 128 MB accounts table stayed in the page cache and two scanners were on the CPU
0.74 of their time. Evicting the table from the page cache every 50 ms did not change that: the disk
kept up (2 scanners: 0.28-0.31 of the samples waiting on reads, 4 and 8 scanners 0.14-0.77 from run
to run, host iowait 0-8 %). So the case makes the disk slow, for as long as it runs: the server's
processes go into a cgroup-v1 blkio group whose reads from the data directory's disk are throttled
(a small volume's bandwidth), and the scanned tables' files are evicted from the page cache every
50 ms, as on a host whose memory does not hold them, so that their reads reach that disk. Where
the blkio hierarchy is absent or not writable, `unavailable` says why and the case is not run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.injections import connect

BLKIO = Path("/sys/fs/cgroup/blkio")
EVICT_EVERY = 0.05  # seconds: a scan reads a few MB between two evictions


def _disk(path: Path) -> str | None:
    """major:minor of the disk holding `path` (throttle rules name whole disks, not partitions);
    None where `path` is not on a block device (tmpfs, overlay)."""
    dev = path.stat().st_dev
    block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not block.exists():
        return None
    if (block / "partition").exists():
        return (block.resolve().parent / "dev").read_text().strip()
    return f"{os.major(dev)}:{os.minor(dev)}"


def unavailable(datadir: Path) -> str | None:
    """Why no slow disk can be made under the server of `datadir` on this host; None when one can."""
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return f"no cgroup-v1 blkio hierarchy at {BLKIO}"
    if _disk(datadir) is None:
        return f"{datadir} is not on a block device"
    probe = BLKIO / f"dbcrew-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"{BLKIO} is not writable ({exc.strerror})"
    return None


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (field 4 of /proc/PID/stat, after the command in parentheses)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # exited meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _move(pids: list[int], group: Path) -> None:
    for pid in pids:
        try:
            (group / "cgroup.procs").write_text(str(pid))
        except ProcessLookupError:
            pass  # exited meanwhile


def _evict(files: list[Path], stop: threading.Event) -> None:
    while not stop.is_set():
        for path in files:
            for segment in (path, *path.parent.glob(path.name + ".*")):
                try:
                    fd = os.open(segment, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        stop.wait(EVICT_EVERY)


@dataclass(frozen=True)
class SlowDisk:
    """A Recipe's `beside`: the server's reads from its data disk throttled to `read_bps` bytes a
    second, `tables` kept out of the page cache, until the injection stops."""

    tables: tuple[str, ...]
    read_bps: int

    @contextmanager
    def __call__(self, dsn: str) -> Iterator[None]:
        with connect(dsn) as conn:
            datadir = Path(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
            files = [
                datadir / conn.execute("SELECT pg_relation_filepath(%s)", (t,)).fetchone()[0]  # type: ignore[index]
                for t in self.tables
            ]
        postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
        own = next(
            line.split(":", 2)[2]
            for line in Path(f"/proc/{postmaster}/cgroup").read_text().splitlines()
            if line.split(":", 2)[1] == "blkio"
        )
        origin = BLKIO / own.strip("/")
        group = origin / f"dbcrew-slow-disk-{postmaster}"
        group.mkdir(exist_ok=True)
        (group / "blkio.throttle.read_bps_device").write_text(f"{_disk(datadir)} {self.read_bps}")
        stop = threading.Event()
        evictor = threading.Thread(target=_evict, args=(files, stop), daemon=True)
        try:
            # The postmaster first: the backends it forks from then on start in the group.
            _move([postmaster], group)
            _move(_children(postmaster), group)
            evictor.start()
            yield
        finally:
            stop.set()
            if evictor.is_alive():
                evictor.join()
            # The postmaster first again, then whatever it forked meanwhile: on a saturated host a backend
            # forked between a read of cgroup.procs and the move left the group busy after 10 rounds.
            for _ in range(200):
                left = [int(p) for p in (group / "cgroup.procs").read_text().split()]
                if not left:
                    break
                _move(sorted(left, key=lambda p: p != postmaster), origin)
                time.sleep(0.05)
            group.rmdir()
