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
only read at load. A closed segment's entries are in the process's byte-bounded
LRU (index_cache.py, ``odradek.log.index.cache.max.bytes``): dropped when idle
and over the budget, read again on the next use. Every method that touches the
entries holds a lease for its duration (``_leased``), so a thread never sees
them dropped under it.

Size: about 610 lines, kept in one module because the two index kinds share one
file discipline (``_IndexFile``: preallocation, trimming, pending entries, leases)
and differ only in entry layout and search; the next split, if it grows, is
``OffsetIndex`` and ``TimeIndex`` into a module of their own beside the base.

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

import functools
import os
import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from odradek.storage.index_cache import ENTRY_ARRAYS_OVERHEAD_BYTES, INDEX_CACHE, IndexCache

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


_P = ParamSpec("_P")
_R = TypeVar("_R")
_I = TypeVar("_I", bound="_IndexFile")
_Entries = tuple[array, array]


def _leased(method: Callable[Concatenate[_I, _P], _R]) -> Callable[Concatenate[_I, _P], _R]:
    """Run ``method`` with the entries loaded and held (see ``_IndexFile._acquire``)."""
    @functools.wraps(method)
    def leased(self: _I, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self._acquire()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._release()
    return leased


def _big_endian_array(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class _IndexFile:
    """File handling shared by both indexes: preallocate, append, trim, flush."""

    entry_bytes: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, writable: bool,
                 cache: IndexCache) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_index_bytes = max_index_bytes
        # Guarded by the cache's lock: whether the entries are in memory, the
        # leases held on them, and whether the index is gone for good (its
        # segment closed for good: deleted, renamed or offline).
        self._cache = cache
        self._loaded = False
        self._users = 0
        self._retired = False
        self._writable = writable  # (so that the first load does not join the cache)
        self._max_entries = 0
        # Entries appended but not yet written: bytes for entries from number
        # _pending_from on.
        self._pending = bytearray()
        self._pending_from = 0
        self._blank = False  # the file holds zeros only (see make_writable)
        if writable:
            self.make_writable(max_index_bytes)

    # -- entries, implemented by subclasses ----------------------------------------
    def _count(self) -> int:
        """Entries in memory (the caller holds a lease)."""
        raise NotImplementedError

    def _parse_entries(self, data: bytes) -> _Entries:
        raise NotImplementedError

    def _set_entries(self, entries: _Entries) -> None:
        raise NotImplementedError

    def _clear_entries(self) -> None:
        raise NotImplementedError

    def _truncate_entries(self, count: int) -> None:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        if self._writable:
            # An active index's entries are never dropped, and only its owner
            # (the partition's appender) asks on that path: no lease needed.
            return self._count()
        self._acquire()
        try:
            return self._count()
        finally:
            self._release()

    # -- entries in memory: leases and the cache (index_cache.py) -------------------------
    def _acquire(self) -> None:
        """Take a lease: the entries are loaded (read from the file if they were
        never loaded or were dropped) and stay until ``_release``."""
        cache = self._cache
        with cache.lock:
            self._users += 1
            if self._loaded:
                if not self._writable:
                    cache.touch_locked(self)
                return
        try:
            entries = self._parse_entries(self._read_file())
        except BaseException:
            with cache.lock:
                self._users -= 1
            raise
        with cache.lock:
            if not self._loaded:  # else another thread's load won meanwhile
                self._set_entries(entries)
                self._loaded = True
                if not self._writable and not self._retired:
                    cache.admit_locked(self, self._memory_bytes(), loaded=True)

    def _release(self) -> None:
        cache = self._cache
        with cache.lock:
            self._users -= 1
            if self._users == 0 and cache.over_budget_locked():
                cache.evict_locked()  # what leases held over the bound

    def _resized(self) -> None:
        """The entries changed under a lease: the cache counts their new size."""
        with self._cache.lock:
            if self._loaded and not self._writable and not self._retired:
                self._cache.admit_locked(self, self._memory_bytes(), loaded=False)

    def _memory_bytes(self) -> int:
        return self._count() * self.entry_bytes + ENTRY_ARRAYS_OVERHEAD_BYTES

    # called by the cache with its lock held
    def _in_use(self) -> bool:
        return self._users > 0

    def _unload_locked(self) -> None:
        self._clear_entries()
        self._loaded = False

    # -- file lifecycle ----------------------------------------------------------------
    def _read_file(self) -> bytes:
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
        return bytes(data[:usable])

    @_leased
    def make_writable(self, max_index_bytes: int) -> None:
        """Accept appends; preallocate the file to ``max_index_bytes`` (whole entries).
        The entries leave the cache: they are never dropped while writable."""
        with self._cache.lock:
            self._writable = True
            self._cache.forget_locked(self)
        self._max_index_bytes = max_index_bytes
        self._max_entries = max(1, max_index_bytes // self.entry_bytes)
        size = max(self._max_entries, self._count()) * self.entry_bytes
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # A file that was empty is all zeros now: ``reset`` has nothing to
            # rewrite (a new segment's indexes: one open each, not two).
            self._blank = not self._count() and os.fstat(fd).st_size == 0
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

    @_leased
    def trim_to_valid_size(self) -> None:
        """Shrink the file to the entries written and stop accepting appends; the
        entries join the cache (the file now holds exactly them)."""
        self.write_pending()
        if self._writable or self.path.exists():
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, self._count() * self.entry_bytes)
            finally:
                os.close(fd)
        self._max_entries = self._count()
        with self._cache.lock:
            self._writable = False
            if not self._retired:
                self._cache.admit_locked(self, self._memory_bytes(), loaded=False)

    def is_full(self) -> bool:
        return self.entries >= self._max_entries  # (no lease when writable: see entries)

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

    def release(self) -> None:
        """Stop accepting appends without writing anything (the file is being deleted
        or renamed, or its dir is offline): the index is done with. It leaves the
        cache, and an unused one drops its entries and is never read again (the
        path may name another segment's file by now: the cleaner's swap); lookups
        then answer the segment's start, which a scan from there makes correct."""
        self._pending.clear()
        with self._cache.lock:
            self._writable = False
            self._retired = True
            self._cache.forget_locked(self)
            if not self._users:
                self._clear_entries()
                self._loaded = True

    def delete(self) -> None:
        self.release()
        self.path.unlink(missing_ok=True)

    @_leased
    def reset(self) -> None:
        """Drop every entry (the file keeps its preallocated size if writable)."""
        if self._blank and not self._count() and not self._pending:
            return
        self._clear_entries()
        self._rewrite_file(b"")
        self._resized()

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
        if self._count() >= self._max_entries:
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
        self, path: Path, base_offset: int, max_index_bytes: int, *, writable: bool = False,
        cache: IndexCache = INDEX_CACHE,
    ) -> None:
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")
        super().__init__(path, base_offset, max_index_bytes, writable, cache)

    def _count(self) -> int:
        return len(self._offsets)

    def _parse_entries(self, data: bytes) -> _Entries:
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
        return offsets[:count], positions[:count]

    def _set_entries(self, entries: _Entries) -> None:
        self._offsets, self._positions = entries

    def _clear_entries(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")

    def _truncate_entries(self, count: int) -> None:
        del self._offsets[count:]
        del self._positions[count:]

    @_leased
    def append(self, offset: int, position: int) -> None:
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

    @_leased
    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, else (base_offset, 0)."""
        relative = target_offset - self.base_offset
        if relative < 0:
            return self.base_offset, 0
        i = bisect_right(self._offsets, min(relative, INT32_MAX)) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    @_leased
    def last_entry(self) -> tuple[int, int]:
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    @_leased
    def entry(self, n: int) -> tuple[int, int]:
        return self.base_offset + self._offsets[n], self._positions[n]

    @_leased
    def truncate_to_position(self, position: int) -> None:
        """Drop the entries pointing at ``position`` or later (the log was cut there)."""
        keep = bisect_right(self._positions, position - 1)
        if keep < len(self._positions):
            self._truncate_entries(keep)
            self._rewrite_file(self._encode())
            self._resized()

    @_leased
    def replace_entries(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index with one write (used by rebuilds)."""
        self._clear_entries()
        for offset, position in entries:
            self._offsets.append(self._relative(offset))
            self._positions.append(position)
        self._rewrite_file(self._encode())
        self._resized()

    def _encode(self) -> bytes:
        pairs = array("i", bytes(8 * len(self._offsets)))
        pairs[0::2] = self._offsets
        pairs[1::2] = self._positions
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()

    @_leased
    def sanity_check(self, log_size_bytes: int, next_offset: int) -> None:
        """Raise CorruptIndex if an entry points past the log or past its last offset."""
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
        self, path: Path, base_offset: int, max_index_bytes: int, *, writable: bool = False,
        cache: IndexCache = INDEX_CACHE,
    ) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        super().__init__(path, base_offset, max_index_bytes, writable, cache)

    def _count(self) -> int:
        return len(self._timestamps)

    def is_full(self) -> bool:
        # One slot stays free for the final entry written when the segment rolls
        # (unless the index only has room for one entry at all).
        return self.entries >= max(1, self._max_entries - 1)

    def _parse_entries(self, data: bytes) -> _Entries:
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
        return timestamps, offsets

    def _set_entries(self, entries: _Entries) -> None:
        self._timestamps, self._offsets = entries

    def _clear_entries(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")

    def _truncate_entries(self, count: int) -> None:
        del self._timestamps[count:]
        del self._offsets[count:]

    @_leased
    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append if ``timestamp`` is larger than the last entry's; True if appended."""
        if timestamp < 0 or (self._timestamps and timestamp <= self._timestamps[-1]):
            return False
        if not self._writable:
            raise IndexFull(f"{self.path} is not writable")
        if not skip_full_check and self.is_full():
            raise IndexFull(f"{self.path} is full ({self.entries} entries)")
        if self._count() >= self._max_entries:
            raise IndexFull(f"{self.path} is full ({self._count()} entries)")
        relative = self._relative(offset)
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} is before the last entry's")
        self._write_entry(_TIME_ENTRY.pack(timestamp, relative), len(self._timestamps))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
        return True

    @_leased
    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target,
        else (-1, base_offset): scanning from the returned offset finds the first
        record with timestamp >= target."""
        i = bisect_right(self._timestamps, target_timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    @_leased
    def last_entry(self) -> tuple[int, int]:
        if not self._timestamps:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    @_leased
    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        keep = bisect_right(self._offsets, relative - 1)
        if keep < len(self._offsets):
            self._truncate_entries(keep)
            self._rewrite_file(self._encode())
            self._resized()

    @_leased
    def replace_entries(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the whole index with one write (used by rebuilds)."""
        self._clear_entries()
        for timestamp, offset in entries:
            self._timestamps.append(timestamp)
            self._offsets.append(self._relative(offset))
        self._rewrite_file(self._encode())
        self._resized()

    def _encode(self) -> bytes:
        return b"".join(_TIME_ENTRY.pack(t, o) for t, o in zip(self._timestamps, self._offsets))

    @_leased
    def sanity_check(self, next_offset: int) -> None:
        if self._offsets and self.base_offset + self._offsets[-1] >= next_offset:
            raise CorruptIndex(
                f"{self.path}: last entry {self.last_entry()} is beyond next offset {next_offset}"
            )
