"""Kafka record batch v2 (magic 2) as bytes: validate, patch, build, decode.

Theory of operation
-------------------
Produce and fetch never decode records. A produce buffer is checked batch by
batch from the 61-byte header alone (magic, lengths, CRC32C over the batch
bytes, header-level consistency) and written to the log as received, with only
the fields outside the CRC (``baseOffset``, ``partitionLeaderEpoch``) patched in
place. ``LogAppendTime`` also rewrites ``attributes``/``maxTimestamp`` and so the
CRC, still without touching the records. Building and decoding whole records
(``build_batch``, ``decode_batch_records``) is for tests, control markers,
coordinators and tools, i.e. off the hot path.

Modules
-------
This module builds and decodes whole records and is the one import point for
record batches: it re-exports ``batch_format.py`` (the layout below, the
header, header-only reads), ``batch_validation.py`` (produce checks, offset
assignment) and ``compression.py``; those import only ``batch_format.py``.
The batch layout is documented in ``batch_format.py``.

A record (varints are zigzag-encoded, as protobuf ``sint32``/``sint64``)::

    length varint          bytes of the record after this field
    attributes int8        unused, 0
    timestampDelta varlong timestamp - baseTimestamp
    offsetDelta varint     offset - baseOffset
    keyLength varint       -1 = null key
    key bytes
    valueLength varint     -1 = null value
    value bytes
    headersCount varint
    per header: keyLength varint, key (utf-8), valueLength varint (-1 = null), value

A control record (transaction marker) has key ``version int16 = 0, type int16``
(0 ABORT, 1 COMMIT) and value ``version int16 = 0, coordinatorEpoch int32``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from odradek.protocol.batch_format import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CORRUPT_MESSAGE,
    CRC_OFFSET,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DELETE_HORIZON_MASK,
    HEADER_STRUCT,
    INT32_MAX,
    INVALID_RECORD,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    MESSAGE_TOO_LARGE,
    MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    OFFSET_OUT_OF_RANGE,
    PARTITION_LEADER_EPOCH_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    UINT32_STRUCT,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    BatchHeader,
    Compression,
    ControlRecordType,
    InvalidRecords,
    Record,
    TimestampType,
    batch_crc_ok,
    decompression_bound,
    iter_batch_headers,
    parse_batch_header,
)
from odradek.protocol.batch_validation import assign_offsets, validate_produce_records
from odradek.protocol.compression import (
    compress,
    decompress,
)

# Everything about record batches is importable from here.
__all__ = [
    "ATTRIBUTES_OFFSET",
    "BATCH_OVERHEAD",
    "COMPRESSION_MASK",
    "CONTROL_MASK",
    "CORRUPT_MESSAGE",
    "CRC_OFFSET",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "DELETE_HORIZON_MASK",
    "INT32_MAX",
    "INVALID_RECORD",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V2",
    "MAX_TIMESTAMP_OFFSET",
    "MESSAGE_TOO_LARGE",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "OFFSET_OUT_OF_RANGE",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "UNSUPPORTED_COMPRESSION_TYPE",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "BatchHeader",
    "Compression",
    "ControlRecordType",
    "InvalidRecords",
    "Record",
    "TimestampType",
    "assign_offsets",
    "batch_crc_ok",
    "build_batch",
    "build_control_batch",
    "compress",
    "decode_batch_records",
    "decompress",
    "decompression_bound",
    "iter_batch_headers",
    "parse_batch_header",
    "parse_control_record",
    "validate_produce_records",
    "write_varint",
]

# -- varints ----------------------------------------------------------------------


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint/varlong (sint64 encoding; valid for int32 too)."""
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


_MAX_VARINT_BYTES = 10


