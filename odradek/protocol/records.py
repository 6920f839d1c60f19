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

Batch layout (all integers big-endian, offsets in bytes from the batch start)
-----------------------------------------------------------------------------
====== ==== =====================  ==========================================
offset size field                  notes
====== ==== =====================  ==========================================
0      8    baseOffset int64       patched by the leader (outside the CRC)
8      4    batchLength int32      bytes after this field (size - 12)
12     4    partitionLeaderEpoch   patched by the leader (outside the CRC)
16     1    magic int8             must be 2
17     4    crc uint32             CRC32C (Castagnoli) of bytes [21, end)
21     2    attributes int16       bits 0-2 compression (0 none, 1 gzip,
                                   2 snappy, 3 lz4, 4 zstd); bit 3 timestamp
                                   type (1 = LogAppendTime); bit 4
                                   transactional; bit 5 control; bit 6
                                   has delete horizon (compaction)
23     4    lastOffsetDelta int32  last offset - baseOffset
27     8    baseTimestamp int64    timestamp of the first record
35     8    maxTimestamp int64     largest record timestamp (LogAppendTime:
                                   the append time, used for every record)
43     8    producerId int64       -1 if not idempotent
51     2    producerEpoch int16
53     4    baseSequence int32     -1 if not idempotent
57     4    recordsCount int32
61     ..   records                compressed as one blob when bit 0-2 != 0
====== ==== =====================  ==========================================

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

Compression framing: gzip is RFC 1952; snappy is written in the xerial framing
Kafka's Java client uses (``b"\\x82SNAPPY\\x00"``, int32 version 1, int32
compatible version 1, then ``[int32 length, raw snappy block]*``) and read in
xerial, raw or the official snappy framing format (librdkafka sends raw or
xerial); lz4 is the LZ4 frame format with independent blocks (Kafka's reader
decodes each block on its own); zstd is a zstd frame.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

import cramjam
from crc32c import crc32c

# -- Kafka error codes used by this module -------------------------------------
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

# -- layout constants -----------------------------------------------------------
BATCH_OVERHEAD = 61  # bytes of the v2 batch header, up to and including recordsCount
LOG_OVERHEAD = 12  # baseOffset(8) + batchLength(4)
MAGIC_V2 = 2
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end of batch)
LAST_OFFSET_DELTA_OFFSET = 23
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
# batchLength counts the bytes after itself: the smallest legal batch has no records.
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD
INT32_MAX = 2**31 - 1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Decoding a compressed batch is bounded: a hostile 1 MB zstd batch can expand
# to gigabytes. Callers that need more pass max_decompressed_bytes.
DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_CRC_AND_ATTRIBUTES = struct.Struct(">Ih")
assert _HEADER.size == BATCH_OVERHEAD


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


class InvalidRecords(Exception):
    """A buffer that is not acceptable record data; ``error_code`` is the Kafka answer."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class BatchHeader:
    position: int  # byte position of the batch inside the buffer it was parsed from
    base_offset: int
    batch_length: int  # as in the header (total size = batch_length + 12)
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


@dataclass(frozen=True, slots=True)
class Record:
    offset: int = -1  # absolute (base_offset + delta) when decoded; -1 = "next" when building
    timestamp: int = NO_TIMESTAMP  # absolute ms
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# -- header parsing -------------------------------------------------------------


def parse_batch_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``position``; raises CORRUPT_MESSAGE if it is cut short."""
    if position < 0 or len(buf) - position < BATCH_OVERHEAD:
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch header is truncated")
    return BatchHeader(position, *_HEADER.unpack_from(buf, position))


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, start: int = 0
) -> Iterator[BatchHeader]:
    """Walk whole batches from ``start``; stop (no error) at a partial trailing batch.

    Does not check magic or CRC: it is meant for data already validated (log
    files, fetch responses). A batchLength too small to hold a header stops the
    walk as well, so a corrupt buffer can never loop.
    """
    end = len(buf)
    position = start
    unpack = _HEADER.unpack_from
    while end - position >= BATCH_OVERHEAD:
        fields = unpack(buf, position)
        batch_length = fields[1]
        if batch_length < MIN_BATCH_LENGTH or position + LOG_OVERHEAD + batch_length > end:
            return
        yield BatchHeader(position, *fields)
        position += LOG_OVERHEAD + batch_length


