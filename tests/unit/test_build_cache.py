"""The build cache (dbcrew/build_cache.py): a cached object from another version is built again, never fatal.

A pickle names the module of each class it holds; once a module moves (the package moved under dbcrew/), a cache
written before the upgrade names a module that no longer exists, and `dbcrew ask` failed with "No module named
'operators'" until the user found and deleted ~/.cache/dbcrew.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbcrew.build_cache import cached_build

# GLOBAL opcode naming a module that does not exist, then an empty tuple, NEWOBJ, STOP: what an older version's pickle
# of a class from a since-moved module reads as.
FROM_A_MOVED_MODULE = b"cno_such_module_of_an_older_version\nRouter\n)\x81."


@pytest.mark.parametrize(
    "stale",
    [FROM_A_MOVED_MODULE, b"\x80\x05", b"not a pickle at all"],
    ids=["moved", "cut", "garbage"],
)
def test_a_cache_file_that_no_longer_loads_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stale: bytes
) -> None:
    monkeypatch.setenv("DBCREW_CACHE_DIR", str(tmp_path))
    (tmp_path / "router").mkdir()
    (tmp_path / "router" / "d1.pickle").write_bytes(stale)
    built = cached_build("router", "d1", dict, lambda: {"built": True})
    assert built == {"built": True}
    assert cached_build("router", "d1", dict, lambda: {"built": "twice"}) == {"built": True}