def _read_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; return (value, next position)."""
    shift = 0
    result = 0
    limit = min(end, pos + _MAX_VARINT_BYTES)
    while pos < limit:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise InvalidRecords(CORRUPT_MESSAGE, "malformed or truncated varint in record")


# -- building -----------------------------------------------------------------------


def _encode_record(out: bytearray, record: Record, offset_delta: int, base_timestamp: int) -> None:
    body = bytearray(b"\x00")  # attributes
    write_varint(body, record.timestamp - base_timestamp)
    write_varint(body, offset_delta)
    if record.key is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(record.key))
        body += record.key
    if record.value is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(record.value))
        body += record.value
    write_varint(body, len(record.headers))
    for header_key, header_value in record.headers:
        encoded_key = header_key.encode("utf-8")
        write_varint(body, len(encoded_key))
        body += encoded_key
        if header_value is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(header_value))
            body += header_value
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch (with a valid CRC).

    If the first record's offset is below ``base_offset`` (e.g. -1, or 0 with a
    larger base), records are numbered base_offset, base_offset + 1, ... and
    their own offsets ignored. Otherwise each record's offset delta is
    ``record.offset - base_offset``, strictly increasing (gaps are allowed, as
    after compaction). ``max_timestamp``
    overrides the computed maximum (for LogAppendTime batches).
    """
    if not 0 <= compression <= Compression.ZSTD:
        raise ValueError(f"unknown compression codec id {compression}")
    body = bytearray()
    base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    computed_max_timestamp = NO_TIMESTAMP
    previous_delta = -1
    sequential = bool(records) and records[0].offset < base_offset
    for record in records:
        delta = previous_delta + 1 if sequential else record.offset - base_offset
        if delta <= previous_delta or delta > INT32_MAX:
            raise ValueError(f"record offset {record.offset} out of order for base {base_offset}")
        _encode_record(body, record, delta, base_timestamp)
        computed_max_timestamp = max(computed_max_timestamp, record.timestamp)
        previous_delta = delta
    last_offset_delta = max(previous_delta, 0)
    if max_timestamp is None:
        max_timestamp = computed_max_timestamp
    payload = compress(body, compression) if compression else bytes(body)
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    batch = bytearray(BATCH_OVERHEAD)
    HEADER_STRUCT.pack_into(
        batch,
        0,
        base_offset,
        BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC_V2,
        0,  # crc, filled below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch += payload
    UINT32_STRUCT.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def build_control_batch(
    kind: str,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp_ms: int = NO_TIMESTAMP,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker."""
    marker = ControlRecordType[kind.upper()]
    record = Record(
        offset=base_offset,
        timestamp=timestamp_ms,
        key=_CONTROL_KEY.pack(0, marker),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_record(record: Record) -> tuple[ControlRecordType, int]:
    """(marker type, coordinator epoch) of a control record; CORRUPT_MESSAGE if malformed."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise InvalidRecords(CORRUPT_MESSAGE, "control record key is too short")
    _version, kind = _CONTROL_KEY.unpack_from(record.key)
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= _CONTROL_VALUE.size:
        _version, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
    try:
        return ControlRecordType(kind), coordinator_epoch
    except ValueError:
        raise InvalidRecords(CORRUPT_MESSAGE, f"unknown control record type {kind}") from None


# -- decoding -------------------------------------------------------------------------


def decode_batch_records(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[Record]:
    """Decompress and decode every record of the batch at ``header.position``.

    Offsets and timestamps are absolute; with LogAppendTime every record takes
    the batch's maxTimestamp, as Kafka clients do. Raises CORRUPT_MESSAGE for
    malformed data (the CRC is not rechecked here: see ``batch_crc_ok``).
    """
    view = memoryview(buf)
    start = header.position + BATCH_OVERHEAD
    end = header.position + header.size
    if end > len(view) or header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch is truncated")
    if header.records_count < 0:
        raise InvalidRecords(CORRUPT_MESSAGE, "negative record count")
    payload: bytes | bytearray | memoryview
    if header.compression:
        payload = decompress(view[start:end], header.compression, max_decompressed_bytes)
        pos, stop = 0, len(payload)
    else:
        payload, pos, stop = view, start, end
    log_append_time = header.attributes & TIMESTAMP_TYPE_MASK
    records: list[Record] = []
    for _ in range(header.records_count):
        length, pos = _read_varint(payload, pos, stop)
        record_end = pos + length
        if length < 1 or record_end > stop:
            raise InvalidRecords(CORRUPT_MESSAGE, "record length out of bounds")
        pos += 1  # attributes
        timestamp_delta, pos = _read_varint(payload, pos, record_end)
        offset_delta, pos = _read_varint(payload, pos, record_end)
        key, pos = _read_bytes(payload, pos, record_end)
        value, pos = _read_bytes(payload, pos, record_end)
        header_count, pos = _read_varint(payload, pos, record_end)
        if header_count < 0 or header_count > length:
            raise InvalidRecords(CORRUPT_MESSAGE, "invalid record header count")
        record_headers = []
        for _h in range(header_count):
            raw_key, pos = _read_bytes(payload, pos, record_end)
            if raw_key is None:
                raise InvalidRecords(CORRUPT_MESSAGE, "null record header key")
            header_value, pos = _read_bytes(payload, pos, record_end)
            try:
                header_key = raw_key.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidRecords(CORRUPT_MESSAGE, "record header key is not utf-8") from None
            record_headers.append((header_key, header_value))
        if pos != record_end:
            raise InvalidRecords(CORRUPT_MESSAGE, "record length does not match its fields")
        timestamp = (
            header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
        )
        records.append(
            Record(
                header.base_offset + offset_delta,
                timestamp,
                key,
                value,
                tuple(record_headers),
            )
        )
    if pos != stop:
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch has trailing bytes after its records")
    return records


def _read_bytes(
    buf: bytes | bytearray | memoryview, pos: int, end: int
) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos, end)
    if length < 0:
        if length != -1:
            raise InvalidRecords(CORRUPT_MESSAGE, f"invalid field length {length}")
        return None, pos
    if pos + length > end:
        raise InvalidRecords(CORRUPT_MESSAGE, "record field runs past the record")
    return bytes(buf[pos : pos + length]), pos + length
