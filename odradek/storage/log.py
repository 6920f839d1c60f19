"""A partition's log: one directory of segments in Kafka's on-disk layout.

Directory layout
----------------
``<log.dir>/<topic>-<partition>/``::

    00000000000000000000.log        segments, named by 20-digit base offset
    00000000000000000000.index      (formats: storage/segment.py, storage/index.py)
    00000000000000000000.timeindex
    00000000000000012345.log ...
    partition.metadata

``partition.metadata`` is Kafka's text file, ASCII, two lines::

    version: 0
    topic_id: <topic id as Kafka prints a Uuid: 16 bytes, base64url, no padding>

Theory of operation
-------------------
* Segments are kept sorted by base offset; the last one is active and takes
  every append. ``log_end_offset`` is the active segment's next offset.
* Before an append the active segment rolls (a new segment based at the first
  offset being appended) when, as in Kafka: it is non-empty and the append
  would take it past ``segment.bytes``; it is non-empty and ``segment.ms``
  (minus this segment's random jitter from ``segment.jitter.ms``) has passed
  since its first batch's max timestamp (or since its creation if that batch
  has none); either index is full; or the last offset being appended does not
  fit a 4-byte offset relative to the segment base.
* Reads come from one segment per call, like Kafka's, in whole batches.
* On open, the trailing segments (the last one, plus any empty ones before it
  and the last non-empty one) are recovered: every batch is CRC-checked, a torn
  or corrupt tail is truncated at the last valid batch and the indexes rebuilt.
  Older segments only get their indexes rebuilt if a file is missing or fails a
  sanity check. ``recovery_point`` and ``log_start_offset`` are not yet
  checkpointed by this module (their owners persist them).
* Not thread-safe: one event loop (or one caller at a time) owns a log.

Invariant: ``log_start_offset <= high_watermark <= log_end_offset``.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from odradek.protocol.records import (
    OFFSET_OUT_OF_RANGE,
    BatchHeader,
    assign_offsets,
)
from odradek.storage import producer_log
from odradek.storage.cleaner.swap import complete_interrupted_swaps
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

_log = logging.getLogger(__name__)
PARTITION_METADATA_FILE = "partition.metadata"
LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1
_ORPHAN_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DELETED_SUFFIX = DELETED_SUFFIX
KAFKA_STORAGE_ERROR = 56


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    padded = text.strip() + "=" * (-len(text.strip()) % 4)
    raw = base64.urlsafe_b64decode(padded)
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class OffsetOutOfRange(Exception):
    error_code = OFFSET_OUT_OF_RANGE


class KafkaStorageError(OSError):
    """The log's directory is offline (an I/O error took it out of service)."""

    error_code = KAFKA_STORAGE_ERROR


class FlushScheduler(Protocol):
    """What a log needs from the group-commit flusher (storage/flusher.py)."""

    def request_flush(self, log: PartitionLog) -> object: ...


class InconsistentTopicId(Exception):
    """partition.metadata names another topic id than the one the caller expects."""


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime
    max_timestamp: int
    log_start_offset: int
    offset_of_max_timestamp: int = -1
    bytes_appended: int = 0
    # The flush policy asks for an fsync the caller must wait for (given to the
    # flusher, which groups it with others); only set when the log has a flusher.
    flush_needed: bool = False


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    fetch_offset: int
    records: bytes  # whole batches, file bytes; may be b""
    segment_base_offset: int = -1  # where the bytes came from (for sendfile), -1 if none
    position: int = -1  # byte position of records[0] inside that segment's .log


def write_partition_metadata(dir: Path, topic_id: uuid.UUID) -> None:
    text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
    tmp = dir / (PARTITION_METADATA_FILE + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dir / PARTITION_METADATA_FILE)


def read_partition_metadata(dir: Path) -> uuid.UUID | None:
    path = dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise ValueError(f"malformed {path}: {text!r}")
    return parse_kafka_uuid(fields["topic_id"])