def batch_crc_ok(buf: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    """True when the stored CRC32C matches the batch bytes [attributes, end)."""
    view = memoryview(buf)
    start = header.position + ATTRIBUTES_OFFSET
    end = header.position + header.size
    return crc32c(view[start:end]) == header.crc


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
    unpack = _HEADER.unpack_from
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
    pack_int64 = _INT64.pack_into
    pack_int32 = _INT32.pack_into
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
            _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes)
            pack_int64(buf, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = crc32c(view[position + ATTRIBUTES_OFFSET : position + header.size])
            _UINT32.pack_into(buf, position + CRC_OFFSET, crc)
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


# -- compression ------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"

# LZ4 frame: magic, FLG (version 01, independent blocks, no checksums), BD (64 KiB
# blocks), HC = second byte of xxh32(FLG BD). The three descriptor bytes are fixed.
_LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_UNCOMPRESSED_FLAG = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")
_CODEC_ERRORS = (cramjam.DecompressionError, ValueError, OverflowError, OSError)


def compress(data: bytes | bytearray | memoryview, codec: int) -> bytes:
    """Compress a records blob the way Kafka's Java client frames it."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        out = bytearray(_LZ4_FRAME_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _LZ4_BLOCK_BYTES):
            chunk = view[start : start + _LZ4_BLOCK_BYTES]
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
            if len(block) >= len(chunk):
                out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_FLAG)
                out += chunk
            else:
                out += _UINT32_LE.pack(len(block))
                out += block
        out += _LZ4_END_MARK
        return bytes(out)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidRecords(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {codec}")


def decompress(
    data: bytes | bytearray | memoryview,
    codec: int,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes:
    """Decompress a records blob; CORRUPT_MESSAGE if it is malformed or too large."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec > Compression.ZSTD or codec < 0:
        raise InvalidRecords(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {codec}")
    try:
        if codec == Compression.SNAPPY:
            return _snappy_decompress(memoryview(data), max_decompressed_bytes)
        module = {
            Compression.GZIP: cramjam.gzip,
            Compression.LZ4: cramjam.lz4,
            Compression.ZSTD: cramjam.zstd,
        }[Compression(codec)]
        return _bounded_decompress(module, data, max_decompressed_bytes)
    except InvalidRecords:
        raise
    except _CODEC_ERRORS as exc:
        raise InvalidRecords(CORRUPT_MESSAGE, f"cannot decompress records: {exc}") from exc


def _bounded_decompress(module: object, data: bytes | bytearray | memoryview, bound: int) -> bytes:
    """Decompress into a growing buffer that may never exceed ``bound`` bytes."""
    capacity = min(bound, max(64 * 1024, len(data) * 8))
    while True:
        out = bytearray(capacity)
        try:
            n = module.decompress_into(data, out)  # type: ignore[attr-defined]
            if n < capacity or capacity == bound:
                return bytes(out[:n])
        except _CODEC_ERRORS:
            if capacity >= bound:
                raise InvalidRecords(
                    CORRUPT_MESSAGE,
                    f"compressed records are malformed or expand beyond {bound} bytes",
                ) from None
        capacity = min(bound, capacity * 4)


def _snappy_decompress(view: memoryview, bound: int) -> bytes:
    if view[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
        out = bytearray()
        pos = len(_XERIAL_HEADER)
        end = len(view)
        while pos < end:
            if end - pos < 4:
                raise InvalidRecords(CORRUPT_MESSAGE, "truncated xerial snappy block length")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or pos + length > end:
                raise InvalidRecords(CORRUPT_MESSAGE, "truncated xerial snappy block")
            block = view[pos : pos + length]
            if len(out) + cramjam.snappy.decompress_raw_len(block) > bound:
                raise InvalidRecords(CORRUPT_MESSAGE, f"snappy records expand beyond {bound} bytes")
            out += cramjam.snappy.decompress_raw(block)
            pos += length
        return bytes(out)
    if view[: len(_SNAPPY_FRAMED_MAGIC)] == _SNAPPY_FRAMED_MAGIC:
        return _bounded_decompress(cramjam.snappy, view, bound)
    if cramjam.snappy.decompress_raw_len(view) > bound:
        raise InvalidRecords(CORRUPT_MESSAGE, f"snappy records expand beyond {bound} bytes")
    return bytes(cramjam.snappy.decompress_raw(view))


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
    _HEADER.pack_into(
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
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
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
    payload: bytes | memoryview
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
