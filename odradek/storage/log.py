"""A partition's log: one directory of segments in Kafka's on-disk layout.

Directory layout
----------------
``<log.dir>/<topic>-<partition>/``::

    00000000000000000000.log        segments, named by 20-digit base offset
    00000000000000000000.index      (formats: storage/segment.py, storage/index.py)
    00000000000000000000.timeindex
    00000000000000012345.log ...
    partition.metadata

``partition.metadata``: Kafka's text file (format: storage/log_loader.py).

Theory of operation
-------------------
* ``PartitionLog`` is a LocalLog (storage/local_log.py: the sorted segment list,
  the last one active, when it rolls, what retention deletes, flush
  bookkeeping, I/O failures) with the append and read paths, truncation and
  opening on top. ``log_end_offset`` is the active segment's next offset.
* Appends assign offsets (as leader) or check them (as follower), learn leader
  epochs, roll when the active segment asks for it, write, and hand every batch
  with a producer id to the producer state (storage/producer_log.py).
* Reads come from one segment per call, like Kafka's, in whole batches.
* ``open`` takes the segments, recovered where needed, from
  storage/log_loader.py (Kafka's LogLoader), then rebuilds the producer state.
  ``recovery_point`` and ``log_start_offset`` are not checkpointed by this
  module (their owners, the log manager's checkpoint files, persist them).
* Not thread-safe: one event loop (or one caller at a time) owns a log.

Invariant: ``log_start_offset <= high_watermark <= log_end_offset``.
"""

from __future__ import annotations