class PartitionLog:
    """Segments of one topic-partition; see the module docstring."""

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
        self.leader_epoch_cache = leader_epoch_cache or LeaderEpochFileCache.load(dir)
        # Set by the log manager: called with the error when a file operation
        # fails, before the error goes up as KafkaStorageError.
        self.on_io_error: Callable[[PartitionLog, OSError], None] | None = None
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

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        dir: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        topic_id: uuid.UUID | None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        *,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
    ) -> PartitionLog:
        """Open (creating if needed) the log in ``dir`` and recover what needs it.

        ``clock_ms`` returns wall-clock milliseconds (tests pass a fake clock).
        The checkpointed ``recovery_point``, ``log_start_offset`` and
        ``high_watermark`` come from the log dir's checkpoint files. After a
        clean shutdown nothing is recovered (indexes are still sanity-checked
        and rebuilt if missing or corrupt); otherwise every segment that may
        hold offsets at or past ``recovery_point`` is CRC-checked batch by
        batch, and the first bad batch ends the log: the rest of that segment
        and every later segment are removed. ``recovery_point=None`` (no
        checkpoint known) recovers the trailing segments only.
        """
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        stored_id = read_partition_metadata(dir)
        if stored_id is not None and topic_id is not None and stored_id != topic_id:
            raise InconsistentTopicId(
                f"{dir}: partition.metadata has topic id {kafka_uuid_string(stored_id)}, "
                f"expected {kafka_uuid_string(topic_id)}"
            )
        if stored_id is None and topic_id is not None:
            write_partition_metadata(dir, topic_id)
        now_ms = clock_ms()
        for action in complete_interrupted_swaps(dir):
            _log.info("%s: %s", dir, action)
        bases = _segment_bases(dir)
        epoch_cache = LeaderEpochFileCache.load(dir)
        recover_from = _first_segment_to_recover(dir, bases, recovery_point, had_clean_shutdown)
        segments: list[LogSegment] = []
        truncated = 0
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            recover = i >= recover_from
            if recover and i == recover_from:
                # The scan re-learns the epochs of everything it reads.
                epoch_cache.truncate_from_end(base)
            segment = LogSegment.open(
                dir,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
                active=active,
                recover=recover,
                segment_jitter_ms=config.segment_jitter_ms,
                on_batch=_epoch_learner(epoch_cache) if recover else None,
            )
            truncated += segment.recovery_truncated_bytes
            segments.append(segment)
            if segment.recovery_truncated_bytes and not active:
                # Kafka's rule: nothing after a corrupt batch can be trusted.
                for later in bases[i + 1 :]:
                    _delete_segment_files(dir, later)
                if not segment.active:
                    segment.offset_index.make_writable(config.segment_index_bytes)
                    segment.time_index.make_writable(config.segment_index_bytes)
                    segment.active = True
                break
        if not segments:
            segments.append(
                LogSegment.create(
                    dir,
                    0 if log_start_offset is None else max(0, log_start_offset),
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_bytes=config.segment_index_bytes,
                    now_ms=now_ms,
                    segment_jitter_ms=config.segment_jitter_ms,
                )
            )
        log = cls(dir, topic, partition, config, topic_id, clock_ms, segments, epoch_cache)
        log.truncated_on_load_bytes = truncated
        leo = log.log_end_offset
        if log_start_offset is not None:
            log.log_start_offset = min(max(log_start_offset, segments[0].base_offset), leo)
        if had_clean_shutdown and truncated == 0:
            log.recovery_point = leo
        elif recovery_point is not None:
            log.recovery_point = min(max(recovery_point, 0), leo)
        else:
            log.recovery_point = segments[recover_from].base_offset if recover_from < len(
                segments) else leo
        if high_watermark is not None:
            log.set_high_watermark(high_watermark)
        epoch_cache.truncate_from_end(leo)
        if not epoch_cache.entries and leo > log.log_start_offset:
            first = segments[0].first_batch_header()
            if first is not None and first.partition_leader_epoch >= 0:
                epoch_cache.assign(first.partition_leader_epoch, log.log_start_offset)
        epoch_cache.truncate_from_start(log.log_start_offset)
        producer_log.load(log, had_clean_shutdown and truncated == 0)
        return log

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

    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        first_unstable = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None or first_unstable > hw else first_unstable

    @property
    def first_segment_base_offset(self) -> int:
        return self._bases[0]

    def assign_leader_epoch(self, leader_epoch: int) -> None:
        """Becoming leader in ``leader_epoch``: it starts at the log end offset
        (Kafka's ``Partition.makeLeader``)."""
        if leader_epoch > self.leader_epoch_cache.latest_epoch():
            self._io(self.leader_epoch_cache.assign, leader_epoch, self.log_end_offset)

    # -- appends ---------------------------------------------------------------------------------
    def append_as_leader(
        self, records: bytearray, headers: list[BatchHeader], leader_epoch: int
    ) -> AppendInfo:
        """Assign offsets from log_end_offset (patching ``records`` and ``headers``
        in place), apply LogAppendTime if configured, write, index, roll, flush."""
        if not headers:
            raise ValueError("nothing to append")
        self._check_online()
        now_ms = self._clock_ms()
        log_append_time_ms = now_ms if self.config.log_append_time else None
        first_offset = self.log_end_offset
        assign_offsets(records, headers, first_offset, leader_epoch, log_append_time_ms)
        if leader_epoch > self.leader_epoch_cache.latest_epoch():
            self._io(self.leader_epoch_cache.assign, leader_epoch, first_offset)
        return self._append(
            records, headers, now_ms, -1 if log_append_time_ms is None else log_append_time_ms
        )

    def append_as_follower(
        self, records: bytes | bytearray, headers: list[BatchHeader]
    ) -> AppendInfo:
        """Append batches whose offsets the leader assigned (replication, tiered
        restore); they must start at or after log_end_offset and increase."""
        if not headers:
            raise ValueError("nothing to append")
        self._check_online()
        previous_next = self.log_end_offset
        cache = self.leader_epoch_cache
        for header in headers:
            if header.base_offset < previous_next or header.last_offset_delta < 0:
                raise ValueError(
                    f"batch at offset {header.base_offset} does not follow offset {previous_next - 1}"
                )
            previous_next = header.next_offset
            if header.partition_leader_epoch > cache.latest_epoch():
                self._io(cache.assign, header.partition_leader_epoch, header.base_offset)
        return self._append(records, headers, self._clock_ms(), -1)

    def _append(
        self,
        records: bytes | bytearray,
        headers: list[BatchHeader],
        now_ms: int,
        log_append_time_ms: int,
    ) -> AppendInfo:
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = -1
        for header in headers:
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = header.last_offset
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        try:
            segment = self._maybe_roll(
                len(records), max_timestamp, first_offset, last_offset, now_ms
            )
            segment.append(records, headers)
            if headers[0].producer_id >= 0 or len(headers) > 1:
                producer_log.apply_appended(self, segment, records, headers)
        except OSError as e:
            raise self._storage_error(e) from e
        self.log_end_offset = headers[-1].next_offset
        flush_needed = self._flush_due(now_ms)
        if flush_needed and self.flusher is None:
            self.flush()
            flush_needed = False
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            log_append_time_ms=log_append_time_ms,
            max_timestamp=max_timestamp,
            log_start_offset=self.log_start_offset,
            offset_of_max_timestamp=offset_of_max_timestamp,
            bytes_appended=len(records),
            flush_needed=flush_needed,
        )

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
        segment = LogSegment.create(
            self.dir,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=self._clock_ms(),
            segment_jitter_ms=self.config.segment_jitter_ms,
        )
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

    # -- flushing ------------------------------------------------------------------------------------
    def _flush_due(self, now_ms: int) -> bool:
        config = self.config
        return self.log_end_offset > self.recovery_point and (
            self.log_end_offset - self.recovery_point >= config.flush_messages
            or now_ms - self.last_flush_ms >= config.flush_ms
        )

    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def prepare_flush(self) -> tuple[int, list[int]]:
        """(target offset, duplicated fds to fsync) covering every segment that may
        hold data past the recovery point; the caller fsyncs and closes the fds
        (on any thread) and then calls ``complete_flush(target)``."""
        self._check_online()
        target = self.log_end_offset
        first = max(0, bisect_right(self._bases, self.recovery_point) - 1)
        fds: list[int] = []
        try:
            for segment in self._segments[first:]:
                fds.extend(segment.dup_fds())
        except OSError as e:
            for fd in fds:
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

    # -- reads ---------------------------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int = LONG_MAX,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the batch holding ``fetch_offset``, from one segment,
        at most ``max_bytes`` (or the first batch alone if bigger and
        ``min_one_batch``), stopping before the batch that holds ``max_offset``
        (the high watermark or last stable offset)."""
        self._check_online()
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} is out of range [{self.log_start_offset}, "
                f"{self.log_end_offset}] for {self.topic}-{self.partition}"
            )
        if fetch_offset == self.log_end_offset or fetch_offset >= max_offset:
            return FetchDataInfo(fetch_offset, b"")
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        while i < len(self._segments):
            segment = self._segments[i]
            try:
                found = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)
            except OSError as e:
                raise self._storage_error(e) from e
            if found is not None:
                position, data = found
                return FetchDataInfo(fetch_offset, data, segment.base_offset, position)
            i += 1
        return FetchDataInfo(fetch_offset, b"")

    def collect_aborted_txns(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_offset), from the
        ``.txnindex`` of the segment holding ``fetch_offset`` and every later one
        below the last stable offset (a marker may sit segments after its data)."""
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        lso = self.last_stable_offset
        out: list[AbortedTxn] = []
        for segment in self._segments[i:]:
            if segment.base_offset > lso:
                break
            out.extend(segment.txn_index.collect(fetch_offset, upper_offset))
        return out

    def offset_for_timestamp(
        self, timestamp_ms: int, max_offset: int = LONG_MAX
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``
        at or after log_start_offset and below ``max_offset``; None if there is none.
        Exact per record: only the answering batch is decoded."""
        for segment in self._segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found if found[0] < max_offset else None
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record holding the log's largest
        timestamp (ListOffsets -3, KIP-734); (-1, -1) if the log is empty.
        Segments are compared by their max timestamps; the winning batch is
        decoded to find the exact record."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.size_bytes and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return -1, NO_TIMESTAMP
        return best.max_timestamp_record()

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put ``new``, the log cleaner's copy of the contiguous closed segments
        ``old``, in their place (storage/cleaner/swap.py moved the files)."""
        i = next(i for i, s in enumerate(self._segments) if s is old[0])
        assert all(a is b for a, b in zip(self._segments[i : i + len(old)], old))
        assert i + len(old) < len(self._segments), "the active segment is never replaced"
        assert new.base_offset == old[0].base_offset
        self._segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]

    # -- truncation and deletion ------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or after ``offset`` (a follower diverged). Cuts at
        batch boundaries, so log_end_offset may end below ``offset`` if it falls
        inside a batch. Returns True if anything was removed."""
        if offset >= self.log_end_offset:
            return False
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        segment = self._segments[-1]
        if not segment.active:
            segment.offset_index.make_writable(self.config.segment_index_bytes)
            segment.time_index.make_writable(self.config.segment_index_bytes)
            segment.active = True
        segment.truncate_to(offset)
        self.log_end_offset = segment.next_offset
        self._clamp_offsets()
        producer_log.rebuild_after_truncation(self)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset``."""
        for segment in self._segments:
            segment.delete()
        segment = LogSegment.create(
            self.dir,
            offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            now_ms=self._clock_ms(),
            segment_jitter_ms=self.config.segment_jitter_ms,
        )
        self._segments = [segment]
        self._bases = [offset]
        self.log_end_offset = offset
        self.log_start_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.delete_all_snapshots()
        self.producer_state = ProducerStateManager(self.dir)

    def _clamp_offsets(self) -> None:
        leo = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        self.leader_epoch_cache.truncate_from_end(leo)

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
        if "delete" in config.cleanup_policy.split(","):
            if config.retention_ms >= 0:
                deleted += self._delete_oldest_segments(
                    lambda seg, nxt: now_ms - seg.largest_timestamp_ms() > config.retention_ms
                )
            if config.retention_bytes >= 0:
                excess = [self.size_bytes() - config.retention_bytes]

                def over_size(seg: LogSegment, nxt: LogSegment) -> bool:
                    if excess[0] - seg.size_bytes >= 0:
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
        while self.pending_deletes and self.pending_deletes[0][0] <= now_ms:
            _, paths = self.pending_deletes.pop(0)
            for path in paths:
                path.unlink(missing_ok=True)
            done += 1
        return done

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        if self.offline:
            for segment in self._segments:
                segment.close_files()
            return
        try:  # an optimisation only: without it the next open replays the log
            self.producer_state.take_snapshot(self.log_end_offset, self._bases[0])
        except OSError:
            pass
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.delete()
        self.pending_deletes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, end={self.log_end_offset}, segments={len(self._segments)})"
        )


