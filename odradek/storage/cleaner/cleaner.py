"""Cleaning one log: Kafka's ``Cleaner.clean``, run in a cleaner worker process.

Theory of operation
-------------------
A ``CleanTask`` (storage/cleaner/task.py) names a log's segments and its
dirty section ``[first dirty, first uncleanable)``. ``clean_log``:

1. Walks the batch headers of every segment (``LogTransactions``): which
   transactions aborted, which batch is each producer's last.
2. Builds the offset map (storage/cleaner/offset_map.py) over the dirty
   section, record by record from the first dirty offset: for every record
   with a key, MD5(key) -> offset (later offsets win). Control batches and
   batches of aborted transactions are not mapped. When the map holds
   ``max_entries`` keys it is full (as in Kafka's ``buildOffsetMapForSegment``)
   and ``end_offset``, the next first dirty offset, is the offset of the first
   record it did not take - possibly inside a batch: the records from there on
   are past the map and kept as they are. Otherwise ``end_offset`` is the
   first uncleanable offset. Every round maps at least one record.
3. Recopies every closed segment below ``end_offset``, from the oldest, in
   groups (Kafka's ``groupSegmentsBySize``: consecutive segments whose total
   log size stays within ``segment.bytes``, whose index sizes stay within
   ``segment.index.bytes`` and whose offsets fit 4-byte relative offsets),
   one ``<first base>.log.cleaned`` (+ indexes) per group. Per batch
   (Kafka's ``LogCleaner.cleanInto`` with ``MemoryRecords.filterTo``):

   * a record past the map (offset > ``end_offset - 1``) is kept;
   * a record without a key is dropped (it cannot be in a compacted log);
   * a record whose key maps to a later offset is dropped (superseded);
   * a tombstone (null value) is dropped once its batch's delete horizon has
     passed; a kept tombstone without one gives its batch the horizon
     ``now + delete.retention.ms`` (KIP-534: attribute bit 6, the horizon
     stored in ``baseTimestamp``, record timestamp deltas rebased);
   * every record of an aborted transaction is dropped; a marker whose
     transaction's data is gone is dropped once its horizon has passed (it
     gets one first, like a tombstone);
   * a batch with every record kept and no horizon to set is copied byte for
     byte; otherwise it is rebuilt with the same base offset, last offset
     delta, producer id / epoch / base sequence, partition leader epoch,
     attributes and compression codec, holding the kept records unchanged
     (recompressed with the batch's codec); max timestamp is recomputed
     (CreateTime) or kept (LogAppendTime);
   * a batch left without records goes, unless it holds its producer's last
     sequence: then its header stays as an empty batch (Kafka's
     ``writeEmptyHeader``: no codec, base timestamp -1, count 0).

   Every batch read is CRC-checked: a corrupt batch stops the cleaning of the
   log (``CorruptSegment``), nothing is swapped.
4. Returns each group written as it is done (``LogCleaning.clean_group``);
   the broker swaps it in (storage/cleaner/swap.py) before asking for the
   next. Files are fsynced before a group is handed back.

Reads and writes pass through the ``Throttler``; ``step_delay_ms`` (a test
knob) sleeps between groups and before each ``finish``.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.record_scan import ScannedRecords, scan_records, write_varint
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    ControlRecordType,
    InvalidRecords,
    TimestampType,
    batch_crc_ok,
    compress,
)
from odradek.storage.cleaner.offset_map import OffsetMap, key_hash
from odradek.storage.cleaner.segment_io import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    CleanedSegmentWriter,
    Throttler,
    read_batches,
    read_txn_index_entries,
    segment_path,
    txn_entry_last_offset,
)
from odradek.storage.cleaner.task import (
    CleanedGroup,
    CleanerStats,
    CleanResult,
    CleanTask,
    SegmentInfo,
)
from odradek.storage.cleaner.transactions import CleanedTransactions, LogTransactions

INT32_MAX = 2**31 - 1
OFFSET_INDEX_ENTRY_BYTES = 8
TIME_INDEX_ENTRY_BYTES = 12
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
_UINT32 = struct.Struct(">I")


class CorruptSegment(Exception):
    """A batch of a segment being cleaned fails its CRC or does not decode."""


class CleanerAborted(Exception):
    """The cleaning was asked to stop (the broker is going away)."""


class LogCleaning:
    """One cleaning of one log, done group by group so the broker can swap each
    group in before the next is written (Kafka cleans and swaps one group at a
    time: a crash loses at most the group being written).

    Creating it walks the log's headers and builds the offset map (steps 1 and
    2); ``clean_group(i)`` writes group i's ``.cleaned`` files (step 3);
    ``finish`` gives the result with its statistics."""

    def __init__(
        self,
        task: CleanTask,
        should_stop: Callable[[], bool] = lambda: False,
        offset_map: OffsetMap | None = None,
    ) -> None:
        self.task = task
        self.dir = Path(task.dir)
        self.should_stop = should_stop
        self.stats = CleanerStats()
        self.throttler = Throttler(task.max_io_bytes_per_second)
        self.read_buffer = max(task.io_buffer_bytes // 2, 1)
        log_txns = scan_transactions(self.dir, task, self.read_buffer)
        started = time.monotonic()
        if offset_map is None or not offset_map.fits(task.map_memory_bytes,
                                                     task.map_load_factor):
            offset_map = OffsetMap(task.map_memory_bytes, task.map_load_factor)
        else:
            offset_map.clear()
        end_offset, full = build_offset_map(self.dir, task, offset_map, log_txns,
                                            self.throttler, self.stats, self.read_buffer,
                                            should_stop)
        self.stats.map_seconds = time.monotonic() - started
        self.result = CleanResult(end_offset=end_offset, stats=self.stats, map_full=full,
                                  map_entries=offset_map.size, map_slots=offset_map.slots)
        self.groups = group_segments(self.dir, segments_to_clean(task, end_offset), task)
        self._records = _RecordFilter(offset_map, CleanedTransactions(log_txns), task,
                                      self.stats)
        self._next_group = 0

    def clean_group(self, i: int) -> CleanedGroup:
        """Write group ``i``'s cleaned segment; groups go in order, each once."""
        assert i == self._next_group, f"group {i} asked, {self._next_group} is next"
        if self.should_stop():
            raise CleanerAborted(f"cleaning of {self.task.topic}-{self.task.partition} stopped")
        started = time.monotonic()
        group = _clean_group(self.dir, self.groups[i], self.task, self._records,
                             self.throttler, self.read_buffer, self.stats, self.should_stop)
        self._next_group += 1
        self.result.groups.append(group)
        self.stats.clean_seconds += time.monotonic() - started
        return group

    def finish(self) -> CleanResult:
        self.result.earliest_delete_horizon_ms = self._records.earliest_horizon_ms
        self.stats.throttled_seconds = self.throttler.slept_seconds
        return self.result


