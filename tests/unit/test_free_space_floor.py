"""The free-space floor's arithmetic (storage/free_space.py), with a fake statvfs."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from odradek.storage.free_space import CHECK_INTERVAL_S, FreeSpaceFloor

MIB = 1024 * 1024


class FakeFs:
    def __init__(self, total: int, free: int) -> None:
        self.total, self.free = total, free
        self.reads = 0

    def statvfs(self, _dir: Path) -> os.statvfs_result:
        self.reads += 1
        blocks = 4096
        return os.statvfs_result((blocks, blocks, self.total // blocks, self.free // blocks,
                                  self.free // blocks, 0, 0, 0, 0, 255))


def test_off_by_default_never_reads() -> None:
    fs = FakeFs(100 * MIB, 0)
    floor = FreeSpaceFloor(0, 0.0, statvfs=fs.statvfs)
    assert floor.refused(Path("/d")) is None and fs.reads == 0


def test_below_the_larger_floor_refuses_and_comes_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    fs = FakeFs(1000 * MIB, 200 * MIB)
    floor = FreeSpaceFloor(100 * MIB, 25.0, clock=lambda: now[0], statvfs=fs.statvfs)
    caplog.set_level(logging.INFO)
    why = floor.refused(Path("/d"))  # 25 % of 1000 MiB = 250 MiB > 100 MiB
    assert why is not None and "/d" in why and str(250 * MIB) in why
    assert floor.dirs[Path("/d")].below
    assert sum("below its floor" in r.message for r in caplog.records) == 1
    floor.refused(Path("/d"))  # no second WARNING while it stays below
    assert sum("below its floor" in r.message for r in caplog.records) == 1
    fs.free = 300 * MIB
    assert floor.refused(Path("/d")) is not None  # cached: not read again yet
    now[0] += CHECK_INTERVAL_S
    assert floor.refused(Path("/d")) is None
    assert any("accepted again" in r.message for r in caplog.records)


def test_appended_bytes_count_between_reads() -> None:
    fs = FakeFs(1000 * MIB, 110 * MIB)
    floor = FreeSpaceFloor(100 * MIB, 0.0, clock=lambda: 0.0, statvfs=fs.statvfs)
    assert floor.refused(Path("/d")) is None
    floor.appended(Path("/d"), 20 * MIB)
    assert floor.refused(Path("/d")) is not None
    assert fs.reads == 1