def fsync_and_close(fds: list[int]) -> None:
    """fsync each fd and close them all (the first error is raised at the end)."""
    error: OSError | None = None
    for fd in fds:
        try:
            if error is None:
                os.fsync(fd)
        except OSError as e:
            error = e
        finally:
            os.close(fd)
    if error is not None:
        raise error


def _first_segment_to_recover(
    dir: Path, bases: list[int], recovery_point: int | None, had_clean_shutdown: bool
) -> int:
    """Index of the first segment to CRC-check on open (len(bases): none)."""
    if had_clean_shutdown or not bases:
        return len(bases)
    if recovery_point is not None:
        return max(0, bisect_right(bases, recovery_point) - 1)
    # No checkpoint: recover back to the last non-empty segment (a crash just
    # after a roll leaves the previous segment's tail as unflushed as the new one).
    i = len(bases) - 1
    while i > 0 and (dir / segment_file_name(bases[i], LOG_SUFFIX)).stat().st_size == 0:
        i -= 1
    return i


def _max_segment_ms(config: LogConfig) -> int:
    """Kafka's ``maxSegmentMs``: a compacted log also rolls by
    ``max.compaction.lag.ms``, since the cleaner never cleans the active segment."""
    if "compact" in config.cleanup_policy.split(",") and config.max_compaction_lag_ms > 0:
        return min(config.segment_ms, config.max_compaction_lag_ms)
    return config.segment_ms


def _epoch_learner(cache: LeaderEpochFileCache) -> Callable[[BatchHeader], None]:
    def learn(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch > cache.latest_epoch():
            cache.assign(epoch, header.base_offset)

    return learn


def _delete_segment_files(dir: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        (dir / segment_file_name(base, suffix)).unlink(missing_ok=True)


def _segment_bases(dir: Path) -> list[int]:
    """Base offsets of the segments in ``dir``; removes orphaned index files and
    leftovers of interrupted deletions."""
    bases: set[int] = set()
    orphans: list[Path] = []
    for entry in os.scandir(dir):
        name = entry.name
        if name.endswith(_DELETED_SUFFIX):
            os.unlink(entry.path)
            continue
        stem, _, suffix = name.partition(".")
        if len(stem) != 20 or not stem.isdigit():
            continue
        if "." + suffix == LOG_SUFFIX:
            bases.add(int(stem))
        elif "." + suffix in _ORPHAN_SUFFIXES:
            orphans.append(Path(entry.path))
    for path in orphans:
        if int(path.name[:20]) not in bases:
            path.unlink(missing_ok=True)
    return sorted(bases)
