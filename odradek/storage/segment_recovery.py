"""Recovering a segment from its ``.log`` alone: the CRC scan and the index rebuild rule.

Kafka's ``LogSegment.recover``: on an unclean start the log loader hands every
segment past the recovery point to ``LogSegment.recover``, which calls
``scan_valid_prefix`` here: it reads the ``.log`` in chunks of
``RECOVERY_CHUNK_BYTES``, CRC-checks every batch, and stops at the first batch
that is torn, fails its CRC or is implausible (wrong magic, offsets going
backwards or out of the segment's int32 relative range). Everything before
that point is the valid prefix; the segment cuts its file there.

``IndexBuilder`` recomputes the sparse ``.index`` / ``.timeindex`` entries and
the segment's derived facts from batch headers in order, with exactly the rule
``LogSegment.append`` uses, so that a rebuilt index equals the one written while
appending. ``LogSegment.rebuild_indexes`` feeds it headers without CRC checks.

This module touches no segment object: it reads a file descriptor and returns
numbers, so it sits below ``segment.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    batch_crc_ok,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.storage.index import INT32_MAX

__all__ = ["RECOVERY_CHUNK_BYTES", "IndexBuilder", "scan_valid_prefix"]

NO_TIMESTAMP = -1
# Recovery reads (and CRC-checks) the log in chunks of this size.
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024


class IndexBuilder:
    """Recomputes a segment's index entries and facts from its batches in order,
    with the same rule as ``LogSegment.append``."""

    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        self.offset_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []
        self.bytes_since = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max = base_offset
        self.next_offset = base_offset
        self.interval = index_interval_bytes

    def add(self, position: int, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max = header.last_offset
        if self.bytes_since > self.interval:
            self.offset_entries.append((header.last_offset, position))
            if self.max_timestamp >= 0 and (
                not self.time_entries or self.max_timestamp > self.time_entries[-1][0]
            ):
                self.time_entries.append((self.max_timestamp, self.offset_of_max))
            self.bytes_since = 0
        self.bytes_since += header.size
        self.next_offset = header.next_offset

    def finish(self, *, active: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The offset and time index entries. An inactive segment's time index ends
        with its max timestamp (Kafka appends it on roll); the active one's does not yet."""
        if (
            not active
            and self.max_timestamp >= 0
            and (not self.time_entries or self.max_timestamp > self.time_entries[-1][0])
        ):
            self.time_entries.append((self.max_timestamp, self.offset_of_max))
        return self.offset_entries, self.time_entries


def scan_valid_prefix(fd: int, size_bytes: int, base_offset: int, builder: IndexBuilder,
                      on_batch: Callable[[BatchHeader], None] | None = None) -> int:
    """Length of the valid prefix of the ``.log`` behind ``fd``: whole, plausible,
    CRC-correct batches from position 0. Every valid batch goes to ``builder`` and
    ``on_batch`` in order."""
    expected_min_offset = base_offset
    position = 0
    while position < size_bytes:
        chunk = os.pread(fd, min(RECOVERY_CHUNK_BYTES, size_bytes - position), position)
        consumed, bad = 0, False
        for header in iter_batch_headers(chunk):
            if not _plausible(header, expected_min_offset, base_offset) or not batch_crc_ok(
                chunk, header
            ):
                bad = True
                break
            builder.add(position + header.position, header)
            if on_batch is not None:
                on_batch(header)
            expected_min_offset = header.next_offset
            consumed = header.position + header.size
        if bad:
            position += consumed
            break
        if consumed == 0:
            # One batch larger than the chunk, or a torn/garbage tail.
            if len(chunk) < BATCH_OVERHEAD:
                break
            header = parse_batch_header(chunk)
            if header.batch_length < MIN_BATCH_LENGTH or position + header.size > size_bytes:
                break
            data = os.pread(fd, header.size, position)
            if not _plausible(header, expected_min_offset, base_offset) or not batch_crc_ok(
                data, header
            ):
                break
            builder.add(position, header)
            if on_batch is not None:
                on_batch(header)
            expected_min_offset = header.next_offset
            consumed = header.size
        position += consumed
    return position


def _plausible(header: BatchHeader, expected_min_offset: int, base_offset: int) -> bool:
    return (
        header.magic == MAGIC_V2
        and header.base_offset >= expected_min_offset
        and header.last_offset_delta >= 0
        and header.last_offset - base_offset <= INT32_MAX
    )
