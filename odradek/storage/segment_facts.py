"""What a segment knows about its data, and how it learns it again.

``LogSegment`` (segment.py) keeps facts derived from its ``.log`` and indexes:
the next offset, the max timestamp and the offset of the batch holding it,
the bytes appended since the last index entry, the timestamp a time-based
roll counts from. Appends keep them current; this mixin computes them when a
segment is opened:

* ``_load_facts``: a clean open. The offset index's last entry gives a
  position; the batch headers from there to the end give the next offset
  (and a newer max timestamp, if the tail has one); both indexes are sanity
  checked against the file (``CorruptIndex`` makes the caller rebuild them).
* ``recover``: Kafka's ``LogSegment.recover``, an unclean open past the
  recovery point. ``segment_recovery.scan_valid_prefix`` CRC-checks every
  batch; the file is cut where the valid prefix ends and both indexes are
  rebuilt from the valid batches by ``segment_recovery.IndexBuilder``.
* ``rebuild_indexes``: the same from batch headers alone (no CRC), when an
  index file is missing or fails its sanity check, and after a truncation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from odradek.protocol.records import BATCH_OVERHEAD, BatchHeader, parse_batch_header
from odradek.storage.file_records import FileRecords
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.segment_recovery import IndexBuilder, scan_valid_prefix

LONG_MAX = 2**63 - 1


class SegmentFacts:
    """The load and recovery half of ``LogSegment``; the attributes are its."""

    base_offset: int
    index_interval_bytes: int
    active: bool
    log: FileRecords
    offset_index: OffsetIndex
    time_index: TimeIndex
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    rolling_based_timestamp_ms: int | None
    bytes_since_last_index_entry: int
    recovery_truncated_bytes: int

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    def _iter_headers(
        self, start: int, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(file position, header) of each whole batch in [start, end)."""
        return self.log.iter_headers(start, end)

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
            header = parse_batch_header(self.log.pread(BATCH_OVERHEAD, 0))
            self.rolling_based_timestamp_ms = header.max_timestamp

    # -- recovery ----------------------------------------------------------------
    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """CRC-check every batch, cut the log at the first bad one, rebuild the
        indexes; returns the number of bytes truncated. ``on_batch`` sees every
        valid batch header in order (the log rebuilds its leader epoch cache).
        The scan itself is ``segment_recovery.scan_valid_prefix``."""
        builder = IndexBuilder(self.base_offset, self.index_interval_bytes)
        with self.log.leased_fd() as fd:
            valid_end = scan_valid_prefix(fd, self.size_bytes, self.base_offset,
                                          builder, on_batch)
        truncated = self.size_bytes - valid_end
        if truncated:
            self.log.truncate(valid_end)
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
            self.log.truncate(valid_end)
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
