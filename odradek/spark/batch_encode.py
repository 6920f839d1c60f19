"""Arrow columns of the sink's input encoded as Kafka v2 record batches, in bulk.

Theory of operation
-------------------
The bulk sink (producerPath=batch, bulk_writer.py) turns each Arrow batch of
a write task into record batches without a Python object per row:

1. `SinkColumns.of(batch)`: the `key`, `value` and `headers` columns as flat
   buffers (int64 offsets, data, one validity byte per row), by pyarrow and
   pyarrow compute (strings are viewed as binary: the same bytes);
2. `partition_rows`: a partition per row, from the `partition` column, else
   Kafka's default partitioner of the Java client (murmur2 of the key; rows
   with a null key all go to one partition per Arrow batch, chosen round
   robin, as the sticky partitioner does), as int64 buffers of row indexes
   grouped by partition and cut so that no batch exceeds `BATCH_MAX_BYTES`;
3. `encode_records(rows, columns)`: the records blob of one batch, by the C
   loop `_batch_encode.encode` when it was built (setup.py), else by the Python
   loop `encode_records_py` -- the reference the C loop is held to by
   hypothesis tests (tests/unit/test_batch_encode.py);
4. `record_batch(...)`: the 61-byte header (magic 2, producer id, epoch,
   base sequence, transactional bit), compression of the blob (gzip, snappy,
   lz4, zstd by protocol/compression.py, the broker's own codecs) and CRC32C.

Every record of a batch carries the batch's timestamp (CreateTime, the time of
encoding: Spark's Kafka sink has no timestamp column either, and the Java
producer stamps records when they are sent).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crc32c import crc32c

from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    TRANSACTIONAL_MASK,
    UINT32_STRUCT,
    Compression,
    compress,
    write_varint,
)

_c_encode: Callable[..., bytes] | None
_c_murmur2: Callable[..., bytes] | None
try:  # the C loop (spark/_batch_encode.c), built when a compiler was there at install
    from odradek.spark._batch_encode import encode as _c_encode
    from odradek.spark._batch_encode import murmur2_partitions as _c_murmur2
except ImportError:  # pragma: no cover - exercised where the extension is missing
    _c_encode = None
    _c_murmur2 = None

# Uncompressed bytes of one batch at most: under the broker's default
# max.message.bytes (1 MiB), as the Java producer's batch.size keeps batches small.
BATCH_MAX_BYTES = 512 * 1024
# Bytes a record adds beyond its key and value, at most (length, attributes,
# deltas and the length varints); used only to cut batches.
RECORD_OVERHEAD_BYTES = 24

CODECS = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def c_encode_available() -> bool:
    return _c_encode is not None


def _i64(arr: Any) -> Any:
    """An integer Arrow array as a contiguous int64 buffer (offset 0, no nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = pc.cast(arr, pa.int64())
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    if out.offset:
        out = pa.concat_arrays([out])
    return memoryview(out.buffers()[1]).cast("B")[:8 * len(out)].cast("q")


def _u8(arr: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    out = pc.cast(arr, pa.uint8())
    if out.offset:
        out = pa.concat_arrays([out])
    return memoryview(out.buffers()[1]).cast("B")[:len(out)]


def _int64_array(view: Any) -> Any:
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(view), [None, pa.py_buffer(view)])


_ROW_RANGE = array("q")


def row_range(n: int) -> Any:
    """The int64 buffer 0, 1, ..., n - 1 (every row, in order): a slice of one
    array kept and doubled as needed, so no Python int per row per batch."""
    global _ROW_RANGE
    if len(_ROW_RANGE) < n:
        grown = array("q", _ROW_RANGE)
        while len(grown) < n:
            grown.extend(array("q", [len(grown)]) if not grown else
                         array("q", [v + len(grown) for v in grown]))
        _ROW_RANGE = grown
    return memoryview(_ROW_RANGE)[:n]


@dataclass(frozen=True)
class BinaryColumn:
    offsets: Any  # memoryview of int64[n + 1]: row i is data[offsets[i]:offsets[i + 1]]
    data: Any  # a buffer
    valid: Any  # memoryview of uint8[n]: 0 for null

    def as_tuple(self) -> tuple[Any, Any, Any]:
        return (self.offsets, self.data, self.valid)

    def lengths(self) -> Any:
        """int64 Arrow array: the bytes per row."""
        import pyarrow.compute as pc

        o = _int64_array(self.offsets)
        return pc.subtract(o.slice(1), o.slice(0, len(o) - 1))


@dataclass(frozen=True)
class HeaderColumns:
    list_offsets: Any  # memoryview of int64[n + 1]: row i's headers are [lo, hi)
    keys: BinaryColumn  # per header, never null
    values: BinaryColumn

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.list_offsets, self.keys.offsets, self.keys.data,
                self.values.offsets, self.values.data, self.values.valid)