def clean_log(
    task: CleanTask,
    should_stop: Callable[[], bool] = lambda: False,
    offset_map: OffsetMap | None = None,
) -> CleanResult:
    """Clean the log ``task`` names, every group at once (see the module
    docstring); the broker drives a ``LogCleaning`` group by group instead."""
    cleaning = LogCleaning(task, should_stop, offset_map)
    for i in range(len(cleaning.groups)):
        cleaning.clean_group(i)
        _step_delay(task)
    return cleaning.finish()


def _step_delay(task: CleanTask) -> None:
    if task.step_delay_ms > 0:
        time.sleep(task.step_delay_ms / 1000)


# -- 1. transactions and producers -------------------------------------------------------


def scan_transactions(dir: Path, task: CleanTask, read_buffer: int) -> LogTransactions:
    """Markers and last batches of every producer, from the whole log's headers."""
    txns = LogTransactions()
    for segment in task.segments:
        path = segment_path(dir, segment.base_offset, LOG_SUFFIX)
        for _, header, buf in read_batches(path, segment.size_bytes, read_buffer,
                                           task.max_message_bytes):
            if header.producer_id < 0:
                continue
            marker = _marker_type(buf, header) if header.is_control else None
            txns.add_batch(header, marker)
    return txns


def _marker_type(buf: bytes | memoryview, header: BatchHeader) -> ControlRecordType | None:
    try:
        scanned = scan_records(buf, header)
    except InvalidRecords:
        return None
    if not len(scanned) or scanned.keys[0] is None or len(scanned.keys[0]) < _CONTROL_KEY.size:
        return None
    _version, kind = _CONTROL_KEY.unpack_from(scanned.keys[0])
    try:
        return ControlRecordType(kind)
    except ValueError:
        return None


