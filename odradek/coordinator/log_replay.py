"""Reading an internal topic's partition log back, batch by batch, for a replay.

Both coordinators rebuild their state from their partitions
(`__consumer_offsets`, `__transaction_state`); this is the one reader they
share. It reads whole batches `READ_CHUNK_BYTES` at a time (a fresh read each
time, so a segment swapped by the cleaner between reads is no trouble) and
yields each batch's header with its records at or above the start offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..protocol import records as batches

if TYPE_CHECKING:
    from ..storage.log import PartitionLog

READ_CHUNK_BYTES = 4 * 1024 * 1024


def log_batches(
    plog: PartitionLog, start: int, end: int, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[tuple[batches.BatchHeader, list[batches.Record]]]:
    """(header, records) of every batch from `start` up to `end` (exclusive)."""
    offset = start
    while offset < end:
        data = plog.read(offset, chunk_bytes, end, True).records
        if not data:
            return
        for header in batches.iter_batch_headers(data):
            if header.next_offset <= offset:
                continue
            records = batches.decode_batch_records(data, header)
            if records and records[0].offset < offset:
                records = [r for r in records if r.offset >= offset]
            yield header, records
            offset = header.next_offset


def keyed_records(plog: PartitionLog, start: int, end: int) -> Iterator[batches.Record]:
    """The records with a key of every data batch (control batches left out)."""
    for header, records in log_batches(plog, start, end):
        if not header.is_control:
            yield from (r for r in records if r.key is not None)