@dataclass(frozen=True)
class SinkColumns:
    rows: int
    value: BinaryColumn
    key: BinaryColumn | None
    headers: HeaderColumns | None

    @classmethod
    def of(cls, batch: Any) -> SinkColumns:
        """The key, value and headers columns of an Arrow batch (names case-insensitive)."""
        names = {n.lower(): n for n in batch.schema.names}
        key_arr = batch.column(names["key"]) if "key" in names else None
        # a key column of nulls only writes what no key column writes
        key = (binary_column(key_arr) if key_arr is not None
               and key_arr.null_count < len(key_arr) else None)
        headers = header_columns(batch.column(names["headers"])) if "headers" in names else None
        return cls(batch.num_rows, binary_column(batch.column(names["value"])), key, headers)

    def row_bytes(self) -> Any:
        """int64 Arrow array per row: the bytes its record takes at most."""
        import pyarrow as pa
        import pyarrow.compute as pc

        size = pc.add(self.value.lengths(), RECORD_OVERHEAD_BYTES)
        if self.key is not None:
            size = pc.add(size, self.key.lengths())
        if self.headers is not None:
            per_header = pc.add(pc.add(self.headers.keys.lengths(),
                                       self.headers.values.lengths()), 10)
            csum = pa.concat_arrays([pa.array([0], pa.int64()),
                                     pc.cumulative_sum(per_header).cast(pa.int64())])
            lo = _int64_array(self.headers.list_offsets)
            size = pc.add(size, pc.subtract(pc.take(csum, lo.slice(1)),
                                            pc.take(csum, lo.slice(0, len(lo) - 1))))
        return size


def binary_column(arr: Any) -> BinaryColumn:
    """A string or binary Arrow array as (offsets int64, data, validity bytes)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    if pa.types.is_null(arr.type):
        return BinaryColumn(_i64(pa.array([0] * (n + 1), pa.int64())), b"",
                            _u8(pa.array([0] * n, pa.uint8())))
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.view(pa.large_binary())
    width = pa.int64() if pa.types.is_large_binary(arr.type) else pa.int32()
    bufs = arr.buffers()
    offsets = pa.Array.from_buffers(width, n + 1, [None, bufs[1]], offset=arr.offset)
    data = bufs[2] if bufs[2] is not None else b""
    return BinaryColumn(_i64(offsets), data, _u8(arr.is_valid()))


def header_columns(arr: Any) -> HeaderColumns:
    """list<struct<key: string, value: binary>>: a null list is no headers; a
    null header or a null header key is refused (Kafka has no such header)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    lengths = pc.list_value_length(arr).fill_null(0).cast(pa.int64())
    list_offsets = pa.concat_arrays([pa.array([0], pa.int64()),
                                     pc.cumulative_sum(lengths).cast(pa.int64())])
    structs = pc.list_flatten(arr)  # the headers of the non-null lists, in order
    if structs.null_count:
        raise ValueError("format(\"odradek\") sink: a null element in the headers column")
    key_arr = structs.field("key")
    if key_arr.null_count:
        raise ValueError("format(\"odradek\") sink: a header with a null key")
    assert len(list_offsets) == n + 1
    return HeaderColumns(_i64(list_offsets), binary_column(key_arr),
                         binary_column(structs.field("value")))


# -- records ---------------------------------------------------------------------


def encode_records(rows: Any, cols: SinkColumns) -> bytes:
    """The records blob of the rows `rows` (an int64 buffer of row indexes, in order)."""
    if _c_encode is not None:
        return bytes(_c_encode(
            rows, cols.value.as_tuple(), cols.key.as_tuple() if cols.key else None,
            cols.headers.as_tuple() if cols.headers else None))
    return encode_records_py(rows, cols)