import shutil
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import BatchHeader, assign_offsets
from odradek.storage import producer_log
from odradek.storage.file_slice import FileSlice
from odradek.storage.leader_epoch import write_deferred_together
from odradek.storage.local_log import (
    KAFKA_STORAGE_ERROR,
    LONG_MAX,
    NO_TIMESTAMP,
    FlushScheduler,
    KafkaStorageError,
    LocalLog,
    OffsetOutOfRange,
    fsync_and_close,
    wall_clock_ms,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.log_loader import (
    PARTITION_METADATA_FILE,
    InconsistentTopicId,
    kafka_uuid_string,
    load_segments,
    log_dir_name,
    parse_kafka_uuid,
    read_partition_metadata,
    write_partition_metadata,
)
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn

# Re-exported: callers import the log's errors and helpers from here.
__all__ = [
    "KAFKA_STORAGE_ERROR",
    "LONG_MAX",
    "NO_TIMESTAMP",
    "PARTITION_METADATA_FILE",
    "AppendInfo",
    "FetchDataInfo",
    "FlushScheduler",
    "InconsistentTopicId",
    "KafkaStorageError",
    "LocalLog",
    "OffsetOutOfRange",
    "PartitionLog",
    "fsync_and_close",
    "kafka_uuid_string",
    "log_dir_name",
    "parse_kafka_uuid",
    "read_partition_metadata",
    "wall_clock_ms",
    "write_partition_metadata",
]


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


class PartitionLog(LocalLog):
    """Segments of one topic-partition; see the module docstring."""

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
        loaded = load_segments(
            Path(dir),
            config,
            topic_id,
            clock_ms(),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
        )
        log = cls(Path(dir), topic, partition, config, topic_id, clock_ms, loaded.segments,
                  loaded.leader_epoch_cache)
        log.truncated_on_load_bytes = loaded.truncated_bytes
        log.recovered_on_load_bytes = loaded.recovered_bytes
        log.log_start_offset = loaded.log_start_offset
        log.recovery_point = loaded.recovery_point
        if high_watermark is not None:
            log.set_high_watermark(high_watermark)
        producer_log.load(log, loaded.clean)
        return log

    # -- properties ------------------------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        first_unstable = self.producer_state.first_unstable_offset()
        hw = self.high_watermark
        return hw if first_unstable is None or first_unstable > hw else first_unstable

    def assign_leader_epoch(self, leader_epoch: int, defer_write: bool = False) -> bool:
        """Becoming leader in ``leader_epoch``: it starts at the log end offset
        (Kafka's ``Partition.makeLeader``). With ``defer_write`` the checkpoint
        file is not written here: the caller passes this log to
        `write_leader_epochs` before anything is appended in the epoch. True
        if the epoch was new."""
        cache = self.leader_epoch_cache
        if leader_epoch <= cache.latest_epoch():
            return False
        if defer_write:
            cache.defer_writes()
        self._io(cache.assign, leader_epoch, self.log_end_offset)
        return True

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
        self, records: bytes | bytearray | memoryview, headers: list[BatchHeader]
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
        records: bytes | bytearray | memoryview,
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
        base, position, data = self._read(fetch_offset, max_bytes, max_offset, min_one_batch,
                                          zero_copy=False)
        assert not isinstance(data, FileSlice)
        return FetchDataInfo(fetch_offset, data, base, position)

    def read_to_send(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int = LONG_MAX,
        min_one_batch: bool = True,
    ) -> bytes | FileSlice:
        """The records `read` would give, for a connection to send: a large range
        comes as a `FileSlice` (sent with sendfile, file_slice.py), not bytes."""
        return self._read(fetch_offset, max_bytes, max_offset, min_one_batch,
                          zero_copy=True)[2]

    def _read(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_batch: bool,
              zero_copy: bool) -> tuple[int, int, bytes | FileSlice]:
        """(segment base offset, file position, records); -1, -1 when empty."""
        self._check_online()
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} is out of range [{self.log_start_offset}, "
                f"{self.log_end_offset}] for {self.topic}-{self.partition}"
            )
        if fetch_offset == self.log_end_offset or fetch_offset >= max_offset:
            return -1, -1, b""
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        while i < len(self._segments):
            segment = self._segments[i]
            try:
                found = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch,
                                     zero_copy)
            except OSError as e:
                raise self._storage_error(e) from e
            if found is not None:
                return segment.base_offset, found[0], found[1]
            i += 1
        return -1, -1, b""

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
        keep = max(i for i, s in enumerate(self._segments) if i == 0 or s.base_offset <= offset)
        self._cut_back(keep, lambda segment: segment.truncate_to(offset))
        return True

    def _cut_back(self, keep: int, cut: Callable[[LogSegment], object]) -> None:
        """Delete the segments after index ``keep``, make that one active again and
        ``cut`` its end; the offsets and producer state follow the new end."""
        while len(self._segments) > keep + 1:
            self._segments.pop().delete()
            self._bases.pop()
        segment = self._segments[-1]
        if not segment.active:
            segment.offset_index.make_writable(self.config.segment_index_bytes)
            segment.time_index.make_writable(self.config.segment_index_bytes)
            segment.active = True
        cut(segment)
        self.log_end_offset = segment.next_offset
        self._clamp_offsets()
        producer_log.rebuild_after_truncation(self)

    def cut_at_corruption(self, base_offset: int, position: int) -> int | None:
        """A follower drops a corrupt closed segment's bytes from ``position`` on
        (storage/scrub.py found its valid prefix ending there) and every later
        segment, to fetch them again from its leader; the new log end offset, or
        None if that segment is gone (retention or compaction replaced it)."""
        index = next((i for i, s in enumerate(self._segments) if s.base_offset == base_offset),
                     None)
        if index is None:
            return None
        self._cut_back(index, lambda segment: segment.truncate_at_position(position))
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset``."""
        for segment in self._segments:
            segment.delete()
        segment = self._new_segment(offset)
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



def write_leader_epochs(logs: list[PartitionLog]) -> list[KafkaStorageError]:
    """The leader-epoch checkpoints `assign_leader_epoch(defer_write=True)`
    left unwritten, written together (storage/checkpoint.write_checkpoints:
    one wait for all their fsyncs). A log whose file failed has its log dir
    taken offline as its own write would have; its error is returned."""
    by_path = {log.leader_epoch_cache.path: log for log in logs}
    failed = write_deferred_together([log.leader_epoch_cache for log in logs])
    return [by_path[path]._storage_error(error) for path, error in failed.items()]
