"""Produce validation and offset assignment: a client's batches checked from
their headers and CRCs alone, then patched in place as the leader writes them.

No record is decoded here (the theory of operation is in records.py); the
batch layout is in batch_format.py, the only module this one imports.
"""

from __future__ import annotations

from crc32c import crc32c

from odradek.protocol.batch_format import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CORRUPT_MESSAGE,
    CRC_OFFSET,
    HEADER_STRUCT,
    INT16_STRUCT,
    INT32_STRUCT,
    INT64_STRUCT,
    INVALID_RECORD,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    MESSAGE_TOO_LARGE,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    UINT32_STRUCT,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    BatchHeader,
    Compression,
    InvalidRecords,
)

# -- produce validation and offset assignment ------------------------------------


def validate_produce_records(
    buf: bytes | bytearray | memoryview,
    max_message_bytes: int,
    *,
    allow_control: bool = False,
) -> list[BatchHeader]:
    """Check a produce buffer batch by batch from headers and CRCs only.

    The buffer must be one or more whole v2 batches. Raises ``InvalidRecords``:
    CORRUPT_MESSAGE for truncated data, bad lengths, unknown magic or a CRC
    mismatch; UNSUPPORTED_FOR_MESSAGE_FORMAT for magic 0/1; MESSAGE_TOO_LARGE
    when a batch (with its 12-byte log overhead) exceeds ``max_message_bytes``;
    UNSUPPORTED_COMPRESSION_TYPE for codec ids 5-7; INVALID_RECORD for
    header-level inconsistencies Kafka rejects from clients (count <= 0, count
    != lastOffsetDelta + 1, control batches, a producer id without a sequence).
    No record is decoded. Kafka's produce v3+ also demands exactly one batch
    per partition; that check belongs to the produce handler.
    """
    view = memoryview(buf)
    end = len(view)
    if end == 0:
        raise InvalidRecords(INVALID_RECORD, "produce data must contain at least one record batch")
    headers: list[BatchHeader] = []
    position = 0
    unpack = HEADER_STRUCT.unpack_from
    while position < end:
        if end - position < BATCH_OVERHEAD:
            if end - position >= MAGIC_OFFSET + 1 and view[position + MAGIC_OFFSET] < MAGIC_V2:
                raise InvalidRecords(
                    UNSUPPORTED_FOR_MESSAGE_FORMAT, "record batches must use magic 2"
                )
            raise InvalidRecords(CORRUPT_MESSAGE, "record batch is truncated")
        fields = unpack(view, position)
        batch_length = fields[1]
        magic = fields[3]
        if magic != MAGIC_V2:
            if 0 <= magic < MAGIC_V2:
                raise InvalidRecords(
                    UNSUPPORTED_FOR_MESSAGE_FORMAT,
                    f"record batches must use magic 2, got magic {magic}",
                )
            raise InvalidRecords(CORRUPT_MESSAGE, f"unknown record batch magic {magic}")
        if batch_length < MIN_BATCH_LENGTH:
            raise InvalidRecords(CORRUPT_MESSAGE, f"record batch length {batch_length} too small")
        size = batch_length + LOG_OVERHEAD
        if size > max_message_bytes:
            raise InvalidRecords(
                MESSAGE_TOO_LARGE,
                f"record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}",
            )
        if position + size > end:
            raise InvalidRecords(CORRUPT_MESSAGE, "record batch is truncated")
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != fields[4]:
            raise InvalidRecords(CORRUPT_MESSAGE, "record batch CRC32C mismatch")
        header = BatchHeader(position, *fields)
        _check_client_header(header, allow_control)
        headers.append(header)
        position += size
    return headers


def _check_client_header(header: BatchHeader, allow_control: bool) -> None:
    if header.compression > Compression.ZSTD:
        raise InvalidRecords(
            UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {header.compression}"
        )
    if header.records_count <= 0:
        raise InvalidRecords(INVALID_RECORD, "invalid record count for record batch")
    if header.last_offset_delta != header.records_count - 1:
        raise InvalidRecords(
            INVALID_RECORD, "inconsistent lastOffsetDelta and record count in record batch"
        )
    if header.is_control and not allow_control:
        raise InvalidRecords(INVALID_RECORD, "clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0 and not header.is_control:
        raise InvalidRecords(INVALID_RECORD, "idempotent record batch has no sequence number")


def assign_offsets(
    buf: bytearray,
    headers: list[BatchHeader],
    first_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int | None,
) -> int:
    """Patch offsets (and LogAppendTime) into ``buf`` in place; return the last offset.

    Batch i gets baseOffset = the previous batch's base + lastOffsetDelta + 1,
    starting at ``first_offset``; partitionLeaderEpoch is set on every batch.
    Both fields lie outside the CRC. With ``log_append_time_ms`` the timestamp
    type bit and maxTimestamp are rewritten and the CRC recomputed (Kafka leaves
    baseTimestamp alone). ``headers`` is updated in place with the patched
    headers, so the caller can index and account the batches as written.
    """
    next_offset = first_offset
    pack_int64 = INT64_STRUCT.pack_into
    pack_int32 = INT32_STRUCT.pack_into
    view = memoryview(buf)
    for i, header in enumerate(headers):
        position = header.position
        pack_int64(buf, position, next_offset)
        pack_int32(buf, position + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        attributes = header.attributes
        max_timestamp = header.max_timestamp
        crc = header.crc
        if log_append_time_ms is not None:
            attributes = attributes | TIMESTAMP_TYPE_MASK
            max_timestamp = log_append_time_ms
            INT16_STRUCT.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes)
            pack_int64(buf, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = crc32c(view[position + ATTRIBUTES_OFFSET : position + header.size])
            UINT32_STRUCT.pack_into(buf, position + CRC_OFFSET, crc)
        headers[i] = BatchHeader(
            position,
            next_offset,
            header.batch_length,
            partition_leader_epoch,
            header.magic,
            crc,
            attributes,
            header.last_offset_delta,
            header.base_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.records_count,
        )
        next_offset += header.last_offset_delta + 1
    return next_offset - 1


