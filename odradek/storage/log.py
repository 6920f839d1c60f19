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
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import (
    OFFSET_OUT_OF_RANGE,
    BatchHeader,
    assign_offsets,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.segment import LOG_SUFFIX, LogSegment

PARTITION_METADATA_FILE = "partition.metadata"
LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1
_ORPHAN_SUFFIXES = (".index", ".timeindex")
_DELETED_SUFFIX = ".deleted"


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
    ) -> PartitionLog:
        """Open (creating if needed) the log in ``dir``; recovers the tail.

        ``clock_ms`` is a callable returning wall-clock milliseconds (tests pass
        a fake clock).
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
        bases = _segment_bases(dir)
        segments: list[LogSegment] = []
        truncated = 0
        # Recover back to the last non-empty segment (a crash just after a roll
        # leaves the previous segment's tail as unflushed as the new one).
        recover_from = len(bases) - 1
        while (
            recover_from > 0
            and (dir / f"{bases[recover_from]:020d}{LOG_SUFFIX}").stat().st_size == 0
        ):
            recover_from -= 1
        for i, base in enumerate(bases):
            active = i == len(bases) - 1
            segment = LogSegment.open(
                dir,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
                active=active,
                recover=i >= recover_from,
                segment_jitter_ms=config.segment_jitter_ms,
            )
            truncated += segment.recovery_truncated_bytes
            segments.append(segment)
        if not segments:
            segments.append(
                LogSegment.create(
                    dir,
                    0,
                    index_interval_bytes=config.index_interval_bytes,
                    max_index_bytes=config.segment_index_bytes,
                    now_ms=now_ms,
                    segment_jitter_ms=config.segment_jitter_ms,
                )
            )
        log = cls(dir, topic, partition, config, topic_id, clock_ms, segments)
        log.truncated_on_load_bytes = truncated
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

    # -- appends ---------------------------------------------------------------------------------
    def append_as_leader(
        self, records: bytearray, headers: list[BatchHeader], leader_epoch: int
    ) -> AppendInfo:
        """Assign offsets from log_end_offset (patching ``records`` and ``headers``
        in place), apply LogAppendTime if configured, write, index, roll, flush."""
        if not headers:
            raise ValueError("nothing to append")
        now_ms = self._clock_ms()
        log_append_time_ms = now_ms if self.config.log_append_time else None
        first_offset = self.log_end_offset
        assign_offsets(records, headers, first_offset, leader_epoch, log_append_time_ms)
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
        previous_next = self.log_end_offset
        for header in headers:
            if header.base_offset < previous_next or header.last_offset_delta < 0:
                raise ValueError(
                    f"batch at offset {header.base_offset} does not follow offset {previous_next - 1}"
                )
            previous_next = header.next_offset
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
        segment = self._maybe_roll(len(records), max_timestamp, first_offset, last_offset, now_ms)
        segment.append(records, headers)
        self.log_end_offset = headers[-1].next_offset
        self._maybe_flush(now_ms)
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            log_append_time_ms=log_append_time_ms,
            max_timestamp=max_timestamp,
            log_start_offset=self.log_start_offset,
            offset_of_max_timestamp=offset_of_max_timestamp,
            bytes_appended=len(records),
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
                > config.segment_ms - segment.roll_jitter_ms
            )
            or segment.indexes_full()
            or not segment.can_hold_offset(last_offset_in_messages)
        ):
            return self.roll(first_offset_in_messages)
        return segment

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Close the active segment for appends and start a new one at
        ``new_base_offset`` (default: log_end_offset). An empty active segment is
        replaced instead of kept."""
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
        return segment

    # -- flushing ------------------------------------------------------------------------------------
    def _maybe_flush(self, now_ms: int) -> None:
        config = self.config
        if (
            self.log_end_offset - self.recovery_point >= config.flush_messages
            or now_ms - self.last_flush_ms >= config.flush_ms
        ):
            self.flush()

    def flush(self) -> None:
        """fsync every segment that may hold data past the recovery point."""
        first = max(0, bisect_right(self._bases, self.recovery_point) - 1)
        for segment in self._segments[first:]:
            segment.flush()
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = self._clock_ms()

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
            found = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)
            if found is not None:
                position, data = found
                return FetchDataInfo(fetch_offset, data, segment.base_offset, position)
            i += 1
        return FetchDataInfo(fetch_offset, b"")

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

    def _clamp_offsets(self) -> None:
        leo = self.log_end_offset
        self.log_start_offset = min(self.log_start_offset, leo)
        self.high_watermark = min(self.high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance log_start_offset to ``offset`` (<= high watermark)
        and delete the segments wholly below it. Returns the new log_start_offset."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete records before {offset}: high watermark is {self.high_watermark}"
            )
        self.log_start_offset = max(self.log_start_offset, offset)
        self._delete_segments_below_log_start()
        return self.log_start_offset

    def _delete_segments_below_log_start(self) -> None:
        if self.log_start_offset >= self.log_end_offset and self._segments[-1].size_bytes:
            self.roll()
        while len(self._segments) > 1 and self._segments[1].base_offset <= self.log_start_offset:
            self._segments.pop(0).delete()
            self._bases.pop(0)

    def delete_oldest_segments(self, should_delete: Callable[[LogSegment], bool]) -> int:
        """Retention: delete segments from the oldest while ``should_delete`` holds
        and they lie wholly below the high watermark; rolls first if the active
        segment itself must go. Advances log_start_offset. Returns the count."""
        deleted = 0
        while self._segments:
            segment = self._segments[0]
            if segment.size_bytes == 0 or segment.next_offset > self.high_watermark:
                break
            if not should_delete(segment):
                break
            if len(self._segments) == 1:
                self.roll()
            self._segments.pop(0).delete()
            self._bases.pop(0)
            deleted += 1
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        return deleted

    # -- lifecycle ---------------------------------------------------------------------------------------
    def close(self) -> None:
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        for segment in self._segments:
            segment.delete()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, end={self.log_end_offset}, segments={len(self._segments)})"
        )


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
