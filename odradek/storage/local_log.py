"""The local log: a partition's segment list, when it rolls, and what retention removes.

Kafka's ``LocalLog`` plus the retention half of ``UnifiedLog``. ``LocalLog`` owns
the sorted list of segments of one ``<topic>-<partition>`` directory (the last one
active) and the offsets that bound it (``log_start_offset``, ``high_watermark``,
``recovery_point``, ``log_end_offset``); ``PartitionLog`` (storage/log.py) is a
LocalLog with the append and read paths and truncation on top, and
``log_loader.py`` builds the segment list a log opens with.

* Roll (``_maybe_roll``, Kafka's rules): before an append the active segment
  rolls when it is non-empty and the append would take it past
  ``segment.bytes``; it is non-empty and ``segment.ms`` (a compacted log:
  ``max.compaction.lag.ms`` if smaller; minus this segment's random jitter from
  ``segment.jitter.ms``) has passed since its first batch's max timestamp (or
  its creation); either index is full; or the last offset being appended does
  not fit a 4-byte offset relative to the segment base. A roll snapshots the
  producer state and flushes the closed segment.
* Retention (``delete_old_segments``): closed segments wholly below the high
  watermark go when they are below the log start offset (DeleteRecords) or,
  with ``cleanup.policy`` containing ``delete``, by ``retention.ms`` /
  ``retention.bytes``. Files are renamed ``.deleted`` and unlinked after
  ``file.delete.delay.ms`` (``pending_deletes``); the active segment is never
  deleted.
* Flush bookkeeping: the recovery point moves only after an fsync of every
  segment that may hold data past it (inline, or through the group-commit
  flusher, storage/flusher.py).
* Failures: an OSError becomes KafkaStorageError after ``on_io_error`` (the log
  manager takes the dir offline); an offline log refuses appends and reads.

The cleaner swaps its cleaned segments in through ``replace_segments``
(storage/cleaner/swap.py) and producer state is rebuilt over the segment list
(storage/producer_log.py); both take a LocalLog, so neither imports log.py.

Imports: protocol.records (error codes), storage segment, leader_epoch,
producer_state, log_config. Not thread-safe: one event loop owns a log.

Invariant: ``log_start_offset <= high_watermark <= log_end_offset``.
"""

from __future__ import annotations

import os
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from odradek.protocol.records import OFFSET_OUT_OF_RANGE
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment

LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1
KAFKA_STORAGE_ERROR = 56


# How far the wall clock must go back before pending .deleted files are removed at once.
STEP_BACK_SLACK_MS = 60_000


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000



class OffsetOutOfRange(Exception):
    error_code = OFFSET_OUT_OF_RANGE


class KafkaStorageError(OSError):
    """The log's directory is offline (an I/O error took it out of service)."""

    error_code = KAFKA_STORAGE_ERROR


class FlushScheduler(Protocol):
    """What a log needs from the group-commit flusher (storage/flusher.py)."""

    def request_flush(self, log: LocalLog) -> object: ...


