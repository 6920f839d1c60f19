"""All partition logs of a broker, spread over its ``log.dirs``.

Directory layout
----------------
Each log dir holds::

    meta.properties                     identity of the dir (format below)
    recovery-point-offset-checkpoint    "<topic> <partition> <offset>" checkpoints
    log-start-offset-checkpoint         (format: storage/checkpoint.py)
    replication-offset-checkpoint       high watermarks
    .kafka_cleanshutdown                present only between a clean stop and the
                                        next start (format below)
    <topic>-<partition>/                one PartitionLog (storage/log.py)
    <topic>-<partition>.<uuid hex>-delete/   a deleted log on its way out
    __cluster_metadata-0/               the KRaft metadata log: not managed here

Moving a replica between dirs (AlterReplicaLogDirs, as Kafka's future
replicas): ``create_future`` opens an empty log in
``<dest>/<topic>-<partition>.<uuid hex>-future``; the broker copies the
current log's batches into it (broker/log_dir_moves.py) and, once it holds
everything, ``promote_future`` flushes and closes it, renames it to
``<dest>/<topic>-<partition>``, reopens it there as the partition's log, and
renames the old dir to ``-delete`` (removed in the background), all in one
synchronous step, so no append falls between the last copy and the swap.

``meta.properties`` and ``.kafka_cleanshutdown`` are written and read by
storage/log_dir.py, which documents their formats. On startup an existing
``meta.properties`` must name the same cluster and node; a missing
``directory.id`` is added. Directories ending in ``-stray`` are left alone;
``-delete`` and ``-future`` (a move a restart cut short) directories are
removed.

The clean-shutdown marker's presence at start-up says every log of the dir was flushed and
checkpointed at shutdown, so no log is recovered (recovery points are taken
as the log end offsets); it is removed once the logs are loaded. Without it,
each log recovers from its checkpointed recovery point (0 when the
checkpoint has no entry for it), so start-up time follows the unflushed tail.

Checkpoints. ``recovery-point-offset-checkpoint`` lists every online log's
recovery point, ``replication-offset-checkpoint`` its high watermark and
``log-start-offset-checkpoint`` its log start offset where that is above the
first segment's base offset (Kafka's filter). The broker's background tasks
(broker/log_tasks.py) write them every
``log.flush.offset.checkpoint.interval.ms``,
``replica.high.watermark.checkpoint.interval.ms`` and
``log.flush.start.offset.checkpoint.interval.ms``; ``shutdown`` writes all
three after the final flush and then the clean-shutdown marker.

Offline dirs. An I/O error on a log (append, roll, flush, read, delete) or on
a dir's checkpoint takes the whole dir offline, as Kafka's
``LogDirFailureChannel`` does: one ERROR log line, every log in it marked
offline (its operations raise KafkaStorageError, which handlers answer with
KAFKA_STORAGE_ERROR) and its files closed; logs in other dirs keep working
and new partitions are placed only in online dirs. A dir that fails at
start-up (unreadable, not a directory, bad meta.properties I/O) starts
offline; if every dir fails, start-up fails. An offline dir comes back with
a restart.

Placement (KIP-858). The metadata records which dir (by ``directory.id``)
holds each replica; ``get_or_create`` takes that id. A log found in an online
dir is used wherever it is. Otherwise: no id (unassigned: a new replica) or
the id of an online dir -> created there, or in the online dir holding the
fewest partitions (first dir on ties), as Kafka does. Any other id while some
configured dir is offline -> not created: the data may be in the offline dir
(whose id cannot be read), so the replica is an ``OfflinePartitionLog``
(storage/offline_log.py) until a restart with the dir usable. Any other id
with every configured dir online -> the id is not one of this broker's dirs
(the dir was removed from ``log.dirs``, or the replica was recorded before
directory ids were): created anew, as Kafka does with a lost dir.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.storage.checkpoint import CorruptCheckpoint, OffsetCheckpointFile, fsync_dir
from odradek.storage.free_space import FreeSpaceFloor
from odradek.storage.load_progress import LoadProgress
from odradek.storage.log import (
    FlushScheduler,
    KafkaStorageError,
    LocalLog,
    PartitionLog,
    kafka_uuid_string,
    log_dir_name,
    read_partition_metadata,
    wall_clock_ms,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    CLUSTER_METADATA_TOPIC,
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    STRAY_SUFFIX,
    InconsistentBrokerMetadata,
    check_meta_properties,
    parse_log_dir_name,
    read_properties,
    write_clean_shutdown_file,
)
from odradek.storage.offline_log import OfflinePartitionLog

_PROCESS_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE)

# The log dir's own files and names (storage/log_dir.py), re-exported for callers.
__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "CheckpointWrites",
    "InconsistentBrokerMetadata",
    "LogManager",
    "parse_log_dir_name",
    "read_properties",
]

log = logging.getLogger(__name__)

# Checkpoint writes: (dir, file, offsets) per online dir, taken on the event loop
# and written anywhere (write_checkpoints touches no shared state).
CheckpointWrites = list[tuple[Path, Path, dict[tuple[str, int], int]]]


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        cluster_id: str,
        node_id: int,
        clock_ms: Callable[[], int] = wall_clock_ms,
        recovery_threads: int = 1,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.directory_ids: dict[Path, uuid.UUID] = {}
        self.offline_dirs: dict[Path, str] = {}  # dir -> why it went offline
        self.flusher: FlushScheduler | None = None
        self.had_clean_shutdown: dict[Path, bool] = {}
        self._clock_ms = clock_ms
        self.recovery_threads = max(1, recovery_threads)
        # produce stops below it (storage/free_space.py); no floor unless configured
        self.free_space = FreeSpaceFloor(0, 0.0)
        self.load_progress = LoadProgress()
        self._config_for: Callable[[str], LogConfig] | None = None
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        # replicas assigned to a dir that is not online (see Placement)
        self._offline_logs: dict[tuple[str, int], OfflinePartitionLog] = {}
        # called with a dir that went offline after start-up (the broker
        # reports it to the controller, KIP-858); may run on any thread
        self.on_dir_offline: Callable[[Path], None] | None = None
        # removes deleted logs' renamed dirs off the caller's thread (delete_many)
        self._remover: ThreadPoolExecutor | None = None
        # replicas on their way to another dir: key -> (future log, its dir)
        self.futures: dict[tuple[str, int], tuple[PartitionLog, Path]] = {}

    # -- startup -----------------------------------------------------------------------
    def startup(self, config_for: Callable[[str], LogConfig] | None = None) -> None:
        """Write or validate each dir's meta.properties, then load every log with
        ``config_for(topic)`` (default: the broker-wide defaults).

        A dir that cannot be used (I/O error) starts offline; if none is usable,
        the error goes up."""
        self._config_for = config_for
        errors: list[OSError] = []
        for dir in self.log_dirs:
            try:
                if dir.exists() and not dir.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(dir))
                dir.mkdir(parents=True, exist_ok=True)
                self.directory_ids[dir] = check_meta_properties(dir, self.node_id, self.cluster_id)
            except OSError as e:
                errors.append(e)
                if e.errno in _PROCESS_LIMIT_ERRNOS:
                    self.mark_dir_offline(dir, e)  # logs; a process limit, not a disk
                    continue
                log.error(
                    "Log dir %s is unusable at start-up: %s. It is offline: the partitions "
                    "assigned to it stay offline (KAFKA_STORAGE_ERROR) and are not created "
                    "in another dir until the broker restarts with it repaired.", dir, e,
                )
                self.offline_dirs[dir] = str(e)
        for dir in self.online_dirs():
            try:
                self._load_dir(dir)
            except OSError as e:
                errors.append(e)
                self.mark_dir_offline(dir, e)
        if not self.online_dirs():
            raise errors[0] if errors else OSError("no usable log dir")

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def offline_directory_ids(self) -> list[uuid.UUID]:
        """The ``directory.id`` of each offline dir whose id was read (a dir
        that failed after its ``meta.properties`` was: the ones the broker
        registered online and must now report offline)."""
        return [self.directory_ids[d] for d in self.offline_dirs if d in self.directory_ids]

    def _read_checkpoint(self, dir: Path, name: str) -> dict[tuple[str, int], int]:
        try:
            return OffsetCheckpointFile(dir / name).read()
        except (CorruptCheckpoint, UnicodeDecodeError) as e:
            log.warning("ignoring %s: %s", dir / name, e)
            return {}

    def _load_dir(self, dir: Path) -> None:
        """Open every log of ``dir``, ``recovery_threads`` at a time (Kafka's
        ``num.recovery.threads.per.data.dir``): after a crash only logs with an
        unflushed tail are scanned (log_loader.py), so most cost what a clean
        load costs; progress goes to the log and to ``load_progress``."""
        marker = dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[dir] = clean
        recovery_points = self._read_checkpoint(dir, RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(dir, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(dir, HIGH_WATERMARK_CHECKPOINT)
        found: list[tuple[tuple[str, int], Path]] = []
        for entry in sorted(os.scandir(dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            name = entry.name
            if name.endswith((DELETE_SUFFIX, FUTURE_SUFFIX)):
                # a deleted log, or an unfinished move (the source is still whole)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if name.endswith(STRAY_SUFFIX):
                continue
            parsed = parse_log_dir_name(name)
            if parsed is None or parsed[0] == CLUSTER_METADATA_TOPIC:
                continue
            if parsed in self._logs:
                raise InconsistentBrokerMetadata(
                    f"{name} exists in both {self._dir_of[parsed]} and {dir}"
                )
            found.append((parsed, Path(entry.path)))
        progress = self.load_progress
        progress.found(len(found))
        started = time.monotonic()

        def open_one(item: tuple[tuple[str, int], Path]) -> PartitionLog:
            parsed, path = item
            begun = time.monotonic()
            config = self.default_config
            if self._config_for is not None:
                config = self._config_for(parsed[0])
            plog = PartitionLog.open(
                path, parsed[0], parsed[1], config, read_partition_metadata(path),
                clock_ms=self._clock_ms,
                recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed),
                high_watermark=high_watermarks.get(parsed),
                had_clean_shutdown=clean,
            )
            recovered = plog.recovered_on_load_bytes > 0 or plog.truncated_on_load_bytes > 0
            if recovered:
                log.info(
                    "loaded %s from %s in %.0f ms (recovered after an unclean shutdown: "
                    "%d bytes CRC-checked; log end offset %d, recovery point %d, truncated "
                    "%d bytes)", path.name, dir, (time.monotonic() - begun) * 1000,
                    plog.recovered_on_load_bytes, plog.log_end_offset, plog.recovery_point,
                    plog.truncated_on_load_bytes,
                )
            progress.loaded(dir, plog.recovered_on_load_bytes, recovered)
            return plog

        if self.recovery_threads > 1 and len(found) > 1:
            with ThreadPoolExecutor(self.recovery_threads, "log-recovery") as pool:
                plogs = list(pool.map(open_one, found))
        else:
            plogs = [open_one(item) for item in found]
        for (parsed, _), plog in zip(found, plogs):
            self._adopt(parsed, plog, dir)
        progress.seconds += time.monotonic() - started
        progress.log_line(
            f"loaded the logs of {dir} in {(time.monotonic() - started) * 1000:.0f} ms "
            f"({'clean shutdown' if clean else 'unclean shutdown'}, "
            f"{self.recovery_threads} thread(s)):")
        if clean:
            marker.unlink()
            fsync_dir(dir)

    def _adopt(self, key: tuple[str, int], plog: PartitionLog, dir: Path) -> None:
        plog.on_io_error = self._on_io_error
        plog.flusher = self.flusher
        self._logs[key] = plog
        self._dir_of[key] = dir

    def adopt(self, topic: str, partition: int, plog: PartitionLog, dir: Path) -> None:
        """Take a log created elsewhere (storage/new_logs.py) into ``dir``'s."""
        self._adopt((topic, partition), plog, dir)

    def partition_counts(self) -> dict[Path, int]:
        counts = {dir: 0 for dir in self.log_dirs}
        for dir in self._dir_of.values():
            counts[dir] += 1
        return counts

    def attach_flusher(self, flusher: FlushScheduler) -> None:
        """Route flushes through a group-commit flusher (storage/flusher.py)."""
        self.flusher = flusher
        for plog in self._logs.values():
            plog.flusher = flusher

    # -- failures --------------------------------------------------------------------------
    def _on_io_error(self, plog: LocalLog, error: OSError) -> None:
        dir = self._dir_of.get((plog.topic, plog.partition))
        if dir is not None:
            self.mark_dir_offline(dir, error)

    def mark_dir_offline(self, dir: Path, error: BaseException) -> None:
        """Take ``dir`` out of service: its logs answer KAFKA_STORAGE_ERROR.

        Running out of file descriptors (EMFILE/ENFILE) is a process limit, not
        a failing disk: that operation fails, the dir stays online."""
        if isinstance(error, OSError) and error.errno in _PROCESS_LIMIT_ERRNOS:
            log.error("%s: %s (raise the open-files limit)", dir, error)
            return
        if dir in self.offline_dirs:
            return
        self.offline_dirs[dir] = str(error)
        affected = [key for key, d in self._dir_of.items() if d == dir]
        log.error(
            "Stopped serving replicas in dir %s: %s. Its partitions (%s) answer "
            "KAFKA_STORAGE_ERROR until the broker restarts with the dir repaired; %d "
            "other log dir(s) stay online.",
            dir, error, ", ".join(f"{t}-{p}" for t, p in sorted(affected)) or "none",
            len(self.online_dirs()),
        )
        for key in affected:
            plog = self._logs[key]
            plog.offline = True
            try:
                plog.close()
            except OSError:
                pass
        if self.on_dir_offline is not None:
            self.on_dir_offline(dir)

    def is_offline(self, plog: PartitionLog) -> bool:
        return plog.offline

    def write_refused(self, plog: PartitionLog) -> str | None:
        """Why a client write to ``plog`` is refused (its dir is below its
        free-space floor), or None."""
        dir = self._dir_of.get((plog.topic, plog.partition))
        return None if dir is None else self.free_space.refused(dir)

    def appended(self, plog: PartitionLog, size: int) -> None:
        dir = self._dir_of.get((plog.topic, plog.partition))
        if dir is not None:
            self.free_space.appended(dir, size)

    # -- logs ----------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig | None = None,
        directory_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """The existing log (its config updated if one is given), or a new one
        placed by ``directory_id`` (the dir the metadata assigns, None when
        unassigned), or an offline log: see Placement in the module docstring."""
        key = (topic, partition)
        plog = self._logs.get(key) or self._offline_logs.get(key)
        if plog is not None:
            if config is not None:
                plog.update_config(config)
            return plog
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError(f"no online log dir for {topic}-{partition}")
        assigned = [d for d in online if self.directory_ids.get(d) == directory_id]
        if directory_id is not None and not assigned and self.offline_dirs:
            offline = OfflinePartitionLog(topic, partition, config or self.default_config,
                                          topic_id)
            self._offline_logs[key] = offline
            return offline
        if directory_id is not None and not assigned:
            log.warning(
                "%s-%d is assigned to log dir %s, which is not one of this broker's log dirs "
                "(all online): creating it anew", topic, partition,
                kafka_uuid_string(directory_id),
            )
        if assigned or len(online) == 1:
            dir = assigned[0] if assigned else online[0]
        else:  # the dir with the fewest partitions (a walk over all: not on one dir)
            counts = self.partition_counts()
            dir = min(online, key=lambda d: counts[d])
        try:
            plog = PartitionLog.open(
                dir / log_dir_name(topic, partition),
                topic,
                partition,
                config or self.default_config,
                topic_id,
                clock_ms=self._clock_ms,
            )
            fsync_dir(dir)
        except OSError as e:
            self.mark_dir_offline(dir, e)
            if dir not in self.offline_dirs:
                raise
            return self.get_or_create(topic, partition, topic_id, config)
        self._adopt(key, plog, dir)
        return plog

    # -- future replicas (moves between dirs) --------------------------------------------

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
        if self._remover is None:
            self._remover = ThreadPoolExecutor(1, "log-remover")
        self._remover.submit(_remove_trees, [doomed])
        return plog

    def delete(self, topic: str, partition: int) -> None:
        self.delete_many([(topic, partition)])

    def delete_many(self, keys: Iterable[tuple[str, int]]) -> None:
        """Close each log, rename its dir to ``<topic>-<partition>.<uuid>-delete`` (a
        crash never resurrects it; start-up removes such dirs), one fsync per log dir
        for all, then remove the files in a background thread: thousands of
        partitions without a dir fsync and a tree removal each on the event loop."""
        renamed: dict[Path, list[Path]] = {}
        for topic, partition in keys:
            key = (topic, partition)
            self.drop_future(topic, partition)
            self._offline_logs.pop(key, None)
            plog = self._logs.pop(key, None)
            dir = self._dir_of.pop(key, None)
            if plog is None or dir is None:
                continue
            plog.close()
            if plog.offline:
                continue  # the dir is offline: its files stay until it is repaired
            doomed = dir / f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
            try:
                os.replace(plog.dir, doomed)
            except OSError as e:
                self.mark_dir_offline(dir, e)
                continue
            renamed.setdefault(dir, []).append(doomed)
        for dir, doomed_dirs in renamed.items():
            try:
                fsync_dir(dir)
            except OSError as e:
                self.mark_dir_offline(dir, e)
                continue
            if self._remover is None:
                self._remover = ThreadPoolExecutor(1, "log-remover")
            self._remover.submit(_remove_trees, doomed_dirs)

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def online_logs(self) -> list[PartitionLog]:
        return [plog for plog in self._logs.values() if not plog.offline]

    def dir_of(self, plog: PartitionLog) -> Path:
        return self._dir_of[(plog.topic, plog.partition)]

    def directory_id_of(self, plog: PartitionLog) -> uuid.UUID | None:
        """The ``directory.id`` of the dir holding ``plog``; None when offline."""
        dir = self._dir_of.get((plog.topic, plog.partition))
        if dir is None or plog.offline or self._logs.get((plog.topic, plog.partition)) is not plog:
            return None
        return self.directory_ids.get(dir)

    # -- background work (driven by broker/log_tasks.py) ---------------------------------
    def _each_online_log(self, action: Callable[[PartitionLog], object]) -> None:
        for plog in self.online_logs():
            try:
                action(plog)
            except KafkaStorageError:
                pass  # the dir was taken offline and logged

    def run_retention(self, now_ms: int | None = None) -> int:
        """One retention pass over every online log; returns segments deleted."""
        now_ms = self._clock_ms() if now_ms is None else now_ms
        deleted = [0]

        def retain(plog: PartitionLog) -> None:
            count = plog.delete_old_segments(now_ms)
            if count:
                log.info(
                    "deleted %d segment(s) of %s-%d by retention; log start offset is now %d",
                    count, plog.topic, plog.partition, plog.log_start_offset,
                )
            deleted[0] += count

        self._each_online_log(retain)
        self.delete_pending_files(now_ms)
        return deleted[0]

    def delete_pending_files(self, now_ms: int | None = None) -> None:
        """Unlink ``.deleted`` files whose ``file.delete.delay.ms`` has passed."""
        now_ms = self._clock_ms() if now_ms is None else now_ms
        self._each_online_log(lambda plog: plog.delete_pending_files(now_ms))

    def flush_due_logs(self, now_ms: int | None = None) -> int:
        """Flush the logs whose ``flush.ms`` has passed since their last flush (the
        ``log.flush.scheduler.interval.ms`` task); returns how many were asked."""
        now_ms = self._clock_ms() if now_ms is None else now_ms
        count = 0
        for plog in self.online_logs():
            since_ms = now_ms - plog.last_flush_ms
            # (since_ms < 0: the wall clock went back; flush rather than wait for it.)
            if plog.unflushed_messages() > 0 and not 0 <= since_ms < plog.config.flush_ms:
                count += 1
                if self.flusher is not None:
                    self.flusher.request_flush(plog)
                else:
                    self._each_online_log_one(plog, plog.flush)
        return count

    def _each_online_log_one(self, plog: PartitionLog, action: Callable[[], object]) -> None:
        try:
            action()
        except KafkaStorageError:
            pass

    def _snapshot(
        self, name: str, value: Callable[[PartitionLog], int | None]
    ) -> CheckpointWrites:
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.online_dirs()}
        for key, dir in self._dir_of.items():
            plog = self._logs[key]
            if dir in by_dir and not plog.offline:
                offset = value(plog)
                if offset is not None:
                    by_dir[dir][key] = offset
        return [(dir, dir / name, offsets) for dir, offsets in by_dir.items()]

    def snapshot_recovery_points(self) -> CheckpointWrites:
        return self._snapshot(RECOVERY_POINT_CHECKPOINT, lambda plog: plog.recovery_point)

    def snapshot_high_watermarks(self) -> CheckpointWrites:
        return self._snapshot(HIGH_WATERMARK_CHECKPOINT, lambda plog: plog.high_watermark)

    def snapshot_log_start_offsets(self) -> CheckpointWrites:
        return self._snapshot(
            LOG_START_OFFSET_CHECKPOINT,
            lambda plog: plog.log_start_offset
            if plog.log_start_offset > plog.first_segment_base_offset
            else None,
        )

    @staticmethod
    def write_checkpoints(writes: CheckpointWrites) -> list[tuple[Path, OSError]]:
        """Write each file atomically; returns the (dir, error) of failed writes."""
        errors = []
        for dir, path, offsets in writes:
            try:
                OffsetCheckpointFile(path).write(offsets)
            except OSError as e:
                errors.append((dir, e))
        return errors

    def _checkpoint_now(self, writes: CheckpointWrites) -> None:
        for dir, error in self.write_checkpoints(writes):
            self.mark_dir_offline(dir, error)

    def checkpoint_recovery_points(self) -> None:
        self._checkpoint_now(self.snapshot_recovery_points())

    def checkpoint_high_watermarks(self) -> None:
        self._checkpoint_now(self.snapshot_high_watermarks())

    def checkpoint_log_start_offsets(self) -> None:
        self._checkpoint_now(self.snapshot_log_start_offsets())

    def flush_all(self) -> None:
        self._each_online_log(lambda plog: plog.flush())

    def shutdown(self) -> None:
        """Flush every log, write the checkpoints, close the logs and mark each
        online dir cleanly shut down."""
        for topic, partition in list(self.futures):
            self.drop_future(topic, partition)  # an unfinished move starts over if asked again
        self.flush_all()
        self.checkpoint_recovery_points()
        self.checkpoint_high_watermarks()
        self.checkpoint_log_start_offsets()
        for plog in self._logs.values():
            try:
                plog.close()
            except OSError as e:
                self._on_io_error(plog, e)
        for dir in self.online_dirs():
            try:
                write_clean_shutdown_file(dir)
            except OSError as e:
                log.error("cannot write %s: %s", dir / CLEAN_SHUTDOWN_FILE, e)
        self._logs.clear()
        self._dir_of.clear()
        if self._remover is not None:  # what is left is removed at the next start-up
            self._remover.shutdown(wait=False, cancel_futures=True)


def _remove_trees(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