# -- 2. the offset map ----------------------------------------------------------------------------


def build_offset_map(
    dir: Path,
    task: CleanTask,
    offset_map: OffsetMap,
    log_txns: LogTransactions,
    throttler: Throttler,
    stats: CleanerStats,
    read_buffer: int,
    should_stop: Callable[[], bool],
) -> tuple[int, bool]:
    """Map the dirty section; returns (end offset, whether the map filled up)."""
    first_dirty, uncleanable = task.first_dirty_offset, task.first_uncleanable_offset
    end_offset = uncleanable
    full = False
    for segment in task.segments[:-1]:
        if segment.next_offset <= first_dirty or segment.size_bytes == 0:
            continue
        if segment.base_offset >= uncleanable or full:
            break
        if should_stop():
            raise CleanerAborted(f"cleaning of {task.topic}-{task.partition} stopped")
        path = segment_path(dir, segment.base_offset, LOG_SUFFIX)
        for _, header, buf in read_batches(path, segment.size_bytes, read_buffer,
                                           task.max_message_bytes, throttler):
            if should_stop():
                raise CleanerAborted(f"cleaning of {task.topic}-{task.partition} stopped")
            if header.last_offset < first_dirty:
                continue
            if header.base_offset >= uncleanable:
                break
            stats.map_bytes_read += header.size
            if header.is_control or log_txns.is_aborted(header):
                continue
            try:
                scanned = scan_records(buf, header)
            except InvalidRecords as e:
                raise CorruptSegment(
                    f"{path}: batch at offset {header.base_offset} does not decode: {e}") from e
            base = header.base_offset
            put, max_entries = offset_map.put_hash, offset_map.max_entries
            for delta, key in zip(scanned.offset_deltas, scanned.keys):
                offset = base + delta
                if key is None or offset < first_dirty:
                    continue
                if offset_map.size >= max_entries:
                    # Full: the map covers [first dirty, offset); the rest waits.
                    end_offset, full = offset, True
                    break
                put(key_hash(key), offset)
            if full:
                break
            stats.map_records += len(scanned)
    offset_map.latest_offset = end_offset - 1
    return end_offset, full


# -- 3. grouping -------------------------------------------------------------------------------------


def segments_to_clean(task: CleanTask, end_offset: int) -> list[SegmentInfo]:
    """Closed segments below ``end_offset`` that are not wholly below the log start
    (those are retention's)."""
    closed = list(task.segments[:-1])
    chosen = []
    for i, segment in enumerate(closed):
        if segment.base_offset >= end_offset:
            break
        following = task.segments[i + 1]
        if following.base_offset <= task.log_start_offset:
            continue
        chosen.append(segment)
    return chosen


def _index_bytes(dir: Path, base_offset: int, suffix: str) -> int:
    try:
        return os.stat(segment_path(dir, base_offset, suffix)).st_size
    except FileNotFoundError:
        return 0


def group_segments(dir: Path, segments: list[SegmentInfo], task: CleanTask) -> list[
        list[SegmentInfo]]:
    """Kafka's ``groupSegmentsBySize``."""
    groups: list[list[SegmentInfo]] = []
    rest = list(segments)
    while rest:
        first = rest.pop(0)
        group = [first]
        log_size = first.size_bytes
        offset_index = _index_bytes(dir, first.base_offset, INDEX_SUFFIX)
        time_index = _index_bytes(dir, first.base_offset, TIME_INDEX_SUFFIX)
        while rest:
            candidate = rest[0]
            candidate_offset_index = _index_bytes(dir, candidate.base_offset, INDEX_SUFFIX)
            candidate_time_index = _index_bytes(dir, candidate.base_offset, TIME_INDEX_SUFFIX)
            if (
                log_size + candidate.size_bytes > task.segment_bytes
                or offset_index + candidate_offset_index > task.segment_index_bytes
                or time_index + candidate_time_index > task.segment_index_bytes
                or max(candidate.next_offset - 1, candidate.base_offset) - first.base_offset
                > INT32_MAX
            ):
                break
            group.append(rest.pop(0))
            log_size += candidate.size_bytes
            offset_index += candidate_offset_index
            time_index += candidate_time_index
        groups.append(group)
    return groups


