"""Sparse segment indexes in Kafka's on-disk format: ``.index`` and ``.timeindex``.

File formats (big-endian, fixed-size entries, no header)
--------------------------------------------------------
``<base:020d>.index`` — offset index, 8-byte entries::

    0  4  relativeOffset int32   batch last offset - segment base offset
    4  4  position int32         byte position of that batch in the .log

``<base:020d>.timeindex`` — time index, 12-byte entries::

    0  8  timestamp int64        the segment's max timestamp so far
    8  4  relativeOffset int32   offset of the batch holding it - base offset

Rules (as in Kafka)
-------------------
* Entries are sparse: the segment adds one when more than
  ``index.interval.bytes`` of log were appended since the previous entry.
  Offset-index entries strictly increase in both fields; time-index entries
  strictly increase in timestamp and never decrease in offset (an entry is only
  appended when the max timestamp grows).
* While a segment is active its index files are preallocated (sparse, zero
  filled) to ``segment.index.bytes`` rounded down to a whole entry; on roll or
  close they are trimmed to the entries written. On open, entries are read up to
  the first one that breaks the ordering above, which is where the zero-filled
  preallocated tail (or a torn write) begins.
* The time index keeps one slot free while active: ``is_full`` is reported one
  entry early so the final "max timestamp of the segment" entry always fits on
  roll.

Entries live in memory in ``array`` objects (4 or 8 bytes per field), loaded
lazily for inactive segments; lookups are binary searches over them. The file is
only read at load.

No index holds a file descriptor (issue 15.3: 50,000 partitions under a 20,000
open-files limit). An active index's new entries wait in memory (``_pending``)
and are written to the file, opened by path for that write only, when
``PENDING_MAX_BYTES`` have gathered, on ``write_pending`` (every flush of the
partition: ``LogSegment.sync_targets``), on roll and on close. So after a
kill -9 the file holds every entry of the part of the log the recovery point
covers (a sparse index missing later entries is still correct: lookups scan
further); the part past the recovery point is rebuilt from the log anyway.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

INT32_MAX = 2**31 - 1
OFFSET_ENTRY_BYTES = 8
TIME_ENTRY_BYTES = 12
NO_TIMESTAMP = -1

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexFull(Exception):
    """Raised by ``append`` when the index has no room; the segment must roll first."""


class CorruptIndex(Exception):
    """The index file does not describe its segment; the segment rebuilds it."""


# An index file is read in pieces, the first this size (a multiple of both entry
# sizes), each next one twice the last, up to the max.
_LOAD_CHUNK_BYTES = 24 * 512
_LOAD_CHUNK_MAX_BYTES = 24 * 512 * 1024
# An active index writes its gathered entries once this many bytes wait.
PENDING_MAX_BYTES = 4096


def _big_endian_array(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class _IndexFile:
    """File handling shared by both indexes: preallocate, append, trim, flush."""

    entry_bytes: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, writable: bool) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_index_bytes = max_index_bytes
        self._loaded = False
        self._writable = False
        self._max_entries = 0
        # Entries appended but not yet written: bytes for entries from number
        # _pending_from on.
        self._pending = bytearray()
        self._pending_from = 0
        self._blank = False  # the file holds zeros only (see make_writable)
        if writable:
            self.make_writable(max_index_bytes)

    # -- entries, implemented by subclasses ----------------------------------------
    @property
    def entries(self) -> int:
        raise NotImplementedError

    def _load_entries(self, data: bytes) -> None:
        raise NotImplementedError

    def _clear_entries(self) -> None:
        raise NotImplementedError

    def _truncate_entries(self, count: int) -> None:
        raise NotImplementedError

    # -- file lifecycle ----------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        # Read up to the first zero entry past the first: entries increase, so
        # the valid prefix ends there (an active segment's index left by a crash
        # is preallocated to segment.index.bytes of zeros: not read whole).
        data = bytearray()
        size = self.entry_bytes
        zero = bytes(size)
        try:
            with open(self.path, "rb", buffering=0) as f:
                piece = _LOAD_CHUNK_BYTES
                while chunk := f.read(piece):
                    data += chunk
                    piece = min(piece * 2, _LOAD_CHUNK_MAX_BYTES)
                    usable = len(data) - len(data) % size
                    if usable > size and data[usable - size:usable] == zero:
                        break
        except FileNotFoundError:
            pass
        usable = len(data) - len(data) % size
        self._load_entries(bytes(data[:usable]))
        self._loaded = True

    def make_writable(self, max_index_bytes: int) -> None:
        """Accept appends; preallocate the file to ``max_index_bytes`` (whole entries)."""
        self._ensure_loaded()
        self._max_index_bytes = max_index_bytes
        self._max_entries = max(1, max_index_bytes // self.entry_bytes)
        self._writable = True
        size = max(self._max_entries, self.entries) * self.entry_bytes
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # A file that was empty is all zeros now: ``reset`` has nothing to
            # rewrite (a new segment's indexes: one open each, not two).
            self._blank = not self.entries and os.fstat(fd).st_size == 0
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def write_pending(self) -> None:
        """Write the entries gathered in memory (no fsync)."""
        if not self._pending:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            _pwrite_all(fd, self._pending, self._pending_from * self.entry_bytes)
        finally:
            os.close(fd)
        self._pending.clear()

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries written and stop accepting appends."""
        self._ensure_loaded()
        self.write_pending()
        if self._writable or self.path.exists():
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, self.entries * self.entry_bytes)
            finally:
                os.close(fd)
        self._writable = False
        self._max_entries = self.entries

    def is_full(self) -> bool:
        return self.entries >= self._max_entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    def flush(self) -> None:
        """Write the gathered entries and fsync the file (an active index only)."""
        if not self._writable:
            return
        self.write_pending()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Trim (like Kafka on clean shutdown) and stop accepting appends."""
        if self._writable:
            self.trim_to_valid_size()
        self._writable = False

    def release(self) -> None:
        """Stop accepting appends without writing anything (the file is being deleted
        or its dir is offline)."""
        self._pending.clear()
        self._writable = False

    def delete(self) -> None:
        self.release()
        self.path.unlink(missing_ok=True)

    def reset(self) -> None:
        """Drop every entry (the file keeps its preallocated size if writable)."""
        self._ensure_loaded()
        if self._blank and not self.entries and not self._pending:
            return
        self._clear_entries()
        self._loaded = True
        self._rewrite_file(b"")

    def _rewrite_file(self, data: bytes) -> None:
        self._pending.clear()
        self._blank = False
        if self._writable:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, 0)
                _pwrite_all(fd, data, 0)
                os.ftruncate(fd, max(self._max_entries * self.entry_bytes, len(data)))
            finally:
                os.close(fd)
        else:
            with open(self.path, "wb") as f:
                f.write(data)

    def _write_entry(self, entry: bytes, index: int) -> None:
        if not self._writable:
            raise IndexFull(f"{self.path} is not open for appends")
        if not self._pending:
            self._pending_from = index
        self._pending += entry
        self._blank = False
        if len(self._pending) >= PENDING_MAX_BYTES:
            self.write_pending()

    def _check_room(self) -> None:
        if not self._writable:
            raise IndexFull(f"{self.path} is not writable")
        if self.entries >= self._max_entries:
            raise IndexFull(f"{self.path} is full ({self.entries} entries)")

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} cannot be stored relative to {self.base_offset}")
        return relative


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


class OffsetIndex(_IndexFile):
    """Maps (a batch's last offset) -> (that batch's byte position in the .log)."""

    entry_bytes = OFFSET_ENTRY_BYTES

    def __init__(
        self, path: Path, base_offset: int, max_index_bytes: int, *, writable: bool = False
    ) -> None:
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")
        super().__init__(path, base_offset, max_index_bytes, writable)

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._offsets)

    def _load_entries(self, data: bytes) -> None:
        pairs = _big_endian_array("i", data)
        offsets = pairs[0::2]
        positions = pairs[1::2]
        # Keep the prefix that is strictly increasing in both fields.
        count = 0
        previous_offset = previous_position = -1
        for relative, position in zip(offsets, positions):
            if relative <= previous_offset or position <= previous_position:
                break
            previous_offset, previous_position = relative, position
            count += 1
        self._offsets = offsets[:count]
        self._positions = positions[:count]

    def _clear_entries(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")

    def _truncate_entries(self, count: int) -> None:
        del self._offsets[count:]
        del self._positions[count:]

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        self._check_room()
        relative = self._relative(offset)
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) is not after the last entry "
                f"({self.base_offset + self._offsets[-1]}, {self._positions[-1]})"
            )
        if not 0 <= position <= INT32_MAX:
            raise ValueError(f"position {position} does not fit an index entry")
        self._write_entry(_OFFSET_ENTRY.pack(relative, position), len(self._offsets))
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, else (base_offset, 0)."""
        self._ensure_loaded()
        relative = target_offset - self.base_offset
        if relative < 0:
            return self.base_offset, 0
        i = bisect_right(self._offsets, min(relative, INT32_MAX)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def last_entry(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure_loaded()
        return self.base_offset + self._offsets[n], self._positions[n]

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at ``position`` or later (the log was cut there)."""
        self._ensure_loaded()
        keep = bisect_right(self._positions, position - 1)
        if keep < len(self._positions):
            self._truncate_entries(keep)
            self._rewrite_file(self._encode())

    def replace_entries(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index with one write (used by rebuilds)."""
        self._ensure_loaded()
        self._clear_entries()
        for offset, position in entries:
            self._offsets.append(self._relative(offset))
            self._positions.append(position)
        self._rewrite_file(self._encode())

    def _encode(self) -> bytes:
        pairs = array("i", bytes(8 * len(self._offsets)))
        pairs[0::2] = self._offsets
        pairs[1::2] = self._positions
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()

    def sanity_check(self, log_size_bytes: int, next_offset: int) -> None:
        """Raise CorruptIndex if an entry points past the log or past its last offset."""
        self._ensure_loaded()
        if not self._offsets:
            return
        if self._positions[-1] >= log_size_bytes or (
            self.base_offset + self._offsets[-1] >= next_offset
        ):
            raise CorruptIndex(
                f"{self.path}: last entry {self.last_entry()} is beyond the log "
                f"(size {log_size_bytes}, next offset {next_offset})"
            )


class TimeIndex(_IndexFile):
    """Maps (max timestamp so far) -> (offset of the batch that holds it)."""

    entry_bytes = TIME_ENTRY_BYTES

    def __init__(
        self, path: Path, base_offset: int, max_index_bytes: int, *, writable: bool = False
    ) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        super().__init__(path, base_offset, max_index_bytes, writable)

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return len(self._timestamps)

    def is_full(self) -> bool:
        # One slot stays free for the final entry written when the segment rolls
        # (unless the index only has room for one entry at all).
        return self.entries >= max(1, self._max_entries - 1)

    def _load_entries(self, data: bytes) -> None:
        previous_timestamp = NO_TIMESTAMP
        previous_offset = -1
        timestamps = array("q")
        offsets = array("i")
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            if timestamp <= previous_timestamp or relative < previous_offset:
                break  # out of order: the zero-filled preallocated tail or a torn write
            if timestamps and timestamp == 0 and relative == 0:
                break
            timestamps.append(timestamp)
            offsets.append(relative)
            previous_timestamp, previous_offset = timestamp, relative
        self._timestamps = timestamps
        self._offsets = offsets

    def _clear_entries(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")

    def _truncate_entries(self, count: int) -> None:
        del self._timestamps[count:]
        del self._offsets[count:]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append if ``timestamp`` is larger than the last entry's; True if appended."""
        self._ensure_loaded()
        if timestamp < 0 or (self._timestamps and timestamp <= self._timestamps[-1]):
            return False
        if not self._writable:
            raise IndexFull(f"{self.path} is not writable")
        if not skip_full_check and self.is_full():
            raise IndexFull(f"{self.path} is full ({self.entries} entries)")
        if self.entries >= self._max_entries:
            raise IndexFull(f"{self.path} is full ({self.entries} entries)")
        relative = self._relative(offset)
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} is before the last entry's")
        self._write_entry(_TIME_ENTRY.pack(timestamp, relative), len(self._timestamps))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target,
        else (-1, base_offset): scanning from the returned offset finds the first
        record with timestamp >= target."""
        self._ensure_loaded()
        i = bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def last_entry(self) -> tuple[int, int]:
        self._ensure_loaded()
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        keep = bisect_right(self._offsets, relative - 1)
        if keep < len(self._offsets):
            self._truncate_entries(keep)
            self._rewrite_file(self._encode())

    def replace_entries(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index with one write (used by rebuilds)."""
        self._ensure_loaded()
        self._clear_entries()
        for timestamp, offset in entries:
            self._timestamps.append(timestamp)
            self._offsets.append(self._relative(offset))
        self._rewrite_file(self._encode())

    def _encode(self) -> bytes:
        return b"".join(_TIME_ENTRY.pack(t, o) for t, o in zip(self._timestamps, self._offsets))

    def sanity_check(self, next_offset: int) -> None:
        self._ensure_loaded()
        if self._offsets and self.base_offset + self._offsets[-1] >= next_offset:
            raise CorruptIndex(
                f"{self.path}: last entry {self.last_entry()} is beyond next offset {next_offset}"
            )