def _field(col: BinaryColumn, i: int) -> bytes | None:
    if not col.valid[i]:
        return None
    return bytes(memoryview(col.data)[int(col.offsets[i]):int(col.offsets[i + 1])])


def encode_records_py(rows: Any, cols: SinkColumns) -> bytes:
    """The Python loop: the reference of the C one (same bytes), and its stand-in.
    Written apart from protocol/records.py's builder on purpose: the tests hold
    both to the same bytes, so neither checks itself."""
    out = bytearray()
    for delta, i in enumerate(int(r) for r in rows):
        body = bytearray(b"\x00\x00")  # attributes, timestampDelta 0
        write_varint(body, delta)
        for fld in (_field(cols.key, i) if cols.key else None, _field(cols.value, i)):
            if fld is None:
                write_varint(body, -1)
            else:
                write_varint(body, len(fld))
                body += fld
        hs: list[tuple[bytes, bytes | None]] = []
        if cols.headers is not None:
            h = cols.headers
            for j in range(int(h.list_offsets[i]), int(h.list_offsets[i + 1])):
                hk = _field(h.keys, j)
                assert hk is not None
                hs.append((hk, _field(h.values, j)))
        write_varint(body, len(hs))
        for hk, hv in hs:
            write_varint(body, len(hk))
            body += hk
            if hv is None:
                write_varint(body, -1)
            else:
                write_varint(body, len(hv))
                body += hv
        write_varint(out, len(body))
        out += body
    return bytes(out)


def record_batch(blob: bytes, count: int, *, timestamp_ms: int, compression: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False) -> bytes:
    """One v2 batch of `count` records whose uncompressed records blob is `blob`."""
    payload = compress(blob, compression) if compression else blob
    attributes = compression & COMPRESSION_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    batch = bytearray(BATCH_OVERHEAD)
    HEADER_STRUCT.pack_into(
        batch, 0, 0, BATCH_OVERHEAD - LOG_OVERHEAD + len(payload), -1, MAGIC_V2, 0,
        attributes, count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
        base_sequence, count)
    batch += payload
    UINT32_STRUCT.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def now_ms() -> int:
    return int(time.time() * 1000)


# -- partitioning --------------------------------------------------------------------


def murmur2_py(data: bytes) -> int:
    """Kafka's murmur2 (the Java client's Utils.murmur2): the reference of the C one."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest >= 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def key_partitions(cols: SinkColumns, num_partitions: int) -> Any:
    """int32 Arrow array per row: murmur2(key) mod partitions, -1 for a null key."""
    import pyarrow as pa

    if cols.key is None:
        return pa.nulls(cols.rows, pa.int32()).fill_null(-1)
    rows = row_range(cols.rows)
    if _c_murmur2 is not None:
        got = _c_murmur2(rows, cols.key.as_tuple(), num_partitions)
        return pa.Array.from_buffers(pa.int32(), cols.rows, [None, pa.py_buffer(got)])
    out = []
    for i in range(cols.rows):
        k = _field(cols.key, i)
        out.append(-1 if k is None else (murmur2_py(k) & 0x7FFFFFFF) % num_partitions)
    return pa.array(out, pa.int32())


def group_rows(partitions: Any, row_bytes: Any, max_bytes: int = BATCH_MAX_BYTES
               ) -> list[tuple[int, Any]]:
    """(partition, int64 buffer of row indexes) per batch to write: rows grouped
    by partition (each partition's rows keep their order), each group cut where
    its bytes would pass `max_bytes` (at least one row per batch). `partitions`
    and `row_bytes` are Arrow arrays, one value per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: list[tuple[int, Any]] = []
    for part in sorted(pc.unique(partitions).to_pylist()):
        idx = pc.indices_nonzero(pc.equal(partitions, part)).cast(pa.int64())
        csum = pc.cumulative_sum(pc.take(row_bytes, idx)).cast(pa.int64())
        if len(csum) == 0 or csum[-1].as_py() <= max_bytes:
            out.append((part, _i64(idx)))
            continue
        chunk = pc.divide(pc.subtract(csum, 1), max_bytes)
        for c in pc.unique(chunk).to_pylist():
            out.append((part, _i64(pc.filter(idx, pc.equal(chunk, c)))))
    return out