# -- 3. recopying ------------------------------------------------------------------------------------


def _clean_group(
    dir: Path,
    group: list[SegmentInfo],
    task: CleanTask,
    records: _RecordFilter,
    throttler: Throttler,
    read_buffer: int,
    stats: CleanerStats,
    should_stop: Callable[[], bool],
) -> CleanedGroup:
    base = group[0].base_offset
    writer = CleanedSegmentWriter(dir, base, task.index_interval_bytes,
                                  max(task.io_buffer_bytes // 2, 1), throttler)
    try:
        for segment in group:
            path = segment_path(dir, segment.base_offset, LOG_SUFFIX)
            for _, header, buf in read_batches(path, segment.size_bytes, read_buffer,
                                               task.max_message_bytes, throttler):
                if should_stop():
                    raise CleanerAborted(f"cleaning of {task.topic}-{task.partition} stopped")
                stats.bytes_read += header.size
                stats.batches_read += 1
                if header.magic != MAGIC_V2 or not batch_crc_ok(buf, header):
                    raise CorruptSegment(
                        f"{path}: batch at offset {header.base_offset} fails its CRC")
                kept = records.filter_batch(buf, header, path)
                if kept is not None:
                    batch, max_timestamp = kept
                    writer.append(batch, header.last_offset, max_timestamp)
                    stats.batches_retained += 1
        for segment in group:
            for entry in read_txn_index_entries(
                    segment_path(dir, segment.base_offset, TXN_INDEX_SUFFIX)):
                if txn_entry_last_offset(entry) in records.kept_abort_markers:
                    writer.txn_entries.append(entry)
        _step_delay(task)
        last_log = segment_path(dir, group[-1].base_offset, LOG_SUFFIX)
        suffixes = writer.finish(os.stat(last_log).st_mtime_ns)
    except BaseException:
        writer.abandon()
        raise
    stats.bytes_written += writer.size_bytes
    return CleanedGroup(
        old_bases=tuple(s.base_offset for s in group),
        base_offset=base,
        size_bytes=writer.size_bytes,
        suffixes=suffixes,
    )


class _RecordFilter:
    """Per-batch decisions of one cleaning (shared by all its groups)."""

    def __init__(self, offset_map: OffsetMap, txns: CleanedTransactions, task: CleanTask,
                 stats: CleanerStats) -> None:
        self.offset_map = offset_map
        self.txns = txns
        self.now_ms = task.now_ms
        self.new_horizon_ms = task.now_ms + task.delete_retention_ms
        self.stats = stats
        self.kept_abort_markers: set[int] = set()
        self.earliest_horizon_ms = -1

    def _note_horizon(self, horizon_ms: int) -> None:
        if self.earliest_horizon_ms < 0 or horizon_ms < self.earliest_horizon_ms:
            self.earliest_horizon_ms = horizon_ms

    def filter_batch(
        self, buf: bytes | memoryview, header: BatchHeader, path: Path
    ) -> tuple[bytes | memoryview, int] | None:
        """(bytes to write, their max timestamp), or None to drop the batch."""
        stats = self.stats
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
        try:
            scanned = scan_records(buf, header)
        except InvalidRecords as e:
            raise CorruptSegment(
                f"{path}: batch at offset {header.base_offset} does not decode: {e}") from e
        total = len(scanned)
        stats.records_read += total
        marker: ControlRecordType | None = None
        if header.is_control:
            marker = _marker_type(buf, header)
            can_discard = self.txns.on_control_batch(header, marker)
            discard_records = (
                can_discard and horizon is not None and horizon <= self.now_ms
            )
            marker_for_empty_txn = can_discard
        else:
            discard_records = can_discard = self.txns.on_data_batch(header)
            marker_for_empty_txn = False
        retain_empty = header.producer_id >= 0 and self.txns.log_txns.is_last_batch_of_producer(
            header)
        kept: list[int]
        contains_tombstones = False
        if discard_records:
            kept = []
            if header.is_control:
                stats.markers_removed += 1
            else:
                stats.aborted_records_removed += total
        elif header.is_control:
            kept = list(range(total))
        else:
            kept, contains_tombstones = self._kept_records(scanned, header, horizon)
        stats.records_retained += len(kept)
        if header.is_control and kept and marker == ControlRecordType.ABORT:
            self.kept_abort_markers.add(header.base_offset)
        need_horizon = (contains_tombstones or marker_for_empty_txn) and horizon is None
        if kept and (contains_tombstones or header.is_control):
            # A horizon still ahead makes the log worth cleaning again when it
            # passes (one already passed would ask for cleaning forever).
            pending = self.new_horizon_ms if need_horizon else horizon
            if pending is not None and pending > self.now_ms:
                self._note_horizon(pending)
        if len(kept) == total and total and not need_horizon:
            start = header.position
            return memoryview(buf)[start : start + header.size], header.max_timestamp
        if not kept:
            if retain_empty:
                return _empty_batch(header), header.max_timestamp
            return None
        return _rebuild_batch(header, scanned, kept,
                              self.new_horizon_ms if need_horizon else None)

    def _kept_records(
        self, scanned: ScannedRecords, header: BatchHeader, horizon: int | None
    ) -> tuple[list[int], bool]:
        """Kafka's ``shouldRetainRecord`` for each record of a data batch."""
        offset_map = self.offset_map
        latest = offset_map.latest_offset
        get = offset_map.get_hash
        base = header.base_offset
        deletes_expired = horizon is not None and self.now_ms >= horizon
        kept: list[int] = []
        contains_tombstones = False
        null_values = scanned.null_values
        for i, (delta, key) in enumerate(zip(scanned.offset_deltas, scanned.keys)):
            offset = base + delta
            if offset > latest:
                kept.append(i)
                contains_tombstones = contains_tombstones or null_values[i]
                continue
            if key is None:
                continue
            if offset < get(key_hash(key)):
                continue
            if null_values[i]:
                if deletes_expired:
                    self.stats.tombstones_removed += 1
                    continue
                contains_tombstones = True
            kept.append(i)
        return kept, contains_tombstones


def _pack_batch(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int,
                count: int, payload: bytes | bytearray) -> bytes:
    batch = bytearray(BATCH_OVERHEAD)
    _HEADER.pack_into(
        batch, 0, header.base_offset, BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch, MAGIC_V2, 0, attributes, header.last_offset_delta,
        base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, count,
    )
    batch += payload
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _empty_batch(header: BatchHeader) -> bytes:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: the header alone, no codec."""
    attributes = header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK)
    return _pack_batch(header, attributes, -1, header.max_timestamp, 0, b"")


def _rebuild_batch(header: BatchHeader, scanned: ScannedRecords, kept: list[int],
                   horizon_ms: int | None) -> tuple[bytes, int]:
    """The batch with only the ``kept`` records (bytes unchanged unless the base
    timestamp moves to a new delete horizon), same codec and attributes."""
    old_base = header.base_timestamp
    attributes = header.attributes
    base_timestamp = old_base
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = horizon_ms
    shift = old_base - base_timestamp
    buf = scanned.buf
    starts, ends = scanned.starts, scanned.ends
    deltas = scanned.timestamp_deltas
    body = bytearray()
    max_timestamp = -1
    for i in kept:
        timestamp = old_base + deltas[i]
        max_timestamp = max(max_timestamp, timestamp)
        if shift == 0:
            body += buf[starts[i] : ends[i]]
            continue
        record = bytearray((buf[scanned.body_starts[i]],))
        write_varint(record, deltas[i] + shift)
        record += buf[scanned.after_timestamp[i] : ends[i]]
        write_varint(body, len(record))
        body += record
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME or attributes & CONTROL_MASK:
        max_timestamp = header.max_timestamp
    codec = header.compression
    payload = compress(body, codec) if codec else body
    return _pack_batch(header, attributes, base_timestamp, max_timestamp, len(kept),
                       payload), max_timestamp
