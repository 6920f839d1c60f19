"""The broker's background log work, each on its own Kafka interval.

Theory of operation
-------------------
One asyncio task per job, each a loop of "sleep the interval, run the job";
a job that fails is logged and tried again next interval (an I/O error has
already taken its log dir offline by then). The jobs and their keys:

=================================  ================================================
job                                interval key (Kafka's)
=================================  ================================================
retention (time, size, log start)  ``log.retention.check.interval.ms``
unlink ``.deleted`` segment files  ``FILE_DELETE_TICK_MS`` (each file waits its
                                   topic's ``file.delete.delay.ms``)
flush logs whose ``flush.ms`` is   ``log.flush.scheduler.interval.ms``
due
recovery-point checkpoint          ``log.flush.offset.checkpoint.interval.ms``
log-start-offset checkpoint        ``log.flush.start.offset.checkpoint.interval.ms``
high-watermark checkpoint          ``replica.high.watermark.checkpoint.interval.ms``
=================================  ================================================

Checkpoint contents are taken on the event loop (a consistent view of the
offsets) and the files written and fsynced on a worker thread, so a slow disk
does not stall requests. Retention renames files (cheap) on the loop.

Bounds: intervals are clamped to [``MIN_INTERVAL_MS``, ``MAX_INTERVAL_MS``]
(Kafka's "Long.MaxValue" defaults mean "never", i.e. the task sleeps for the
maximum and checks again); six tasks in all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..config import BrokerConfig
from ..storage.log_checkpoints import CheckpointWrites
from ..storage.log_manager import LogManager

log = logging.getLogger(__name__)

MIN_INTERVAL_MS = 10
MAX_INTERVAL_MS = 24 * 3600 * 1000
FILE_DELETE_TICK_MS = 1000


def _clamp(interval_ms: int) -> float:
    return min(max(int(interval_ms), MIN_INTERVAL_MS), MAX_INTERVAL_MS) / 1000.0


class LogTasks:
    def __init__(self, config: BrokerConfig, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.config = config
        self._tasks: list[asyncio.Task[None]] = []

    def _interval(self, key: str) -> float:
        return _clamp(int(self.config.get(key)))

    def start(self) -> None:
        lm = self.log_manager
        jobs: list[tuple[str, float, Callable[[], object]]] = [
            ("retention", self._interval("log.retention.check.interval.ms"), self._retention),
            ("file-delete", _clamp(FILE_DELETE_TICK_MS), lm.delete_pending_files),
            ("flush", self._interval("log.flush.scheduler.interval.ms"), lm.flush_due_logs),
            (
                "recovery-point-checkpoint",
                self._interval("log.flush.offset.checkpoint.interval.ms"),
                lambda: self._checkpoint(lm.snapshot_recovery_points),
            ),
            (
                "log-start-offset-checkpoint",
                self._interval("log.flush.start.offset.checkpoint.interval.ms"),
                lambda: self._checkpoint(lm.snapshot_log_start_offsets),
            ),
            (
                "high-watermark-checkpoint",
                self._interval("replica.high.watermark.checkpoint.interval.ms"),
                lambda: self._checkpoint(lm.snapshot_high_watermarks),
            ),
        ]
        for name, interval_s, job in jobs:
            self._tasks.append(
                asyncio.get_running_loop().create_task(self._every(name, interval_s, job))
            )

    def _retention(self) -> None:
        self.log_manager.run_retention()

    async def _checkpoint(self, snapshot: Callable[[], CheckpointWrites]) -> None:
        writes = snapshot()
        errors = await asyncio.to_thread(self.log_manager.write_checkpoints, writes)
        for dir, error in errors:
            self.log_manager.mark_dir_offline(dir, error)

    async def _every(self, name: str, interval_s: float, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = job()
                if isinstance(result, Awaitable):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background log task %s failed", name)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
