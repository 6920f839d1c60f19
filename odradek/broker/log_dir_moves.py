"""Moving replicas between this broker's log dirs (AlterReplicaLogDirs, API 34).

Theory of operation (Kafka's future replicas and ReplicaAlterLogDirsThread):
asked to move a partition to another of its `log.dirs`, the broker creates an
empty *future* log there (`storage/log_manager.py`, `<topic>-<p>.<uuid>-future`)
and a task copies the current log's batches into it, as a follower would
(`append_as_follower`: offsets, leader epochs, producer state and transaction
markers carried as they are), `COPY_CHUNK_BYTES` at a time, yielding to the
event loop between chunks, so produce and fetch go on meanwhile. When the
future log holds everything the current one holds, the swap is one synchronous
step (`LogManager.promote_future`): no append can fall between the last copy and
the swap, since appends run on the same event loop. The partition then points
at the new log and the controller is told the replica's new dir.

The current log changing under the copy: retention moving its start offset past
the copy starts the future log over at the new start; a truncation (a follower
that diverged) truncates the future log to match. A partition deleted or moved
off this broker meanwhile drops its future log; a restart drops it too (the
`-future` dir is removed at start-up) and the move has to be asked again.
DescribeLogDirs shows a future log with `is_future_key` and its offset lag.
Copying is throttled to `replica.alter.log.dirs.io.max.bytes.per.second` (a
token bucket over all moves; unthrottled by default).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from pathlib import Path

from ..configdef import LONG_MAX
from ..protocol.batch_format import iter_batch_headers
from ..protocol.client import stop_tasks
from ..replication.quota import TokenBucket
from ..replication.replica_manager import Partition, ReplicaManager
from ..storage.log import PartitionLog

log = logging.getLogger(__name__)

COPY_CHUNK_BYTES = 1024 * 1024  # bytes copied between two yields to the event loop
IDLE_WAIT_S = 0.01  # nothing readable yet (a gap being written): look again after this
MAX_MOVES = 1000  # moves under way at once; more are refused (KAFKA_STORAGE_ERROR)


class LogDirMoves:
    def __init__(self, replica_manager: ReplicaManager, rate_bytes_per_s: int = LONG_MAX) -> None:
        self.rm = replica_manager
        self.tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self.bucket = (TokenBucket(rate_bytes_per_s, time.monotonic())
                       if rate_bytes_per_s < LONG_MAX else None)

    def start(self, part: Partition, dest: Path) -> None:
        """Move `part`'s log to `dest` (one of the online dirs, not the current
        one); a move under way to another dir is replaced."""
        key = (part.topic, part.partition)
        lm = self.rm.log_manager
        running = lm.futures.get(key)
        if running is not None and running[1] == dest:
            return
        self.cancel(key)
        if len(self.tasks) >= MAX_MOVES:
            raise OSError(f"{MAX_MOVES} moves are under way")
        future = lm.create_future(part.topic, part.partition, dest)
        task = asyncio.get_running_loop().create_task(self._copy(part, future, dest))
        self.tasks[key] = task
        task.add_done_callback(functools.partial(self._done, key))

    def cancel(self, key: tuple[str, int]) -> None:
        task = self.tasks.pop(key, None)
        if task is not None:
            task.cancel()
        self.rm.log_manager.drop_future(*key)

    def _done(self, key: tuple[str, int], task: asyncio.Task[None]) -> None:
        if self.tasks.get(key) is task:
            del self.tasks[key]

    async def _copy(self, part: Partition, future: PartitionLog, dest: Path) -> None:
        key = (part.topic, part.partition)
        lm = self.rm.log_manager
        log.info("%s-%d: moving to log dir %s", part.topic, part.partition, dest)
        try:
            while True:
                if self.rm.get(*key) is not part or lm.futures.get(key, (None,))[0] is not future:
                    lm.drop_future(*key)
                    return  # deleted, moved off this broker, or replaced
                current = part.log
                if future.log_end_offset > current.log_end_offset:
                    future.truncate_to(current.log_end_offset)
                if future.log_end_offset < current.log_start_offset:
                    future.truncate_fully_and_start_at(current.log_start_offset)
                if future.log_end_offset == current.log_end_offset:
                    moved = lm.promote_future(*key)
                    self.rm.log_moved(part, moved)
                    log.info("%s-%d: moved to log dir %s (log end offset %d)", part.topic,
                             part.partition, dest, moved.log_end_offset)
                    return
                room = COPY_CHUNK_BYTES
                if self.bucket is not None:
                    room = min(room, self.bucket.available(time.monotonic()))
                    if room <= 0:
                        await asyncio.sleep(self.bucket.seconds_until_available(time.monotonic()))
                        continue
                data = bytes(current.read(future.log_end_offset, room).records)
                headers = list(iter_batch_headers(data))
                if headers:
                    end = headers[-1].position + headers[-1].size
                    future.append_as_follower(data[:end], headers)
                    if self.bucket is not None:
                        self.bucket.consume(end, time.monotonic())
                await asyncio.sleep(0 if headers else IDLE_WAIT_S)
        except asyncio.CancelledError:
            raise
        except OSError as e:
            log.error("%s-%d: the move to %s failed: %s", part.topic, part.partition, dest, e)
            lm.drop_future(*key)

    async def stop(self) -> None:
        await stop_tasks(list(self.tasks.values()))
        self.tasks.clear()
