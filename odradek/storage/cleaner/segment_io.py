"""File I/O of a cleaner worker: reading batches, writing ``.cleaned`` segments.

Theory of operation
-------------------
* ``read_batches`` walks a segment's ``.log`` with reads of the worker's I/O
  buffer size (``log.cleaner.io.buffer.size`` / threads / 2, as Kafka splits it
  between reads and writes), yielding each whole batch as a view into the
  chunk; a batch larger than the buffer is read on its own (bounded by
  ``max.message.bytes`` plus slack: a larger one ends the walk as corrupt).
* ``CleanedSegmentWriter`` buffers output batches and writes them to
  ``<base>.log.cleaned``, computing the offset and time index entries with the
  rule ``LogSegment.append`` uses (an entry once more than
  ``index.interval.bytes`` were written since the last one; a closing time
  entry for the segment's max timestamp), so the cleaned segment's indexes are
  the ones a rebuild would produce. ``finish`` writes ``.index.cleaned`` and
  ``.timeindex.cleaned`` (and ``.txnindex.cleaned`` when aborted transactions
  are kept), fsyncs every file once, at the end (syncing the ``.log`` every
  few MB while writing it was measured to double produce latency on ext4:
  each fdatasync forces a journal commit the broker's appends wait behind) and gives the ``.log`` the modification time of
  the newest segment it replaces (as Kafka does, so time-based retention of
  ``compact,delete`` logs is not reset by cleaning).
* ``Throttler`` sleeps to keep read + written bytes under
  ``log.cleaner.io.max.bytes.per.second`` (this worker's share).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.storage.swap_files import CLEANED_SUFFIX

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
TXN_ENTRY_BYTES = 34  # Kafka's .txnindex entry (storage/txn_index.py)
_TXN_LAST_OFFSET = struct.Struct(">q")
_TXN_LAST_OFFSET_AT = 18
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
# A batch may exceed max.message.bytes a little (a topic's limit lowered later).
BATCH_SLACK_BYTES = 1024 * 1024
MIN_IO_BUFFER_BYTES = 64 * 1024


def segment_path(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"


class Throttler:
    """Keeps the average I/O rate under ``bytes_per_second`` (inf: no limit)."""

    def __init__(
        self,
        bytes_per_second: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._sleep = sleep
        self._clock = clock
        self._start = clock()
        self._bytes = 0
        self.slept_seconds = 0.0

    def maybe_throttle(self, n_bytes: int) -> None:
        if self.bytes_per_second == float("inf") or self.bytes_per_second <= 0:
            return
        self._bytes += n_bytes
        ahead = self._bytes / self.bytes_per_second - (self._clock() - self._start)
        if ahead > 0.001:
            self._sleep(ahead)
            self.slept_seconds += ahead


def read_batches(
    path: Path,
    size_bytes: int,
    buffer_bytes: int,
    max_batch_bytes: int,
    throttler: Throttler | None = None,
    start: int = 0,
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(file position, header, buffer) of each whole batch in [start, size); the
    batch lies in the buffer at ``header.position`` (batches share a chunk)."""
    buffer_bytes = max(buffer_bytes, MIN_IO_BUFFER_BYTES)
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        position = start
        while size_bytes - position >= BATCH_OVERHEAD:
            chunk = os.pread(fd, min(buffer_bytes, size_bytes - position), position)
            if throttler is not None:
                throttler.maybe_throttle(len(chunk))
            view = memoryview(chunk)
            consumed = 0
            for header in iter_batch_headers(chunk):
                yield position + header.position, header, view
                consumed = header.position + header.size
            if consumed == 0:
                header = parse_batch_header(chunk)
                if (
                    header.batch_length < MIN_BATCH_LENGTH
                    or header.size > max_batch_bytes + BATCH_SLACK_BYTES
                    or position + header.size > size_bytes
                ):
                    return  # a torn or corrupt tail: nothing more to read
                data = os.pread(fd, header.size, position)
                if len(data) < header.size:
                    return
                if throttler is not None:
                    throttler.maybe_throttle(len(data))
                yield position, header, memoryview(data)
                consumed = header.size
            position += consumed


