"""A free-space floor per log dir: produce stops before the disk is full (issue 15.2).

Kafka writes until the disk is full, then takes the dir offline and needs a
restart. odradek can refuse client writes earlier: with
``log.dir.free.space.min.bytes`` and/or ``log.dir.free.space.min.percent`` set,
a log dir whose filesystem has less free space than the larger of the two is
*below its floor*: Produce to its partitions is answered with a retriable
error (broker/handlers/produce.py) while reads, retention, compaction, deletes
and replication go on; once space is free again (retention deleted segments,
a topic was deleted, the operator cleaned up) writes are accepted again, with
no restart. Each crossing is logged once, at WARNING going down and INFO
coming back.

Free space is ``statvfs`` (``f_bavail``: what an unprivileged writer may use),
read at most every CHECK_INTERVAL_S per dir; between two reads the bytes
appended are taken off the figure, so a burst cannot run far past the floor.
Both keys 0 (the default): no floor, Kafka's behaviour.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("odradek.storage.log_manager")

CHECK_INTERVAL_S = 0.1


@dataclass(slots=True)
class DirSpace:
    free_bytes: int = -1  # -1: not read yet
    total_bytes: int = 0
    read_at: float = 0.0
    below: bool = False


class FreeSpaceFloor:
    def __init__(
        self,
        min_bytes: int,
        min_percent: float,
        clock: Callable[[], float] = time.monotonic,
        statvfs: Callable[[Path], os.statvfs_result] = os.statvfs,
    ) -> None:
        self.min_bytes = max(0, int(min_bytes))
        self.min_percent = max(0.0, float(min_percent))
        self._clock = clock
        self._statvfs = statvfs
        self.dirs: dict[Path, DirSpace] = {}

    @property
    def enabled(self) -> bool:
        return self.min_bytes > 0 or self.min_percent > 0

    def floor_bytes(self, space: DirSpace) -> int:
        return max(self.min_bytes, int(space.total_bytes * self.min_percent / 100))

    def space(self, dir: Path) -> DirSpace:
        """The dir's figures, read again if older than CHECK_INTERVAL_S."""
        space = self.dirs.setdefault(dir, DirSpace())
        now = self._clock()
        if space.free_bytes < 0 or now - space.read_at >= CHECK_INTERVAL_S:
            try:
                st = self._statvfs(dir)
            except OSError:
                return space  # the dir's own I/O errors take it offline elsewhere
            space.free_bytes = st.f_bavail * st.f_frsize
            space.total_bytes = st.f_blocks * st.f_frsize
            space.read_at = now
        return space

    def refused(self, dir: Path) -> str | None:
        """Why a client write to a partition in ``dir`` is refused now, or None."""
        if not self.enabled:
            return None
        space = self.space(dir)
        if space.free_bytes < 0:
            return None
        floor = self.floor_bytes(space)
        below = space.free_bytes < floor
        if below != space.below:
            space.below = below
            if below:
                log.warning(
                    "Log dir %s has %d bytes free, below its floor of %d bytes "
                    "(log.dir.free.space.min.bytes=%d, log.dir.free.space.min.percent=%g): "
                    "produce to its partitions is refused (NOT_ENOUGH_REPLICAS, retriable) "
                    "until space is freed; reads, retention and deletes go on",
                    dir, space.free_bytes, floor, self.min_bytes, self.min_percent,
                )
            else:
                log.info("Log dir %s has %d bytes free again (floor %d bytes): produce "
                         "to its partitions is accepted again", dir, space.free_bytes, floor)
        if not below:
            return None
        return (f"Log dir {dir} has {space.free_bytes} bytes free, below its free-space "
                f"floor of {floor} bytes: writes resume when space is freed")

    def appended(self, dir: Path, size: int) -> None:
        """``size`` bytes were written to ``dir`` since its last read."""
        space = self.dirs.get(dir)
        if space is not None and space.free_bytes >= 0:
            space.free_bytes = max(0, space.free_bytes - size)
