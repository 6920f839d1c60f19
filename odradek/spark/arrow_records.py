"""Record batches (Kafka v2) decoded straight into Arrow columns.

Theory of operation
-------------------
`ArrowRecordBuilder` takes whole record batches (already CRC-checked and
decompressed by the caller) and accumulates the records that fall inside an
offset range; `flush()` turns what it holds into one `pyarrow.RecordBatch` in
the schema of `format("odradek")` (key, value, topic, partition, offset,
timestamp, timestampType[, headers]).

No Python object is made per record for keys, values or headers. The records
blobs of the batches are concatenated into one buffer, and the scan loop
records only *positions*: the list ``bounds`` holds, in increasing order, the
start and end of every field (key, value, header key, header value) of every
record, so that ``bounds`` read as the offsets of one Arrow binary array over
the whole buffer makes each field one element of it (with the bytes between
fields as elements in between). `pyarrow.compute.take` then gathers the keys,
the values and the header fields into their own arrays in C. Offsets and
timestamps are machine integers in `array.array`s handed to Arrow without a
copy. What is left per record is the varint walk (inline for one- and
two-byte varints, as in protocol/record_scan.py) and a few appends; and for
batches whose records carry no headers (the common case) not even that: the C
walk (`_arrow_walk.c`, built when a compiler was there at install) returns the
positions, offsets, timestamps and null flags of a whole batch as packed
arrays, and answers None for anything else, which the Python loop then takes.

Malformed records raise `InvalidRecords(CORRUPT_MESSAGE)`; no read goes past
a records blob.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from odradek.protocol.record_scan import read_varint
from odradek.protocol.records import (
    CORRUPT_MESSAGE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidRecords,
)

# Flush before the shared buffer could overflow int32 Arrow offsets.
MAX_BUFFER_BYTES = 1 << 30

_CScan = Callable[[bytes, int, int, int, int, int, int],
                  "tuple[int, bytes, bytes, bytes, bytes, bytes] | None"]
_c_scan: _CScan | None
try:  # the C walk (spark/_arrow_walk.c), built when a compiler was there at install
    from odradek.spark._arrow_walk import scan as _c_scan
except ImportError:  # pragma: no cover - depends on the build
    _c_scan = None


def c_scan_available() -> bool:
    """Whether the C walk was built (tests compare it with the Python loop)."""
    return _c_scan is not None


class ArrowRecordBuilder:
    """Accumulates decoded records; `flush()` -> one Arrow record batch."""

    def __init__(self, topic: str, partition: int, arrow_schema: Any) -> None:
        self.topic = topic
        self.partition = partition
        self.schema = arrow_schema
        self.include_headers = "headers" in arrow_schema.names
        self._reset()

    def _reset(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.bounds = array("i", [0])
        self.key_idx = array("i")
        self.value_idx = array("i")
        self.offsets = array("q")
        self.timestamps = array("q")
        self.ts_types = array("i")
        self.key_valid = bytearray()  # per row: 0 for a null key, else 1
        self.value_valid = bytearray()
        # headers: per row the number of headers; per header two element indexes
        self.header_counts = array("i")
        self.hkey_idx = array("i")
        self.hvalue_idx = array("i")
        self.hvalue_nulls: list[int] = []

    @property
    def rows(self) -> int:
        return len(self.offsets)

    @property
    def buffered_bytes(self) -> int:
        return self._size

    def add(self, blob: bytes, header: BatchHeader, lo: int, hi: int) -> int:
        """Add the records of offsets [lo, hi) of one batch whose records blob
        (decompressed) is ``blob``; return how many were added."""
        if _c_scan is not None:
            got = _c_scan(blob, header.records_count, lo, hi, header.base_offset,
                          header.base_timestamp, self._size)
            if got is not None:
                return self._add_scanned(blob, header, got)
        return self._add_py(blob, header, lo, hi)

    def _add_scanned(self, blob: bytes, header: BatchHeader,
                     got: tuple[int, bytes, bytes, bytes, bytes, bytes]) -> int:
        """Take what the C walk found in one batch (no record has headers)."""
        added, bounds, offsets, timestamps, key_valid, value_valid = got
        first = len(self.bounds)
        self._parts.append(blob)
        self._size += len(blob)
        self.bounds.frombytes(bounds)
        self.offsets.frombytes(offsets)
        log_append = bool(header.attributes & TIMESTAMP_TYPE_MASK)
        if log_append:
            self.timestamps.extend(array("q", [header.max_timestamp]) * added)
        else:
            self.timestamps.frombytes(timestamps)
        self.key_valid += key_valid
        self.value_valid += value_valid
        if self.include_headers:
            self.key_idx.extend(range(first, first + 4 * added, 4))
            self.value_idx.extend(range(first + 2, first + 4 * added, 4))
            self.header_counts.extend(array("i", [0]) * added)
        self.ts_types.extend(array("i", [1 if log_append else 0]) * added)
        return added

    def _add_py(self, blob: bytes, header: BatchHeader, lo: int, hi: int) -> int:
        base = self._size
        self._parts.append(blob)
        self._size += len(blob)
        stop = len(blob)
        bounds, key_idx, value_idx = self.bounds, self.key_idx, self.value_idx
        offsets, timestamps = self.offsets, self.timestamps
        key_valid, value_valid = self.key_valid, self.value_valid
        with_headers = self.include_headers
        base_offset = header.base_offset
        base_ts = header.base_timestamp
        log_append = bool(header.attributes & TIMESTAMP_TYPE_MASK)
        row = len(offsets)
        first_row = row
        varint = read_varint
        pos = 0
        try:
            for _ in range(header.records_count):
                b = blob[pos]
                if b < 0x80:
                    length, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif blob[pos + 1] < 0x80:
                    b = (b & 0x7F) | (blob[pos + 1] << 7)
                    length, pos = (b >> 1) ^ -(b & 1), pos + 2
                else:
                    length, pos = varint(blob, pos)
                end = pos + length
                if length < 1 or end > stop:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record length out of bounds")
                pos += 1  # attributes
                b = blob[pos]
                if b < 0x80:
                    ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif blob[pos + 1] < 0x80:
                    b = (b & 0x7F) | (blob[pos + 1] << 7)
                    ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
                else:
                    ts_delta, pos = varint(blob, pos)
                b = blob[pos]
                if b < 0x80:
                    off_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif blob[pos + 1] < 0x80:
                    b = (b & 0x7F) | (blob[pos + 1] << 7)
                    off_delta, pos = (b >> 1) ^ -(b & 1), pos + 2
                else:
                    off_delta, pos = varint(blob, pos)
                offset = base_offset + off_delta
                if offset < lo or offset >= hi:
                    pos = end
                    continue
                b = blob[pos]
                if b < 0x80:
                    klen, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif blob[pos + 1] < 0x80:
                    b = (b & 0x7F) | (blob[pos + 1] << 7)
                    klen, pos = (b >> 1) ^ -(b & 1), pos + 2
                else:
                    klen, pos = varint(blob, pos)
                if klen < 0:
                    if klen != -1:
                        raise InvalidRecords(CORRUPT_MESSAGE, f"invalid key length {klen}")
                    key_valid.append(0)
                    klen = 0
                else:
                    key_valid.append(1)
                key_start = pos
                pos += klen
                key_end = pos
                b = blob[pos]
                if b < 0x80:
                    vlen, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif blob[pos + 1] < 0x80:
                    b = (b & 0x7F) | (blob[pos + 1] << 7)
                    vlen, pos = (b >> 1) ^ -(b & 1), pos + 2
                else:
                    vlen, pos = varint(blob, pos)
                if vlen < 0:
                    if vlen != -1:
                        raise InvalidRecords(CORRUPT_MESSAGE, f"invalid value length {vlen}")
                    value_valid.append(0)
                    vlen = 0
                else:
                    value_valid.append(1)
                bounds.extend((base + key_start, base + key_end, base + pos, base + pos + vlen))
                pos += vlen
                if with_headers:  # else field i of row r is element 4r + 1 (key), 4r + 3
                    key_idx.append(len(bounds) - 4)
                    value_idx.append(len(bounds) - 2)
                if pos >= end:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record field runs past the record")
                if blob[pos] == 0:
                    pos += 1
                    if with_headers:
                        self.header_counts.append(0)
                else:
                    pos = self._headers(blob, pos, end, base, with_headers)
                if pos != end:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record length does not match its fields")
                offsets.append(offset)
                timestamps.append(base_ts + ts_delta)
                row += 1
        except IndexError:
            raise InvalidRecords(CORRUPT_MESSAGE, "record runs past the end of its batch") from None
        if pos != stop:
            raise InvalidRecords(CORRUPT_MESSAGE, "record batch has trailing bytes after its records")
        added = row - first_row
        if log_append and added:
            del timestamps[first_row:]
            timestamps.extend(array("q", [header.max_timestamp]) * added)
        self.ts_types.extend(array("i", [1 if log_append else 0]) * added)
        return added

    def _headers(self, blob: bytes, pos: int, end: int, base: int, keep: bool) -> int:
        count, pos = read_varint(blob, pos)
        if count < 0 or count > end - pos:
            raise InvalidRecords(CORRUPT_MESSAGE, "invalid record header count")
        bounds = self.bounds
        for _ in range(count):
            klen, pos = read_varint(blob, pos)
            if klen < 0:
                raise InvalidRecords(CORRUPT_MESSAGE, "null record header key")
            if keep:
                bounds.append(base + pos)
                bounds.append(base + pos + klen)
                self.hkey_idx.append(len(bounds) - 2)
            pos += klen
            vlen, pos = read_varint(blob, pos)
            if vlen < -1:
                raise InvalidRecords(CORRUPT_MESSAGE, f"invalid field length {vlen}")
            if keep:
                if vlen == -1:
                    self.hvalue_nulls.append(len(self.hvalue_idx))
                bounds.append(base + pos)
                bounds.append(base + pos + max(vlen, 0))
                self.hvalue_idx.append(len(bounds) - 2)
            pos += max(vlen, 0)
            if pos > end:
                raise InvalidRecords(CORRUPT_MESSAGE, "record header runs past the record")
        if keep:
            self.header_counts.append(count)
        return pos

    # -- to Arrow -----------------------------------------------------------------

    def flush(self) -> Any:
        """The records held so far as one `pyarrow.RecordBatch`; the builder is emptied."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = self.rows
        data = pa.py_buffer(b"".join(self._parts))
        fields = pa.Array.from_buffers(
            pa.binary(), len(self.bounds) - 1, [None, pa.py_buffer(self.bounds), data]
        )

        if not self.include_headers:  # no header fields between: a fixed stride
            self.key_idx = array("i", range(1, 4 * n, 4))
            self.value_idx = array("i", range(3, 4 * n, 4))

        def gather(idx: array, valid: bytearray | None, typ: Any = None) -> Any:
            taken = pc.take(fields, pa.Array.from_buffers(pa.int32(), len(idx), [None, pa.py_buffer(idx)]))
            if valid is not None and 0 in valid:
                taken = _with_validity(pa, taken, valid)
            return taken.cast(typ) if typ is not None else taken

        ts_type = self.schema.field("timestamp").type
        ts_ms = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.timestamps)])
        arrays = [
            gather(self.key_idx, self.key_valid),
            gather(self.value_idx, self.value_valid),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.offsets)]),
            pc.multiply(ts_ms, 1000).cast(ts_type),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.ts_types)]),
        ]
        if self.include_headers:
            arrays.append(self._header_array(pa, gather))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch

    def _header_array(self, pa: Any, gather: Any) -> Any:
        list_type = self.schema.field("headers").type
        struct_type = list_type.value_type
        hkeys = gather(self.hkey_idx, None, pa.string())
        hvalid = None
        if self.hvalue_nulls:
            hvalid = bytearray(b"\x01") * len(self.hvalue_idx)
            for i in self.hvalue_nulls:
                hvalid[i] = 0
        hvalues = gather(self.hvalue_idx, hvalid)
        structs = pa.StructArray.from_arrays(
            [hkeys, hvalues], fields=[struct_type.field(0), struct_type.field(1)]
        )
        counts = self.header_counts
        list_offsets = array("i", [0])
        total = 0
        for c in counts:
            total += c
            list_offsets.append(total)
        mask = pa.array([c == 0 for c in counts], pa.bool_())
        return pa.ListArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), len(list_offsets), [None, pa.py_buffer(list_offsets)]),
            structs, type=list_type, mask=mask,
        )


def _with_validity(pa: Any, arr: Any, valid: bytearray) -> Any:
    """``arr`` (offset 0, no nulls) with the rows whose byte in ``valid`` is 0 made null."""
    as_bool = pa.Array.from_buffers(pa.uint8(), len(arr), [None, pa.py_buffer(valid)]).cast(pa.bool_())
    bitmap = as_bool.buffers()[1]
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, *arr.buffers()[1:]])
