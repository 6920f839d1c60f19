"""The executor's read of one offset range through Fetch, decoded in bulk to Arrow.

Theory of operation
-------------------
`read_fetch` reads [from, until) of one partition with a `PartitionClient`
(fetch_client.py) and yields `pyarrow.RecordBatch`es of at most
``rows_per_batch`` rows in the schema of `format("odradek")`, the same rows,
column for column, as the librdkafka consumer path (reader.read_consumer):

1. ListOffsets earliest: a start below the log start offset is data loss
   (failOnDataLoss fails, else the read starts at the log start offset).
2. Fetch from the position; each response's records are whole record batches
   (the last one may be cut short by the size limit: it is fetched again).
   Every batch is checked (magic 2, length, CRC32C, as a consumer with
   check.crcs does). The position moves to each batch's next offset, so
   control batches and aborted data move it without yielding rows.
3. Control batches are skipped; under read_committed the batches of the
   aborted transactions the response lists are skipped with the consumer's
   rule (`AbortFilter`, remote_segment.py), one filter per response as the
   Java consumer builds one per completed fetch.
4. Kept batches are decompressed (one call per batch, every codec) and handed
   to `ArrowRecordBuilder` (arrow_records.py): no Python object per record.
5. OFFSET_OUT_OF_RANGE: below the log start offset is data loss as in 1;
   otherwise (past the end) it is an error. No progress for
   kafkaConsumer.pollTimeoutMs: the end offset is asked; if it is below
   `until` the records are gone (data loss), else a TimeoutError.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    InvalidRecords,
    batch_crc_ok,
    decompress,
)
from odradek.spark.arrow_records import MAX_BUFFER_BYTES, ArrowRecordBuilder
from odradek.spark.fetch_client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NONE,
    OFFSET_OUT_OF_RANGE,
    PARTITION_MAX_BYTES,
    FetchClientError,
    PartitionClient,
)
from odradek.spark.remote_segment import AbortFilter

log = logging.getLogger("odradek.spark")

# A batch larger than the partition's fetch size: the size is doubled up to this.
MAX_PARTITION_FETCH_BYTES = 128 * 1024 * 1024


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (failOnDataLoss=true)."""


class CorruptRecords(RuntimeError):
    """A fetched record batch that does not check out (CRC, magic, lengths)."""


def iter_fetched_batches(records: bytes, what: str) -> Iterator[BatchHeader]:
    """Headers of the whole, checked batches of a Fetch response's records
    (a batch cut short at the end is left out: it is fetched again)."""
    pos, end = 0, len(records)
    while end - pos >= BATCH_OVERHEAD:
        header = BatchHeader(pos, *HEADER_STRUCT.unpack_from(records, pos))
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecords(f"{what}: batch length {header.batch_length} at offset "
                                 f"{header.base_offset}")
        if pos + LOG_OVERHEAD + header.batch_length > end:
            return
        if header.magic != MAGIC_V2:
            raise CorruptRecords(f"{what}: magic {header.magic} at offset {header.base_offset}; "
                                 "only v2 record batches are read")
        if not batch_crc_ok(records, header):
            raise CorruptRecords(f"{what}: CRC mismatch in the batch at offset "
                                 f"{header.base_offset}")
        yield header
        pos += header.size


def read_fetch(
    bootstrap: str, topic: str, partition: int, from_offset: int, until_offset: int, *,
    arrow_schema: Any, isolation_level: str, fail_on_data_loss: bool, poll_timeout_ms: int,
    rows_per_batch: int, stats: dict[str, int] | None = None,
    security: dict[str, str] | None = None,
) -> Iterator[Any]:
    client = PartitionClient(bootstrap, topic, partition, isolation_level, security=security)
    try:
        yield from _read(client, from_offset, until_offset, arrow_schema, isolation_level,
                         fail_on_data_loss, poll_timeout_ms / 1000, rows_per_batch, stats)
    except FetchClientError as e:
        raise TimeoutError(str(e)) from e
    finally:
        client.close()


