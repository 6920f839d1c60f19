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
  file is missing or fails its sanity check. The scan and the rebuild rule live
  in ``storage/segment_recovery.py``; this class applies what they find.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Record,
    decode_batch_records,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.storage.index import INT32_MAX, CorruptIndex, OffsetIndex, TimeIndex
from odradek.storage.segment_recovery import IndexBuilder, scan_valid_prefix
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
NO_TIMESTAMP = -1
LONG_MAX = 2**63 - 1

# Header scans read this much per pread; a batch larger than a chunk costs one
# extra header-sized pread.
SCAN_CHUNK_BYTES = 16 * 1024
# Kafka stores segment positions as int32: a segment never grows past this.
MAX_SEGMENT_BYTES = INT32_MAX

_LAST_OFFSET_DELTA_AT = 23
_PREFIX = struct.Struct(">qi")
_INT32 = struct.Struct(">i")


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class _BatchLocation:
    position: int
    size: int
    last_offset: int


class LogSegment:
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
        self.log_path = dir / segment_file_name(base_offset, LOG_SUFFIX)
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
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size
        self.active = active
        # Facts derived from the data; _load_facts / appends keep them current.
        self.next_offset = base_offset  # last offset + 1; base_offset when empty
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset  # last offset of the batch holding it
        self.rolling_based_timestamp_ms: int | None = None
        self.bytes_since_last_index_entry = 0
        self.recovery_truncated_bytes = 0  # what the last recover() cut off

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
            os.ftruncate(segment._fd, 0)
            segment.size_bytes = 0
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

    def _load_facts(self) -> None:
        """next_offset and max timestamp from the index tails plus a short scan."""
        _, position = self.offset_index.lookup(LONG_MAX)
        last: BatchHeader | None = None
        for _, header in self._iter_headers(position):
            last = header
        self.next_offset = last.next_offset if last is not None else self.base_offset
        self.offset_index.sanity_check(self.size_bytes, self.next_offset)
        self.time_index.sanity_check(self.next_offset)
        timestamp, offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = timestamp, offset
        if last is not None and last.max_timestamp > self.max_timestamp:
            # The tail past the last index entry may hold a newer max timestamp.
            self._scan_facts_from(position)
        self.bytes_since_last_index_entry = self.size_bytes - position

    def whole_batches_end(self) -> int:
        """The file position after the last whole batch (from the last index entry)."""
        _, end = self.offset_index.lookup(LONG_MAX)
        for position, header in self._iter_headers(end):
            end = position + header.size
        return end

    def _scan_facts_from(self, position: int) -> None:
        for _, header in self._iter_headers(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset

    def _load_rolling_based_timestamp(self) -> None:
        if self.size_bytes >= BATCH_OVERHEAD:
            header = parse_batch_header(os.pread(self._fd, BATCH_OVERHEAD, 0))
            self.rolling_based_timestamp_ms = header.max_timestamp

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
        start = self.size_bytes
        try:
            _pwrite_all(self._fd, buf, start)
        except OSError:
            # Leave no torn tail behind for readers or the next append.
            os.ftruncate(self._fd, start)
            raise
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
        self.size_bytes = start + len(buf)
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

    # -- reads -----------------------------------------------------------------------------
    def _iter_headers(
        self, start: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of each whole batch in [start, end)."""
        end = self.size_bytes if end is None else end
        position = start
        fd = self._fd
        while end - position >= BATCH_OVERHEAD:
            chunk = os.pread(fd, min(SCAN_CHUNK_BYTES, end - position), position)
            consumed = 0
            for header in iter_batch_headers(chunk):
                yield position + header.position, header
                consumed = header.position + header.size
            if consumed == 0:
                # The batch at `position` is larger than a chunk (or truncated).
                header = parse_batch_header(chunk[:BATCH_OVERHEAD])
                if header.batch_length < MIN_BATCH_LENGTH or position + header.size > end:
                    return
                yield position, header
                consumed = header.size
            position += consumed

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
    ) -> tuple[int, bytes] | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes``
        (or exactly the first batch if it alone is bigger and ``min_one_batch``),
        ending before the batch that holds ``max_offset``.

        Returns (file position, bytes), or None when no batch in this segment
        has an offset >= start_offset. Bytes may be empty.
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
                return position, os.pread(self._fd, location.size, position)
            return position, b""
        data = os.pread(self._fd, limit, position)
        if limit == available and max_offset >= self.next_offset:
            return position, data  # the segment ends on a batch boundary
        return position, data[: _whole_batches_before(data, max_offset)]

    def read_batch(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

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
            header = parse_batch_header(os.pread(self._fd, BATCH_OVERHEAD, location.position))
            for record in self._decode(location.position, header):
                if record.timestamp == self.max_timestamp:
                    return record.offset, record.timestamp
        return self.offset_of_max_timestamp, self.max_timestamp

    def _decode(self, position: int, header: BatchHeader) -> list[Record]:
        data = os.pread(self._fd, header.size, position)
        return decode_batch_records(data, parse_batch_header(data))

    def first_batch_header(self) -> BatchHeader | None:
        if self.size_bytes < BATCH_OVERHEAD:
            return None
        return parse_batch_header(os.pread(self._fd, BATCH_OVERHEAD, 0))

    # -- recovery and truncation ----------------------------------------------------------------
    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """CRC-check every batch, cut the log at the first bad one, rebuild the
        indexes; returns the number of bytes truncated. ``on_batch`` sees every
        valid batch header in order (the log rebuilds its leader epoch cache).
        The scan itself is ``segment_recovery.scan_valid_prefix``."""
        builder = IndexBuilder(self.base_offset, self.index_interval_bytes)
        valid_end = scan_valid_prefix(self._fd, self.size_bytes, self.base_offset,
                                      builder, on_batch)
        truncated = self.size_bytes - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size_bytes = valid_end
        self._apply_rebuilt(builder)
        self.recovery_truncated_bytes = truncated
        return truncated

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes and the derived facts from batch headers (no CRC)."""
        builder = IndexBuilder(self.base_offset, self.index_interval_bytes)
        valid_end = 0
        for position, header in self._iter_headers(0):
            builder.add(position, header)
            valid_end = position + header.size
        if valid_end != self.size_bytes:
            # A partial trailing batch can never be read; drop it.
            os.ftruncate(self._fd, valid_end)
            self.size_bytes = valid_end
        self._apply_rebuilt(builder)

    def _apply_rebuilt(self, builder: IndexBuilder) -> None:
        """Replace both indexes and the derived facts with what ``builder`` saw."""
        offset_entries, time_entries = builder.finish(active=self.active)
        self.offset_index.replace_entries(offset_entries)
        self.time_index.replace_entries(time_entries)
        self.next_offset = builder.next_offset
        self.max_timestamp = builder.max_timestamp
        self.offset_of_max_timestamp = builder.offset_of_max
        self.bytes_since_last_index_entry = builder.bytes_since

    def truncate_at_position(self, position: int) -> int:
        """Cut the file at ``position`` (a batch boundary: where a scrub found the
        valid prefix of a corrupt segment ending); returns bytes removed."""
        position = max(0, min(position, self.size_bytes))
        removed = self.size_bytes - position
        os.ftruncate(self._fd, position)
        self.size_bytes = position
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
        os.ftruncate(self._fd, location.position)
        self.size_bytes = location.position
        self.txn_index.truncate_to(offset)
        self.rebuild_indexes()
        if self.size_bytes == 0:
            self.rolling_based_timestamp_ms = None
        return removed

    # -- lifecycle ----------------------------------------------------------------------------------
    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def dup_fds(self) -> list[int]:
        """Duplicates of the file descriptors a flush must fsync, for an fsync on
        another thread that must not race a close (the caller closes them).

        The active segment's indexes are left out: the active segment always
        lies at or past the recovery point, so an unclean start rebuilds its
        indexes from the log anyway; they are synced when the segment rolls."""
        fds = [os.dup(self._fd)] if self._fd >= 0 else []
        if not self.active:
            # Closed indexes have no open descriptor (trimmed and closed on
            # roll); fsync through a read-only one.
            for index in (self.offset_index, self.time_index):
                try:
                    fds.append(os.dup(index.fd) if index.fd is not None
                               else os.open(index.path, os.O_RDONLY))
                except FileNotFoundError:
                    continue
        return fds

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
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.release()
        self.time_index.release()

    def close(self) -> None:
        if self._fd < 0:
            return
        if self.active:
            self._maybe_append_time_entry(final=True)
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = -1

    def delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return (
            f"LogSegment(base={self.base_offset}, size={self.size_bytes}, "
            f"next_offset={self.next_offset}, active={self.active})"
        )


def _whole_batches_before(data: bytes, max_offset: int) -> int:
    """Length of the prefix of ``data`` made of whole batches ending before the
    batch that holds ``max_offset``."""
    end = 0
    limit = len(data)
    unpack_prefix = _PREFIX.unpack_from
    unpack_delta = _INT32.unpack_from
    while limit - end >= BATCH_OVERHEAD:
        base, batch_length = unpack_prefix(data, end)
        size = batch_length + LOG_OVERHEAD
        if size < BATCH_OVERHEAD or end + size > limit:
            break
        if base + unpack_delta(data, end + _LAST_OFFSET_DELTA_AT)[0] >= max_offset:
            break
        end += size
    return end


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written