class LocalLog:
    """The segments of one topic-partition and the offsets that bound them; see the
    module docstring."""

    def __init__(
        self,
        dir: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        topic_id: uuid.UUID | None,
        clock_ms: Callable[[], int],
        segments: list[LogSegment],
        leader_epoch_cache: LeaderEpochFileCache | None = None,
    ) -> None:
        assert segments, "a log always has an active segment"
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id = topic_id
        self._clock_ms = clock_ms
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = segments[0].base_offset
        self.high_watermark = self.log_end_offset
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = clock_ms()
        self.truncated_on_load_bytes = 0
        self.recovered_on_load_bytes = 0  # CRC-checked by a recovery scan at load
        self.leader_epoch_cache = leader_epoch_cache or LeaderEpochFileCache.load(dir)
        # Set by the log manager: called with the error when a file operation
        # fails, before the error goes up as KafkaStorageError.
        self.on_io_error: Callable[[LocalLog, OSError], None] | None = None
        # Set by the log manager: group-commit flusher (see storage/flusher.py).
        # Without one, flushes run inline.
        self.flusher: FlushScheduler | None = None
        self.offline = False
        # Segments renamed ``.deleted`` and waiting for file.delete.delay.ms:
        # (due wall-clock ms, paths). The log manager unlinks them.
        self.pending_deletes: list[tuple[int, list[Path]]] = []
        # Idempotent/transactional producers (storage/producer_state.py); open()
        # loads it from the newest snapshot plus the log.
        self.producer_state = ProducerStateManager(dir)
        # Tiered storage (odradek/tiered), kept current by the RemoteLogManager: the
        # first offset in the remote tier (-1: nothing there) and the last one copied
        # (-1: none). Local retention of a remote-enabled log deletes only segments
        # at or below highest_remote_offset.
        self.remote_start_offset = -1
        self.highest_remote_offset = -1
        self.remote_view_loaded = False  # both above are known (after a restart: not yet)
        self.remote_deleted_before = -1  # a DeleteRecords offset (the remote tier's part)

    # -- properties ------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, oldest first."""
        return list(self._segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    def set_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    @property
    def start_offset_with_remote(self) -> int:
        """Kafka's log start offset: the remote tier's start when it holds data below
        the local log start offset (log_start_offset is the local one)."""
        if 0 <= self.remote_start_offset < self.log_start_offset:
            return min(max(self.remote_start_offset, self.remote_deleted_before),
                       self.log_start_offset)
        return self.log_start_offset

    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def first_segment_base_offset(self) -> int:
        return self._bases[0]

    # -- roll ----------------------------------------------------------------------------------------
    def _maybe_roll(
        self,
        messages_bytes: int,
        max_timestamp_in_messages: int,
        first_offset_in_messages: int,
        last_offset_in_messages: int,
        now_ms: int,
    ) -> LogSegment:
        segment = self._segments[-1]
        config = self.config
        non_empty = segment.size_bytes > 0
        if (
            (non_empty and segment.size_bytes > config.segment_bytes - messages_bytes)
            or (
                non_empty
                and segment.time_waited_for_roll_ms(now_ms, max_timestamp_in_messages)
                > _max_segment_ms(config) - segment.roll_jitter_ms
            )
            or segment.indexes_full()
            or not segment.can_hold_offset(last_offset_in_messages)
        ):
            return self.roll(first_offset_in_messages)
        return segment

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at
        ``new_base_offset`` (default: log_end_offset). An empty active segment is
        replaced instead of kept. As in Kafka, the closed segment is flushed
        (through the flusher when there is one, so the append does not wait),
        which moves the recovery point to the new segment's base."""
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        assert base >= self.log_end_offset, "a new segment cannot start below the log end"
        active = self._segments[-1]
        if active.size_bytes == 0:
            if active.base_offset == base:
                return active
            active.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            active.on_become_inactive()
        segment = self._new_segment(base)
        self._segments.append(segment)
        self._bases.append(base)
        self.log_end_offset = max(self.log_end_offset, base)
        self.producer_state.take_snapshot(base, self._bases[0])
        if self.recovery_point < base:
            if self.flusher is not None:
                self.flusher.request_flush(self)
            else:
                self.flush()
        return segment

    def _new_segment(self, base: int) -> LogSegment:
        """A new, empty, active segment at ``base`` with this log's index settings."""
        return LogSegment.create(
            self.dir,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=self._clock_ms(),
            segment_jitter_ms=self.config.segment_jitter_ms,
        )

    # -- flushing ------------------------------------------------------------------------------------
    def _flush_due(self, now_ms: int) -> bool:
        config = self.config
        return self.log_end_offset > self.recovery_point and (
            self.log_end_offset - self.recovery_point >= config.flush_messages
            or now_ms - self.last_flush_ms >= config.flush_ms
        )

    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def prepare_flush(self) -> tuple[int, list[int | Path]]:
        """(target offset, what to fsync: duplicated fds and paths) covering every
        segment that may hold data past the recovery point; the caller passes
        them to ``fsync_and_close`` (on any thread) and then calls
        ``complete_flush(target)``."""
        self._check_online()
        target = self.log_end_offset
        first = max(0, bisect_right(self._bases, self.recovery_point) - 1)
        fds: list[int | Path] = []
        try:
            for segment in self._segments[first:]:
                fds.extend(segment.sync_targets())
        except OSError as e:
            for fd in fds:
                if isinstance(fd, int):
                    os.close(fd)
            raise self._storage_error(e) from e
        return target, fds

    def complete_flush(self, target: int) -> None:
        self.recovery_point = max(self.recovery_point, min(target, self.log_end_offset))
        self.last_flush_ms = self._clock_ms()

    def flush(self) -> None:
        """fsync every segment that may hold data past the recovery point, inline."""
        target, fds = self.prepare_flush()
        try:
            fsync_and_close(fds)
        except OSError as e:
            raise self._storage_error(e) from e
        self.complete_flush(target)

    # -- failures ------------------------------------------------------------------------------------
    def _check_online(self) -> None:
        if self.offline:
            raise KafkaStorageError(
                f"the log dir of {self.topic}-{self.partition} is offline ({self.dir.parent})"
            )

    def _storage_error(self, error: OSError) -> KafkaStorageError:
        if isinstance(error, KafkaStorageError):
            return error
        if self.on_io_error is not None:
            self.on_io_error(self, error)
        return KafkaStorageError(
            f"I/O error on {self.topic}-{self.partition} in {self.dir}: {error}"
        )

    def _io(self, fn: Callable[..., object], *args: object) -> None:
        try:
            fn(*args)
        except OSError as e:
            raise self._storage_error(e) from e

    # -- the cleaner ---------------------------------------------------------------------------------
    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put ``new``, the log cleaner's copy of the contiguous closed segments
        ``old``, in their place (storage/cleaner/swap.py moved the files)."""
        i = next(i for i, s in enumerate(self._segments) if s is old[0])
        assert all(a is b for a, b in zip(self._segments[i : i + len(old)], old))
        assert i + len(old) < len(self._segments), "the active segment is never replaced"
        assert new.base_offset == old[0].base_offset
        self._segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]

    # -- retention -----------------------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance log_start_offset to ``offset`` (<= high watermark)
        and delete (asynchronously) the closed segments wholly below it. Returns
        the new log_start_offset."""
        self._check_online()
        if offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete records before {offset}: high watermark is {self.high_watermark}"
            )
        self._increment_log_start_offset(offset)
        self._delete_oldest_segments(lambda seg, nxt: nxt.base_offset <= self.log_start_offset)
        return self.log_start_offset

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._io(self.leader_epoch_cache.truncate_from_start, offset)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """One retention pass, Kafka's ``deleteOldSegments``: closed segments below
        the high watermark go when they lie wholly below the log start offset
        (DeleteRecords), or, with ``cleanup.policy`` containing ``delete``, when
        their largest timestamp is older than ``retention.ms`` or the log is over
        ``retention.bytes`` by at least their size. Deletion is asynchronous:
        files are renamed ``.deleted`` now and removed after
        ``file.delete.delay.ms`` (``pending_deletes``). The active segment is
        never deleted. Returns the number of segments deleted."""
        self._check_online()
        now_ms = self._clock_ms() if now_ms is None else now_ms
        config = self.config
        deleted = self._delete_oldest_segments(
            lambda seg, nxt: nxt.base_offset <= self.log_start_offset
        )
        if "delete" not in config.cleanup_policy.split(","):
            return deleted
        retention_ms, retention_bytes = config.retention_ms, config.retention_bytes
        remote = config.remote_storage_enable
        if remote:
            # The local tier keeps local.retention.* and deletes only what the remote
            # tier holds (the segment's last offset is at most highest_remote_offset).
            retention_ms = config.effective_local_retention_ms
            retention_bytes = config.effective_local_retention_bytes

        def copied(nxt: LogSegment) -> bool:
            return not remote or nxt.base_offset - 1 <= self.highest_remote_offset

        if retention_ms >= 0:
            deleted += self._delete_oldest_segments(
                lambda seg, nxt: copied(nxt) and now_ms - seg.largest_timestamp_ms() > retention_ms
            )
        if retention_bytes >= 0:
            excess = [self.size_bytes() - retention_bytes]

            def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                if copied(nxt) and excess[0] - seg.size_bytes >= 0:
                    excess[0] -= seg.size_bytes
                    return True
                return False

            deleted += self._delete_oldest_segments(over_size)
        return deleted

    def delete_oldest_segments(self, should_delete: Callable[[LogSegment], bool]) -> int:
        """Delete closed segments from the oldest while ``should_delete`` holds and
        they lie wholly below the high watermark. Returns the count."""
        return self._delete_oldest_segments(lambda seg, nxt: should_delete(seg))

    def _delete_oldest_segments(
        self, predicate: Callable[[LogSegment, LogSegment], bool]
    ) -> int:
        deleted = 0
        while len(self._segments) > 1:
            segment, following = self._segments[0], self._segments[1]
            if following.base_offset > self.high_watermark or not predicate(segment, following):
                break
            self._segments.pop(0)
            self._bases.pop(0)
            self._increment_log_start_offset(following.base_offset)
            try:
                paths = segment.rename_to_deleted()
            except OSError as e:
                raise self._storage_error(e) from e
            self.pending_deletes.append((self._clock_ms() + self.config.file_delete_delay_ms, paths))
            deleted += 1
        return deleted

    def delete_pending_files(self, now_ms: int | None = None) -> int:
        """Unlink the ``.deleted`` files whose delay has passed; returns how many
        segments were finished."""
        now_ms = self._clock_ms() if now_ms is None else now_ms
        done = 0
        delay_ms = self.config.file_delete_delay_ms
        # A file is due at its time, or at once if the wall clock went back more
        # than a minute before it was renamed (else a step back would keep it, and
        # its disk space, for as long as the step). The minute's slack: a caller's
        # `now_ms` may be read before a rename of the same pass (run_retention), and
        # a file renamed just after it must still wait its whole delay.
        while self.pending_deletes and not (
                now_ms < self.pending_deletes[0][0] <= now_ms + delay_ms + STEP_BACK_SLACK_MS):
            _, paths = self.pending_deletes.pop(0)
            for path in paths:
                path.unlink(missing_ok=True)
            done += 1
        return done


def fsync_and_close(fds: list[int | Path]) -> None:
    """fsync each fd and close them all; a path is opened read-only, fsynced and
    closed (passed over if it no longer exists). The first error is raised at
    the end."""
    error: OSError | None = None
    for fd in fds:
        if isinstance(fd, Path):
            if error is None:
                try:
                    _fsync_path(fd)
                except OSError as e:
                    error = e
            continue
        try:
            if error is None:
                os.fsync(fd)
        except OSError as e:
            error = e
        finally:
            os.close(fd)
    if error is not None:
        raise error


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # renamed .deleted or removed since: nothing left to make durable here
    try:
        os.fsync(fd)
    finally:
        os.close(fd)




def _max_segment_ms(config: LogConfig) -> int:
    """Kafka's ``maxSegmentMs``: a compacted log also rolls by
    ``max.compaction.lag.ms``, since the cleaner never cleans the active segment."""
    if "compact" in config.cleanup_policy.split(",") and config.max_compaction_lag_ms > 0:
        return min(config.segment_ms, config.max_compaction_lag_ms)
    return config.segment_ms
