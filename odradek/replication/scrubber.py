"""The scrubber: closed segments re-read in the background, every batch CRC-checked.

Kafka serves a byte that rotted in a closed segment as it is; consumers that
check CRCs fail on it and the others read garbage. odradek re-reads every
closed segment once after it closes and again every
`odradek.log.scrub.interval.ms`, at most `odradek.log.scrub.bytes.per.second`
(0: off), on a worker thread (storage/scrub.py does the reading). A segment
whose valid prefix ends before its end is corrupt:

- it is logged (file, position, first bad offset) and counted
  (`odradek_log_scrub_corrupt_segments`);
- on a follower it is repaired from the leader, beyond Kafka: the log is cut
  where the valid prefix ends (storage/log.py `cut_at_corruption`) and the
  replica fetcher fetches the rest again, as after a divergence — the leader's
  batches are byte-identical, so the segment comes back whole
  (`odradek_log_scrub_repaired_segments`);
- on the leader it stays (the log line says to restart the broker: its
  controlled shutdown moves the leadership away, and the first pass after the
  start, while the node follows, repairs it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..protocol.client import stop_tasks
from ..storage.scrub import Corruption, scan_closed_segment
from .node import ReplicaHost

if TYPE_CHECKING:
    from .replica_manager import Partition

log = logging.getLogger(__name__)

PASS_PAUSE_S = 5.0  # between two passes over every partition
CORRUPT_RECHECK_S = 60.0  # a corrupt segment left in place is looked at again after this


class Scrubber:
    def __init__(self, host: ReplicaHost) -> None:
        self.host = host
        self.rate = int(host.config.get("odradek.log.scrub.bytes.per.second"))
        self.interval_s = int(host.config.get("odradek.log.scrub.interval.ms")) / 1000
        # (path, size) -> when it was last found whole
        self._checked: dict[tuple[str, int], float] = {}
        self.corrupt_found = 0
        self.repaired = 0
        self.scanned_bytes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.rate > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await stop_tasks([self._task])

    async def _run(self) -> None:
        while True:
            try:
                await self.scrub_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scrub pass failed")
            await asyncio.sleep(PASS_PAUSE_S)

    async def scrub_pass(self) -> None:
        """Check every closed segment that is due, one at a time, at the rate."""
        rm = self.host.replica_manager
        seen: set[tuple[str, int]] = set()
        for key, part in list(rm.partitions.items()):
            plog = part.log
            if plog.offline:
                continue
            for segment in list(plog.segments[:-1]):  # the active one is still written
                ident = (str(segment.log_path), segment.size_bytes)
                seen.add(ident)
                last = self._checked.get(ident)
                if last is not None and time.monotonic() - last < self.interval_s:
                    continue
                started = time.monotonic()
                found = await asyncio.to_thread(
                    scan_closed_segment, segment.log_path, segment.base_offset,
                    segment.size_bytes)
                self.scanned_bytes += segment.size_bytes
                if found is not None and (segment not in plog.segments
                                          or segment.size_bytes != found.size_bytes):
                    found = None  # replaced while it was read (compaction, retention)
                if found is None:
                    self._checked[ident] = time.monotonic()
                else:
                    # checked again after CORRUPT_RECHECK_S, not at every pass
                    self._checked[ident] = time.monotonic() - self.interval_s + CORRUPT_RECHECK_S
                    self._on_corrupt(rm.partitions.get(key), found)
                # the rate: this segment's bytes take at least size/rate seconds
                await asyncio.sleep(max(segment.size_bytes / self.rate
                                        - (time.monotonic() - started), 0))
        for ident in set(self._checked) - seen:  # deleted, compacted or rolled away
            del self._checked[ident]

    def _on_corrupt(self, part: Partition | None, c: Corruption) -> None:
        self.corrupt_found += 1
        if part is None:
            return
        name = f"{part.topic}-{part.partition}"
        log.error("%s: segment %s is corrupt: its batches are valid up to byte %d of %d "
                  "(offsets from %d are bad)", name, c.path, c.position, c.size_bytes, c.offset)
        if part.leader == self.host.node_id:
            log.error("%s: this node leads it, so the corrupt batches stay and are served "
                      "as they are; restart this broker (its controlled shutdown moves the "
                      "leadership away) and the first scrub after the start repairs it from "
                      "the new leader", name)
            return
        if part.leader < 0:
            log.error("%s: no leader to repair it from; it stays until one is elected", name)
            return
        leo = part.log.cut_at_corruption(c.base_offset, c.position)
        if leo is None:
            return
        self.repaired += 1
        log.warning("%s: cut the log at offset %d (byte %d of %s) to fetch the rest again "
                    "from leader %d", name, leo, c.position, c.path.name, part.leader)
