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

``meta.properties`` and ``.kafka_cleanshutdown`` are written and read by
storage/log_dir.py, which documents their formats. Loading a dir at start-up
(the clean-shutdown marker, recovery) is storage/dir_load.py; the three offset
checkpoints are storage/log_checkpoints.py; moving a replica between dirs
(``-future`` logs) is storage/future_logs.py. On startup an existing
``meta.properties`` must name the same cluster and node; a missing
``directory.id`` is added. Directories ending in ``-stray`` are left alone;
``-delete`` and ``-future`` (a move a restart cut short) directories are
removed.

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
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.dir_load import DirLoad, load_dir
from odradek.storage.free_space import FreeSpaceFloor
from odradek.storage.future_logs import FutureLogs
from odradek.storage.load_progress import LoadProgress
from odradek.storage.log import (
    FlushScheduler,
    KafkaStorageError,
    LocalLog,
    PartitionLog,
    kafka_uuid_string,
    log_dir_name,
    wall_clock_ms,
)
from odradek.storage.log_checkpoints import (
    CheckpointWrites,
    log_start_offset_to_checkpoint,
    snapshot,
    write_checkpoints,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    InconsistentBrokerMetadata,
    check_meta_properties,
    parse_log_dir_name,
    read_properties,
    write_clean_shutdown_file,
)
from odradek.storage.offline_log import OfflinePartitionLog
from odradek.storage.open_files import SEGMENT_FILES

_PROCESS_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE)

# The log dir's own files and names (storage/log_dir.py), re-exported for callers.
__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "InconsistentBrokerMetadata",
    "LogManager",
    "parse_log_dir_name",
    "read_properties",
]

log = logging.getLogger(__name__)


class LogManager(FutureLogs):
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
                self.had_clean_shutdown[dir] = load_dir(
                    dir, DirLoad(self.default_config, self._config_for, self._clock_ms,
                                 self.recovery_threads, self.load_progress),
                    self._dir_of, self._adopt)
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
            with SEGMENT_FILES.lock:  # older segments' idle files make room for the next try
                shed = SEGMENT_FILES.shed_idle_locked()
            log.error("%s: %s (raise the open-files limit; closed %d idle segment files)",
                      dir, error, shed)
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
            self._remove_in_background(doomed_dirs)

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

    def _placed(self) -> list[tuple[tuple[str, int], Path, PartitionLog]]:
        return [(key, dir, self._logs[key]) for key, dir in self._dir_of.items()]

    def snapshot_recovery_points(self) -> CheckpointWrites:
        return snapshot(RECOVERY_POINT_CHECKPOINT, self.online_dirs(), self._placed(),
                        lambda plog: plog.recovery_point)

    def snapshot_high_watermarks(self) -> CheckpointWrites:
        return snapshot(HIGH_WATERMARK_CHECKPOINT, self.online_dirs(), self._placed(),
                        lambda plog: plog.high_watermark)

    def snapshot_log_start_offsets(self) -> CheckpointWrites:
        return snapshot(LOG_START_OFFSET_CHECKPOINT, self.online_dirs(), self._placed(),
                        log_start_offset_to_checkpoint)

    # storage/log_checkpoints.py; runs anywhere (the broker calls it on a worker thread)
    write_checkpoints = staticmethod(write_checkpoints)

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

