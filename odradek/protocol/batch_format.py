"""Kafka record batch v2 (magic 2): the layout, the header, and reading it.

The constants, the error codes and the exception every batch module raises,
``BatchHeader`` (the 61-byte header, parsed) and ``Record``, and the header-only
reads the hot path makes (``parse_batch_header``, ``iter_batch_headers``,
``batch_crc_ok``). The lowest of the record-batch modules: ``batch_validation.py``
(produce checks, offset assignment), ``compression.py`` and ``records.py``
(building and decoding records, and the one import point for all of them)
import it; it imports none of them.

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
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

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
# What a produced batch may expand to (`decompression_bound`): at most this many
# times its compressed size, but always as much as the topic's max.message.bytes
# (what the same records could have been sent as uncompressed). Real data
# compresses 2-20x; lz4 cannot pass ~255:1, gzip ~1032:1, zstd has no limit.
MAX_DECOMPRESSION_RATIO = 64


def decompression_bound(compressed_bytes: int, max_message_bytes: int) -> int:
    """The most a produced batch of `compressed_bytes` may decompress to, so that
    the memory one request costs is a bounded multiple of its size (Kafka streams
    records out of the codec and has no such bound; we hold the whole blob)."""
    return min(DEFAULT_MAX_DECOMPRESSED_BYTES,
               max(max_message_bytes, compressed_bytes * MAX_DECOMPRESSION_RATIO))

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header
PREFIX_STRUCT = struct.Struct(">qi")  # baseOffset, batchLength
INT64_STRUCT = struct.Struct(">q")
INT32_STRUCT = struct.Struct(">i")
UINT32_STRUCT = struct.Struct(">I")
INT16_STRUCT = struct.Struct(">h")
_CRC_AND_ATTRIBUTES = struct.Struct(">Ih")
assert HEADER_STRUCT.size == BATCH_OVERHEAD


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
    return BatchHeader(position, *HEADER_STRUCT.unpack_from(buf, position))


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
    unpack = HEADER_STRUCT.unpack_from
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


