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
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.storage.index import INT32_MAX

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
    """The ``.log`` file of one segment."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def fd(self) -> int:
        return self._fd

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self._fd, size, position)

    def append(self, buf: bytes | bytearray | memoryview) -> int:
        """Write ``buf`` at the end; returns the position it starts at."""
        start = self.size_bytes
        try:
            _pwrite_all(self._fd, buf, start)
        except OSError:
            # Leave no torn tail behind for readers or the next append.
            os.ftruncate(self._fd, start)
            raise
        self.size_bytes = start + len(buf)
        return start

    def truncate(self, position: int) -> None:
        os.ftruncate(self._fd, position)
        self.size_bytes = position

    def iter_headers(
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

    def flush(self) -> None:
        os.fsync(self._fd)

    def dup_fd(self) -> list[int]:
        """A duplicate of the descriptor (none when closed); the caller closes it."""
        return [os.dup(self._fd)] if self._fd >= 0 else []

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
