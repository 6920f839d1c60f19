"""Moving a replica between log dirs: the ``-future`` log (part of ``LogManager``).

Moving a replica between dirs (AlterReplicaLogDirs, as Kafka's future
replicas): ``create_future`` opens an empty log in
``<dest>/<topic>-<partition>.<uuid hex>-future``; the broker copies the
current log's batches into it (broker/log_dir_moves.py) and, once it holds
everything, ``promote_future`` flushes and closes it, renames it to
``<dest>/<topic>-<partition>``, reopens it there as the partition's log, and
renames the old dir to ``-delete`` (removed in the background), all in one
synchronous step, so no append falls between the last copy and the swap.

A ``-future`` dir found at start-up is a move a restart cut short: the source
is still whole, so storage/dir_load.py removes it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.log import KafkaStorageError, LocalLog, PartitionLog, log_dir_name
from odradek.storage.log_dir import DELETE_SUFFIX, FUTURE_SUFFIX


class FutureLogs:
    """The future-replica half of ``LogManager``; the attributes are its."""

    futures: dict[tuple[str, int], tuple[PartitionLog, Path]]
    _logs: dict[tuple[str, int], PartitionLog]
    _dir_of: dict[tuple[str, int], Path]
    _clock_ms: Callable[[], int]
    _remover: ThreadPoolExecutor | None

    def online_dirs(self) -> list[Path]:
        raise NotImplementedError

    def mark_dir_offline(self, dir: Path, error: BaseException) -> None:
        raise NotImplementedError

    def _on_io_error(self, plog: LocalLog, error: OSError) -> None:
        raise NotImplementedError

    def _adopt(self, key: tuple[str, int], plog: PartitionLog, dir: Path) -> None:
        raise NotImplementedError

    def create_future(self, topic: str, partition: int, dest: Path) -> PartitionLog:
        """An empty log in ``dest`` that the current one is copied into."""
        key = (topic, partition)
        current = self._logs[key]
        assert key not in self.futures and dest in self.online_dirs()
        path = dest / f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"
        try:
            future = PartitionLog.open(path, topic, partition, current.config, current.topic_id,
                                       clock_ms=self._clock_ms)
            future.truncate_fully_and_start_at(current.log_start_offset)
            fsync_dir(dest)
        except OSError as e:
            self.mark_dir_offline(dest, e)
            raise KafkaStorageError(f"cannot create the future log in {dest}: {e}") from e
        future.on_io_error = self._on_io_error
        self.futures[key] = (future, dest)
        return future

    def drop_future(self, topic: str, partition: int) -> None:
        found = self.futures.pop((topic, partition), None)
        if found is not None:
            found[0].close()
            shutil.rmtree(found[0].dir, ignore_errors=True)

    def promote_future(self, topic: str, partition: int) -> PartitionLog:
        """The future log, caught up, becomes the partition's log (see the module
        docstring); returns it. The caller points the partition at it."""
        key = (topic, partition)
        future, dest = self.futures.pop(key)
        old, old_dir = self._logs[key], self._dir_of[key]
        assert future.log_end_offset == old.log_end_offset, "promote a caught-up future only"
        final = dest / log_dir_name(topic, partition)
        future.flush()
        future.close()
        os.replace(future.dir, final)
        fsync_dir(dest)
        plog = PartitionLog.open(final, topic, partition, old.config, old.topic_id,
                                 clock_ms=self._clock_ms, recovery_point=old.log_end_offset,
                                 log_start_offset=old.log_start_offset,
                                 high_watermark=old.high_watermark, had_clean_shutdown=True)
        self._adopt(key, plog, dest)
        old.close()
        doomed = old_dir / f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        try:
            os.replace(old.dir, doomed)
            fsync_dir(old_dir)
        except OSError as e:
            self.mark_dir_offline(old_dir, e)
            return plog
        self._remove_in_background([doomed])
        return plog

    def _remove_in_background(self, paths: list[Path]) -> None:
        """Remove renamed log dirs off the caller's thread (one remover thread)."""
        if self._remover is None:
            self._remover = ThreadPoolExecutor(1, "log-remover")
        self._remover.submit(_remove_trees, paths)


def _remove_trees(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
