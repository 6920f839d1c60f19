"""A segment's ``.log`` file (Kafka's ``FileRecords``): its size, positional
reads and writes, and the scan of batch headers.

The file holds record batches v2 back to back (the format is described in
``storage/segment.py``). This module knows bytes and batch boundaries, never
indexes: ``LogSegment`` (segment.py) owns one ``FileRecords`` beside its
``.index`` / ``.timeindex`` and keeps the facts derived from both.

Rules
-----
* ``size_bytes`` is the file's length as odradek wrote it; every write goes
  through ``append`` (one positional write of whole batches at the end; a
  failed write is cut off again so no torn tail is left) or ``truncate``.
* ``iter_headers`` reads header-sized prefixes in chunks of
  ``SCAN_CHUNK_BYTES``; records are never decoded here.
* Names: ``<base:020d><suffix>``, ``segment_file_name``.
* A closed segment's file is opened lazily and closed when idle by the LRU
  of open segment files (open_files.py); every use holds a lease.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.storage.file_slice import MAX_LIVE_SLICES, FileSlice
from odradek.storage.index import INT32_MAX
from odradek.storage.open_files import PROCESS_LIMIT_ERRNOS, SEGMENT_FILES, OpenSegmentFiles

LOG_SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

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


class FileRecords:
    """The ``.log`` file of one segment.

    A pinned file stays open. An unpinned one (every segment's, active or
    closed, since issue 15.3) is in the process's LRU of open segment files
    (open_files.py): it may be closed while idle and is opened again on the
    next use. Every use of the descriptor is under a lease (``leased_fd``),
    so eviction never closes it under a read in flight; ``close`` is for
    good (the segment is closed, renamed or deleted)."""

    def __init__(self, path: Path, *, pinned: bool = True,
                 lru: OpenSegmentFiles = SEGMENT_FILES) -> None:
        self.path = path
        self._lru = lru
        self._pinned = pinned
        self._users = 0
        self._closed = False
        self._close_on_release = False
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size
        if not pinned:
            with lru.lock:
                lru.admit_locked(self, reopened=False)

    @property
    def closed(self) -> bool:
        """Closed for good (not merely idle and evicted)."""
        return self._closed

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open now."""
        return self._fd >= 0

    @property
    def pinned(self) -> bool:
        return self._pinned

    def unpin(self) -> None:
        """The segment rolled: its file joins the LRU (and may be closed when idle)."""
        with self._lru.lock:
            if not self._pinned or self._closed:
                return
            self._pinned = False
            if self._fd >= 0:
                self._lru.admit_locked(self, reopened=False)

    # -- leases ----------------------------------------------------------------------
    def _acquire(self) -> int:
        lru = self._lru
        with lru.lock:
            if self._closed:
                raise OSError(errno.EBADF, f"{self.path} is closed")
            if self._fd < 0:
                self._fd = self._reopen_locked()
                lru.admit_locked(self, reopened=True)
            elif not self._pinned:
                lru.touch_locked(self)
            self._users += 1
            return self._fd

    def _release(self) -> None:
        with self._lru.lock:
            self._users -= 1
            if self._users == 0 and self._close_on_release:
                self._close_locked()

    def _reopen_locked(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR)
        except OSError as e:
            if e.errno not in PROCESS_LIMIT_ERRNOS or not self._lru.shed_idle_locked():
                raise
            return os.open(self.path, os.O_RDWR)

    @contextmanager
    def leased_fd(self) -> Iterator[int]:
        """The descriptor, opened if need be and kept open until the block ends."""
        fd = self._acquire()
        try:
            yield fd
        finally:
            self._release()

    # called by the LRU with its lock held
    def _in_use(self) -> bool:
        return self._users > 0

    def _close_idle(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- I/O -------------------------------------------------------------------------
    def pread(self, size: int, position: int) -> bytes:
        fd = self._acquire()
        try:
            return os.pread(fd, size, position)
        finally:
            self._release()

    def slice(self, size: int, position: int) -> FileSlice | bytes:
        """The range as a `FileSlice` (sent with sendfile, file_slice.py); its
        bytes instead when the process has no descriptor to spare or holds
        MAX_LIVE_SLICES slices already."""
        fd = self._acquire()
        try:
            if FileSlice.live >= MAX_LIVE_SLICES:
                return os.pread(fd, size, position)
            try:
                return FileSlice(os.dup(fd), position, size)
            except OSError as e:
                if e.errno not in PROCESS_LIMIT_ERRNOS:
                    raise
                return os.pread(fd, size, position)
        finally:
            self._release()

    def append(self, buf: bytes | bytearray | memoryview) -> int:
        """Write ``buf`` at the end; returns the position it starts at."""
        start = self.size_bytes
        with self.leased_fd() as fd:
            try:
                _pwrite_all(fd, buf, start)
            except OSError:
                # Leave no torn tail behind for readers or the next append.
                os.ftruncate(fd, start)
                raise
        self.size_bytes = start + len(buf)
        return start

    def truncate(self, position: int) -> None:
        with self.leased_fd() as fd:
            os.ftruncate(fd, position)
        self.size_bytes = position

    def iter_headers(
        self, start: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of each whole batch in [start, end)."""
        end = self.size_bytes if end is None else end
        position = start
        pread = self.pread
        while end - position >= BATCH_OVERHEAD:
            chunk = pread(min(SCAN_CHUNK_BYTES, end - position), position)
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

    def flush(self) -> None:
        with self.leased_fd() as fd:
            os.fsync(fd)

    def dup_fd(self) -> list[int]:
        """A descriptor of the file for an fsync elsewhere (none when closed for
        good); the caller closes it. An idle, evicted file is opened read-only
        (an fsync through any descriptor syncs the file)."""
        with self._lru.lock:
            if self._closed:
                return []
            if self._fd >= 0:
                return [os.dup(self._fd)]
        try:
            return [os.open(self.path, os.O_RDONLY)]
        except FileNotFoundError:
            return []

    def close(self) -> None:
        """Close for good (the segment is closed, renamed or deleted)."""
        with self._lru.lock:
            if self._closed:
                return
            self._closed = True
            self._lru.forget_locked(self)
            if self._users:
                self._close_on_release = True  # a reader on another thread finishes first
            else:
                self._close_locked()

    def _close_locked(self) -> None:
        self._close_on_release = False
        self._close_idle()


def whole_batches_before(data: bytes, max_offset: int) -> int:
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