def read_txn_index_entries(path: Path) -> list[bytes]:
    """The raw 34-byte entries of a ``.txnindex`` ([] if there is none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    usable = len(data) - len(data) % TXN_ENTRY_BYTES
    return [data[i : i + TXN_ENTRY_BYTES] for i in range(0, usable, TXN_ENTRY_BYTES)]


def txn_entry_last_offset(entry: bytes) -> int:
    return int(_TXN_LAST_OFFSET.unpack_from(entry, _TXN_LAST_OFFSET_AT)[0])


class CleanedSegmentWriter:
    """Writes one ``<base>.log.cleaned`` and its indexes."""

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        index_interval_bytes: int,
        buffer_bytes: int,
        throttler: Throttler | None = None,
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.log_path = segment_path(dir, base_offset, LOG_SUFFIX + CLEANED_SUFFIX)
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._buffer = bytearray()
        self._buffer_bytes = max(buffer_bytes, MIN_IO_BUFFER_BYTES)
        self._throttler = throttler
        self.size_bytes = 0  # bytes appended (written or buffered)
        self._interval = index_interval_bytes
        self._bytes_since_entry = 0
        self.max_timestamp = -1
        self._offset_of_max = base_offset
        self.offset_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []
        self.txn_entries: list[bytes] = []
        self.bytes_written = 0

    def append(self, batch: bytes | bytearray | memoryview, last_offset: int,
               max_timestamp: int) -> None:
        """Add one whole batch; ``last_offset`` / ``max_timestamp`` are its header's."""
        if last_offset - self.base_offset > 2**31 - 1:
            raise ValueError(f"offset {last_offset} does not fit segment {self.base_offset}")
        position = self.size_bytes
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self._offset_of_max = last_offset
        if self._bytes_since_entry > self._interval:
            self.offset_entries.append((last_offset - self.base_offset, position))
            if self.max_timestamp >= 0 and (
                not self.time_entries or self.max_timestamp > self.time_entries[-1][0]
            ):
                self.time_entries.append((self.max_timestamp, self._offset_of_max))
            self._bytes_since_entry = 0
        self._bytes_since_entry += len(batch)
        self._buffer += batch
        self.size_bytes += len(batch)
        if self.size_bytes > 2**31 - 1:
            raise ValueError(f"cleaned segment {self.base_offset} would exceed 2 GiB")
        if len(self._buffer) >= self._buffer_bytes:
            self._flush_buffer()

    def _flush_buffer(self) -> None:
        view = memoryview(self._buffer)
        position = self.size_bytes - len(self._buffer)
        while view:
            written = os.pwrite(self._fd, view, position)
            view = view[written:]
            position += written
        if self._throttler is not None:
            self._throttler.maybe_throttle(len(self._buffer))
        self.bytes_written += len(self._buffer)
        self._buffer = bytearray()

    def finish(self, mtime_ns: int | None) -> tuple[str, ...]:
        """Write everything, fsync, close; returns the suffixes written."""
        self._flush_buffer()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        if self.max_timestamp >= 0 and (
            not self.time_entries or self.max_timestamp > self.time_entries[-1][0]
        ):
            self.time_entries.append((self.max_timestamp, self._offset_of_max))
        suffixes = [LOG_SUFFIX]
        offset_index = b"".join(_OFFSET_ENTRY.pack(o, p) for o, p in self.offset_entries)
        _write_synced(segment_path(self.dir, self.base_offset, INDEX_SUFFIX + CLEANED_SUFFIX),
                      offset_index)
        suffixes.append(INDEX_SUFFIX)
        time_index = b"".join(
            _TIME_ENTRY.pack(t, o - self.base_offset) for t, o in self.time_entries
        )
        _write_synced(
            segment_path(self.dir, self.base_offset, TIME_INDEX_SUFFIX + CLEANED_SUFFIX),
            time_index)
        suffixes.append(TIME_INDEX_SUFFIX)
        if self.txn_entries:
            _write_synced(
                segment_path(self.dir, self.base_offset, TXN_INDEX_SUFFIX + CLEANED_SUFFIX),
                b"".join(self.txn_entries))
            suffixes.append(TXN_INDEX_SUFFIX)
        if mtime_ns is not None:
            os.utime(self.log_path, ns=(mtime_ns, mtime_ns))
        return tuple(suffixes)

    def abandon(self) -> None:
        """Close and remove whatever was written (an error or shutdown)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_path(self.dir, self.base_offset, suffix + CLEANED_SUFFIX).unlink(
                missing_ok=True)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