def _read(client: PartitionClient, start: int, until: int, arrow_schema: Any,
          isolation_level: str, fail_on_data_loss: bool, poll_timeout_s: float,
          rows_per_batch: int, stats: dict[str, int] | None) -> Iterator[Any]:
    name = f"{client.topic}-{client.partition}"
    low = client.list_offset(EARLIEST_TIMESTAMP, time.monotonic() + poll_timeout_s)
    if start < low:
        start = _data_loss(name, start, low, fail_on_data_loss)
    if start >= until:
        return
    builder = ArrowRecordBuilder(client.topic, client.partition, arrow_schema)
    committed = isolation_level == "read_committed"
    position = start
    last_progress = time.monotonic()
    fetches = batches = 0
    while position < until:
        got = client.fetch(position, last_progress + poll_timeout_s)
        fetches += 1
        if got.error == OFFSET_OUT_OF_RANGE:
            low = client.list_offset(EARLIEST_TIMESTAMP, time.monotonic() + poll_timeout_s)
            if position < low:
                position = start = _data_loss(name, position, low, fail_on_data_loss)
                continue
            raise DataLossError(f"{name}: offset {position} is out of range (the log holds "
                                f"{low}..{got.high_watermark})")
        if got.error != NONE:
            raise RuntimeError(f"{name}: Fetch error {got.error} at offset {position}")
        abort_filter = AbortFilter(got.aborted) if committed else None
        records = got.records
        before = position
        for header in iter_fetched_batches(records, f"{name} Fetch from {position}"):
            if header.next_offset <= position:
                continue  # the batch holding the fetch offset starts before it
            if header.base_offset >= until:
                position = until
                break
            if abort_filter is not None:
                skip = abort_filter.skip(records, header)
            else:
                skip = header.is_control
            if not skip:
                batches += 1
                body = memoryview(records)[header.position + BATCH_OVERHEAD:
                                           header.position + header.size]
                try:
                    blob = (bytes(decompress(body, header.compression,
                                             DEFAULT_MAX_DECOMPRESSED_BYTES))
                            if header.compression else bytes(body))
                    builder.add(blob, header, position, until)
                except InvalidRecords as e:
                    raise CorruptRecords(f"{name}: batch at offset {header.base_offset}: {e}"
                                         ) from e
            position = header.next_offset
            if builder.rows >= rows_per_batch or builder.buffered_bytes >= MAX_BUFFER_BYTES // 4:
                yield builder.flush()
        if position > before:
            last_progress = time.monotonic()
            client.partition_max_bytes = PARTITION_MAX_BYTES
            continue
        if records and client.partition_max_bytes < MAX_PARTITION_FETCH_BYTES:
            client.partition_max_bytes *= 2  # one batch larger than the fetch size
            continue
        if time.monotonic() - last_progress > poll_timeout_s:
            high = client.list_offset(LATEST_TIMESTAMP, time.monotonic() + poll_timeout_s)
            msg = (f"{name}: no records from offset {position} for {poll_timeout_s:.0f} s "
                   f"(want until {until}, broker has {low}..{high})")
            if high < until and not fail_on_data_loss:
                log.warning("%s; giving up on the rest (failOnDataLoss=false)", msg)
                break
            raise DataLossError(msg) if high < until else TimeoutError(msg)
    if builder.rows:
        yield builder.flush()
    if stats is not None:
        stats["fetches"] = stats.get("fetches", 0) + fetches
        stats["batches"] = stats.get("batches", 0) + batches
        stats["leader_lookups"] = stats.get("leader_lookups", 0) + client.leader_lookups


def _data_loss(name: str, start: int, low: int, fail: bool) -> int:
    msg = (f"{name}: offsets {start}..{low - 1} were deleted before they were read "
           f"(log start offset {low})")
    if fail:
        raise DataLossError(msg + "; set failOnDataLoss=false to skip them")
    log.warning("%s; skipping them", msg)
    return low
