"""One log segment: ``<base:020d>.log`` with its ``.index`` and ``.timeindex``.

File format
-----------
``<base:020d>.log`` is Kafka's log format: record batches v2 back to back,
byte-for-byte as they travel on the wire (see ``odradek/protocol/records.py``
for the 61-byte batch header), with baseOffset and partitionLeaderEpoch as the
leader assigned them. No file header, no padding, no trailer. The file name is
the segment's base offset: the first offset it may hold, zero padded to 20
digits. Every offset in the segment is ``>= base`` and ``<= base + 2**31 - 1``,
so the indexes can store 4-byte relative offsets (see ``storage/index.py``).

Theory of operation
-------------------
* ``append`` writes whole validated batches with one write and adds sparse
  index entries per batch, exactly where Kafka would put them, so a rebuilt
  index equals the one written while appending.
* ``read`` finds the batch holding an offset through the offset index plus a
  short scan of batch headers (``os.pread`` of header-sized prefixes in chunks),
  then reads the answer with one ``os.pread`` and trims it to whole batches.
  Records are never decoded on these paths.
* ``recover`` (on load of the last segment) walks every batch, checks its CRC,
  cuts a torn or corrupt tail at the last valid batch and rebuilds both
  indexes. ``rebuild_indexes`` does the same from headers alone when an index
  file is missing or fails its sanity check. Both, and the clean load of the
  derived facts, are ``SegmentFacts`` in ``storage/segment_facts.py`` (over
  ``storage/segment_recovery.py``: the scan and the rebuild rule).

Modules: ``file_records.py`` (the ``.log`` file: positional reads and writes,
the header scan, file names), ``index.py`` (``.index``, ``.timeindex``),
``txn_index.py`` (``.txnindex``), ``segment_facts.py`` (load and recovery);
this class ties them together.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    BatchHeader,
    Record,
    decode_batch_records,
    parse_batch_header,
)
from odradek.storage.file_records import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_SEGMENT_BYTES,
    TIME_INDEX_SUFFIX,
    FileRecords,
    segment_file_name,
    whole_batches_before,
)
from odradek.storage.file_slice import ZERO_COPY_MIN_BYTES, FileSlice
from odradek.storage.index import INT32_MAX, CorruptIndex, OffsetIndex, TimeIndex
from odradek.storage.segment_facts import SegmentFacts
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

# A trimmed zero-copy read walks at most this many batch headers (segment.read).
ZERO_COPY_MAX_BATCHES = 32

# The file names and limits live in file_records.py; re-exported for callers.
__all__ = [
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "MAX_SEGMENT_BYTES",
    "TIME_INDEX_SUFFIX",
    "LogSegment",
    "segment_file_name",
]

NO_TIMESTAMP = -1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class _BatchLocation:
    position: int
    size: int
    last_offset: int


class LogSegment(SegmentFacts):
    """A segment's files and the in-memory facts Kafka keeps about it."""

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        roll_jitter_ms: int = 0,
        active: bool = True,
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_bytes = max_index_bytes
        self.created_ms = created_ms
        self.roll_jitter_ms = roll_jitter_ms
        # The .log file (file_records.py): its bytes, size and header scans. In
        # the LRU of open files, active or not (issue 15.3: 50,000 partitions
        # under a 20,000 open-files limit): every use holds a lease.
        self.log = FileRecords(dir / segment_file_name(base_offset, LOG_SUFFIX), pinned=False)
        self.offset_index = OffsetIndex(
            dir / segment_file_name(base_offset, INDEX_SUFFIX),
            base_offset,
            max_index_bytes,
            writable=active,
        )
        self.time_index = TimeIndex(
            dir / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            max_index_bytes,
            writable=active,
        )
        # Aborted transactions whose marker is in this segment (storage/txn_index.py).
        self.txn_index = TransactionIndex(dir / segment_file_name(base_offset, TXN_INDEX_SUFFIX))
        self.active = active
        # Facts derived from the data; _load_facts / appends keep them current.
        self.next_offset = base_offset  # last offset + 1; base_offset when empty
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset  # last offset of the batch holding it
        self.rolling_based_timestamp_ms: int | None = None
        self.bytes_since_last_index_entry = 0
        self.recovery_truncated_bytes = 0  # what the last recover() cut off

    @property
    def log_path(self) -> Path:
        return self.log.path

    # -- construction ----------------------------------------------------------------
    @classmethod
    def create(
        cls,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        segment_jitter_ms: int = 0,
    ) -> LogSegment:
        """A new, empty, active segment (any stale files of that name are emptied)."""
        jitter = random.randrange(segment_jitter_ms) if segment_jitter_ms > 0 else 0
        segment = cls(
            dir,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            roll_jitter_ms=jitter,
            active=True,
        )
        if segment.size_bytes:
            segment.log.truncate(0)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment.txn_index.delete()
        return segment

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        active: bool,
        recover: bool = False,
        segment_jitter_ms: int = 0,
        on_batch: Callable[[BatchHeader], None] | None = None,
    ) -> LogSegment:
        """Open existing files. ``recover`` CRC-checks every batch, cuts a bad tail
        and rebuilds the indexes; otherwise indexes are sanity checked and rebuilt
        from batch headers only if missing or inconsistent."""
        jitter = random.randrange(segment_jitter_ms) if segment_jitter_ms > 0 else 0
        indexes_present = (dir / segment_file_name(base_offset, INDEX_SUFFIX)).exists() and (
            dir / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        ).exists()
        segment = cls(
            dir,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            roll_jitter_ms=jitter,
            active=active,
        )
        if recover:
            segment.recover(on_batch)
        elif not indexes_present:
            segment.rebuild_indexes()
        else:
            try:
                segment._load_facts()
            except CorruptIndex:
                segment.rebuild_indexes()
        segment._load_rolling_based_timestamp()
        return segment

    # -- appends ---------------------------------------------------------------------------
    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Write whole batches (``headers`` parsed from ``buf``, offsets assigned).

        The caller (the partition log) guarantees the offsets are increasing,
        >= next_offset and within 2**31 - 1 of base_offset, and rolls first when
        the indexes are full.
        """
        if not headers:
            return
        first, last = headers[0], headers[-1]
        assert first.position == 0 and last.position + last.size == len(buf), "whole batches"
        assert first.base_offset >= self.next_offset, "offsets must increase"
        if last.last_offset - self.base_offset > INT32_MAX or first.base_offset < self.base_offset:
            raise ValueError(
                f"offsets {first.base_offset}..{last.last_offset} do not fit segment "
                f"{self.base_offset}"
            )
        start = self.log.append(buf)  # cut off again if the write fails
        if self.rolling_based_timestamp_ms is None:
            self.rolling_based_timestamp_ms = first.max_timestamp
        interval = self.index_interval_bytes
        for header in headers:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if self.bytes_since_last_index_entry > interval and not self.indexes_full():
                # (A multi-batch append may meet a full index mid-way: the entry is
                # skipped, which only makes the sparse index sparser; the log rolls
                # before the next append.)
                self.offset_index.append(header.last_offset, start + header.position)
                self._maybe_append_time_entry()
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += header.size
        self.next_offset = last.next_offset

    def _maybe_append_time_entry(self, final: bool = False) -> None:
        if self.max_timestamp < 0:
            return
        if final and self.time_index.entries >= self.time_index.max_entries:
            return  # a one-entry index has no reserved slot; lookups stay correct
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=final
        )

    def indexes_full(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def time_waited_for_roll_ms(self, now_ms: int, message_timestamp_ms: int) -> int:
        """Kafka's rule: from the first batch's max timestamp if it has one, else
        from when the segment was created."""
        if self.rolling_based_timestamp_ms is not None and self.rolling_based_timestamp_ms >= 0:
            return message_timestamp_ms - self.rolling_based_timestamp_ms
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """Roll: record the final max timestamp, trim both indexes to size."""
        if not self.active:
            return
        self._maybe_append_time_entry(final=True)
        self.offset_index.close()
        self.time_index.close()
        self.active = False
        self.log.unpin()

    # -- reads -----------------------------------------------------------------------------
    def iter_headers_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of each batch from the one the offset index
        points at for ``offset`` (earlier batches may come first)."""
        _, position = self.offset_index.lookup(offset)
        return self._iter_headers(position)

    def _find_batch(self, target_offset: int) -> _BatchLocation | None:
        """The first batch whose last offset is >= target_offset, if any."""
        _, position = self.offset_index.lookup(target_offset)
        for batch_position, header in self._iter_headers(position):
            if header.last_offset >= target_offset:
                return _BatchLocation(batch_position, header.size, header.last_offset)
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int = LONG_MAX,
        min_one_batch: bool = False,
        zero_copy: bool = False,
    ) -> tuple[int, bytes | FileSlice] | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes``
        (or exactly the first batch if it alone is bigger and ``min_one_batch``),
        ending before the batch that holds ``max_offset``.

        Returns (file position, bytes), or None when no batch in this segment
        has an offset >= start_offset. Bytes may be empty. With ``zero_copy`` a
        range of at least ZERO_COPY_MIN_BYTES whose end needs no trimming comes
        as a `FileSlice` instead of bytes (file_slice.py).
        """
        location = self._find_batch(start_offset)
        if location is None:
            return None
        position = location.position
        if location.last_offset >= max_offset:
            return position, b""
        available = self.size_bytes - position
        limit = min(max_bytes, available)
        if location.size > limit:
            if min_one_batch:
                return position, self._bytes(location.size, position, zero_copy)
            return position, b""
        if limit == available and max_offset >= self.next_offset:
            # the segment ends on a batch boundary
            return position, self._bytes(limit, position, zero_copy)
        if zero_copy and limit >= ZERO_COPY_MIN_BYTES:
            # where whole batches end, from their headers, without reading them
            end = self._whole_batches_end(position, position + limit, max_offset)
            if end is not None:
                return position, self._bytes(end - position, position, zero_copy)
        data = self.log.pread(limit, position)
        return position, data[: whole_batches_before(data, max_offset)]

    def _whole_batches_end(self, start: int, end: int, max_offset: int) -> int | None:
        """Where the whole batches from ``start`` that fit before ``end`` and end
        before the batch holding ``max_offset`` stop; None when that takes more
        than ZERO_COPY_MAX_BATCHES headers (many small batches: one pread of them
        all costs less than the header reads)."""
        stop = start
        for count, (position, header) in enumerate(self._iter_headers(start, end)):
            if count == ZERO_COPY_MAX_BATCHES:
                return None
            if header.last_offset >= max_offset:
                break
            stop = position + header.size
        return stop

    def _bytes(self, size: int, position: int, zero_copy: bool) -> bytes | FileSlice:
        if zero_copy and size >= ZERO_COPY_MIN_BYTES:
            return self.log.slice(size, position)
        return self.log.pread(size, position)

    def read_batch(self, position: int, size: int) -> bytes:
        return self.log.pread(size, position)

    def find_offset_by_timestamp(
        self, target_timestamp_ms: int, start_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``start_offset``
        whose timestamp is >= target; decodes only the batch that answers."""
        if self.max_timestamp < target_timestamp_ms:
            return None
        _, indexed_offset = self.time_index.lookup(target_timestamp_ms)
        location = self._find_batch(max(indexed_offset, start_offset))
        if location is None:
            return None
        for position, header in self._iter_headers(location.position):
            if header.max_timestamp < target_timestamp_ms or header.last_offset < start_offset:
                continue
            for record in self._decode(position, header):
                if record.timestamp >= target_timestamp_ms and record.offset >= start_offset:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_record(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record carrying the segment's max
        timestamp; (-1, -1) for an empty segment."""
        if self.max_timestamp < 0 and self.size_bytes == 0:
            return -1, NO_TIMESTAMP
        location = self._find_batch(self.offset_of_max_timestamp)
        if location is not None:
            header = parse_batch_header(self.log.pread(BATCH_OVERHEAD, location.position))
            for record in self._decode(location.position, header):
                if record.timestamp == self.max_timestamp:
                    return record.offset, record.timestamp
        return self.offset_of_max_timestamp, self.max_timestamp

    def _decode(self, position: int, header: BatchHeader) -> list[Record]:
        data = self.log.pread(header.size, position)
        return decode_batch_records(data, parse_batch_header(data))

    def first_batch_header(self) -> BatchHeader | None:
        if self.size_bytes < BATCH_OVERHEAD:
            return None
        return parse_batch_header(self.log.pread(BATCH_OVERHEAD, 0))

    # -- truncation ----------------------------------------------------------------
    def truncate_at_position(self, position: int) -> int:
        """Cut the file at ``position`` (a batch boundary: where a scrub found the
        valid prefix of a corrupt segment ending); returns bytes removed."""
        position = max(0, min(position, self.size_bytes))
        removed = self.size_bytes - position
        self.log.truncate(position)
        self.rebuild_indexes()
        self.txn_index.truncate_to(self.next_offset)
        if self.size_bytes == 0:
            self.rolling_based_timestamp_ms = None
        return removed

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        Cuts at a batch boundary: if ``offset`` falls inside a batch the whole
        batch goes and ``next_offset`` becomes that batch's base offset.
        """
        location = self._find_batch(offset)
        if location is None:
            return 0
        removed = self.size_bytes - location.position
        self.log.truncate(location.position)
        self.txn_index.truncate_to(offset)
        self.rebuild_indexes()
        if self.size_bytes == 0:
            self.rolling_based_timestamp_ms = None
        return removed

    # -- lifecycle ----------------------------------------------------------------------------------
    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()

    def sync_targets(self) -> list[int | Path]:
        """What a flush must fsync, for an fsync on another thread that must not
        race a close: the segment's files by path (``fsync_and_close`` opens
        each read-only in turn: no segment holds a descriptor for good, and a
        flush of many segments or partitions must not hold one per file at
        once; a file renamed or deleted meanwhile is passed over).

        The active segment's index entries gathered in memory are written
        first (not fsynced: the active segment always lies at or past the
        recovery point, so an unclean start rebuilds its indexes from the log
        unless the recovery point is its end, which only a flush (this one)
        moves there after these entries reached the file; the page cache
        keeps them through a kill -9). They are synced when the segment rolls."""
        if self.log.closed:
            return []
        if self.active:
            self.offset_index.write_pending()
            self.time_index.write_pending()
            return [self.log.path]
        return [self.log.path, self.offset_index.path, self.time_index.path]

    def largest_timestamp_ms(self) -> int:
        """Kafka's ``largestTimestamp``: the max record timestamp, or the .log
        file's modification time when no batch carries a timestamp."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    def rename_to_deleted(self) -> list[Path]:
        """First step of an asynchronous delete (Kafka's ``.deleted`` suffix):
        close the files and rename them ``<name>.deleted``; returns the new paths,
        which the log manager unlinks after ``file.delete.delay.ms``."""
        self.close_files()
        renamed = []
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        txn = self.txn_index.rename_to(
            self.txn_index.path.with_name(self.txn_index.path.name + DELETED_SUFFIX))
        if txn is not None:
            renamed.append(txn)
        return renamed

    def close_files(self) -> None:
        """Release the file descriptors without writing anything."""
        self.log.close()
        self.offset_index.release()
        self.time_index.release()

    def close(self) -> None:
        if self.log.closed:
            return
        if self.active:
            self._maybe_append_time_entry(final=True)
        self.offset_index.close()
        self.time_index.close()
        # Closed for good (shutdown, deletion, a replica moved): the entries
        # leave the process's index cache (index_cache.py), which would
        # otherwise keep them until pushed out, or for ever with no bound.
        self.offset_index.release()
        self.time_index.release()
        self.log.close()

    def delete(self) -> None:
        self.log.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base={self.base_offset}, size={self.size_bytes}, "
            f"next_offset={self.next_offset}, active={self.active})"
        )

