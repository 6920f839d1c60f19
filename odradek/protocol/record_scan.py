"""Light per-record work on v2 record batches: keys, null values, raw record bytes.

Theory of operation
-------------------
``decode_batch_records`` (protocol/records.py) builds a ``Record`` per record,
headers included; the two users here need less and run per record:

* the log cleaner (storage/cleaner/) decides per record from its offset, key
  and whether the value is null, then copies the kept records' bytes as they
  are (or with a new timestamp delta when the batch gets a delete horizon),
  so ``scan_records`` returns positions into the (decompressed) records blob
  rather than objects;
* Produce checks every record as Kafka's ``LogValidator`` does
  (``check_records``): a CRC-valid batch whose records do not decode must get
  CORRUPT_MESSAGE, not be written (the fuzzer, tests/fuzz/, wrote such
  batches), and a compacted topic rejects a record without a key. That is
  per-record Python work on the produce path, lengths only, as in Kafka.

The record layout is in protocol/records.py. Malformed records raise
``InvalidRecords(CORRUPT_MESSAGE)``; no read goes past the records blob.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    CORRUPT_MESSAGE,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    BatchHeader,
    InvalidRecords,
    decompress,
    write_varint,
)

__all__ = [
    "ScannedRecords", "check_records", "read_varint", "records_blob", "scan_records",
    "write_varint",
]

_MAX_VARINT_SHIFT = 63

_CWalk = Callable[[bytes | bytearray | memoryview, int, int, int], "list[int] | None"]
_c_walk: _CWalk | None
try:  # the C walk (protocol/_record_walk.c), built when a compiler was there at install
    from odradek.protocol._record_walk import walk as _c_walk
except ImportError:  # pragma: no cover - depends on the install
    _c_walk = None


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` -> (value, next position); IndexError past the end."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise InvalidRecords(CORRUPT_MESSAGE, "varint longer than 10 bytes in record")


# For other record walkers (spark/arrow_records.py): the same varint reader.
read_varint = _varint


def _uvarint(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` -> (raw value, next position): the zigzag value
    is ``(raw >> 1) ^ -(raw & 1)``, so an even raw value is ``raw >> 1`` and 1 is -1."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise InvalidRecords(CORRUPT_MESSAGE, "varint longer than 10 bytes in record")


def records_blob(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> tuple[bytes | bytearray | memoryview, int, int]:
    """(buffer, start, end) of the batch's records, decompressed if needed.
    ``batch`` holds the batch at ``header.position``."""
    view = memoryview(batch)
    start = header.position + BATCH_OVERHEAD
    end = header.position + header.size
    if end > len(view):
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch is truncated")
    if header.compression:
        payload = decompress(view[start:end], header.compression, max_decompressed_bytes)
        return payload, 0, len(payload)
    return view, start, end


@dataclass(slots=True)
class ScannedRecords:
    """The records of one batch as positions into ``buf`` (parallel lists).

    Record i occupies ``buf[starts[i]:ends[i]]`` (length varint included); its
    attributes byte is at ``body_starts[i]`` and its fields after the timestamp
    delta start at ``after_timestamp[i]``."""

    buf: bytes | memoryview
    starts: list[int] = field(default_factory=list)
    body_starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    after_timestamp: list[int] = field(default_factory=list)
    timestamp_deltas: list[int] = field(default_factory=list)
    offset_deltas: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    null_values: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.starts)


def scan_records(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> ScannedRecords:
    """Walk every record of the batch: offsets, keys, null values, byte ranges.

    The hot loop of the cleaner: one-byte varints (most of them) are decoded
    inline, and the records blob is scanned as ``bytes`` (faster to index than
    a memoryview)."""
    buf, pos, stop = records_blob(batch, header, max_decompressed_bytes)
    if not isinstance(buf, bytes):  # keys are dict keys (the cleaner): bytes
        buf, pos, stop = bytes(buf[pos:stop]), 0, stop - pos
    out = ScannedRecords(buf)
    starts, body_starts, ends = out.starts, out.body_starts, out.ends
    after_ts, ts_deltas, offset_deltas = out.after_timestamp, out.timestamp_deltas, out.offset_deltas
    keys, null_values = out.keys, out.null_values
    varint = _varint
    try:
        for _ in range(header.records_count):
            start = pos
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = varint(buf, pos)
            end = pos + length
            if length < 1 or end > stop:
                raise InvalidRecords(CORRUPT_MESSAGE, "record length out of bounds")
            body_start = pos
            pos += 1  # the attributes byte
            b = buf[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                ts_delta, pos = varint(buf, pos)
            after = pos
            b = buf[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                offset_delta, pos = varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                key_length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                key_length, pos = varint(buf, pos)
            if key_length >= 0:
                key_end = pos + key_length
                if key_end > end:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record key runs past the record")
                keys.append(buf[pos:key_end])
                pos = key_end
            elif key_length == -1:
                keys.append(None)
            else:
                raise InvalidRecords(CORRUPT_MESSAGE, f"invalid key length {key_length}")
            b = buf[pos]
            if b < 0x80:
                value_length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                value_length, pos = varint(buf, pos)
            if value_length < -1 or pos + max(value_length, 0) > end:
                raise InvalidRecords(CORRUPT_MESSAGE, "record value runs past the record")
            null_values.append(value_length == -1)
            starts.append(start)
            body_starts.append(body_start)
            ends.append(end)
            after_ts.append(after)
            ts_deltas.append(ts_delta)
            offset_deltas.append(offset_delta)
            pos = end
    except IndexError:
        raise InvalidRecords(CORRUPT_MESSAGE, "record runs past the end of its batch") from None
    if pos != stop:
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch has trailing bytes after its records")
    return out


def check_records(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> list[int]:
    """Check every record of a produced batch as Kafka's ``LogValidator`` does;
    return the indexes (in batch order) of the records that have no key.

    The CRC only proves the bytes are the client's: a batch whose compressed
    data does not decompress, or whose records do not decode, would be written
    and then fail every consumer, so it is refused with CORRUPT_MESSAGE here
    (the same rules as ``decode_batch_records``, which ``dump-log --verify``
    uses): the record count, each record's length, key, value and headers
    (non-null, UTF-8 keys) inside the record, nothing after the last one.
    Lengths are read, no value is copied.

    The C walk answers first when it is built; it returns None for any batch it
    does not accept, and then the Python walk below finds the exact error.
    """
    buf, pos, stop = records_blob(batch, header, max_decompressed_bytes)
    if _c_walk is not None:
        keyless_c: list[int] | None = _c_walk(buf, pos, stop, header.records_count)
        if keyless_c is not None:
            return keyless_c
    return _check_records_py(buf, pos, stop, header.records_count)


def c_walk_available() -> bool:
    """Whether the C record walk was built (tests compare it with the Python one)."""
    return _c_walk is not None


def _check_records_py(
    buf: bytes | bytearray | memoryview, pos: int, stop: int, records_count: int,
) -> list[int]:
    """check_records' Python walk over ``buf[pos:stop]`` (the reference)."""
    if isinstance(buf, memoryview):  # a decompressed blob is bytes or bytearray already
        buf, pos, stop = bytes(buf[pos:stop]), 0, stop - pos
    keyless: list[int] = []
    # The hot loop of Produce, a few bytecodes per field. Varints of one and two
    # bytes (lengths under 64 and 8192, deltas likewise: nearly all of them) are read
    # inline, longer ones by _uvarint. Lengths stay raw (zigzag-encoded): an even raw
    # value r is the length r >> 1, 1 is -1 (null), any other odd value is negative.
    # A field that runs past its record leaves pos > end, caught after the key, the
    # value and at the record's end.
    uvarint = _uvarint
    try:
        for i in range(records_count):
            r = buf[pos]
            if r < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                r = (r & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                r, pos = uvarint(buf, pos)
            end = pos + (r >> 1)
            if r & 1 or not r or end > stop:
                raise InvalidRecords(CORRUPT_MESSAGE, "record length out of bounds")
            pos += 1  # the attributes byte
            if buf[pos] < 0x80:  # timestamp delta
                pos += 1
            elif buf[pos + 1] < 0x80:
                pos += 2
            else:
                pos = uvarint(buf, pos)[1]
            if buf[pos] < 0x80:  # offset delta
                pos += 1
            elif buf[pos + 1] < 0x80:
                pos += 2
            else:
                pos = uvarint(buf, pos)[1]
            r = buf[pos]  # key length
            if r < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                r = (r & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                r, pos = uvarint(buf, pos)
            if not r & 1:
                pos += r >> 1
                if pos > end:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record field runs past the record")
            elif r == 1:
                keyless.append(i)
            else:
                raise InvalidRecords(CORRUPT_MESSAGE, f"invalid field length {-(r + 1) >> 1}")
            r = buf[pos]  # value length
            if r < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                r = (r & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                r, pos = uvarint(buf, pos)
            if not r & 1:
                pos += r >> 1
                if pos > end:
                    raise InvalidRecords(CORRUPT_MESSAGE, "record field runs past the record")
            elif r != 1:
                raise InvalidRecords(CORRUPT_MESSAGE, f"invalid field length {-(r + 1) >> 1}")
            if buf[pos] == 0:  # no headers: zigzag 0
                pos += 1
            else:
                pos = _check_headers(buf, pos, end, end - pos)
            if pos != end:
                raise InvalidRecords(CORRUPT_MESSAGE, "record length does not match its fields")
    except IndexError:
        raise InvalidRecords(CORRUPT_MESSAGE, "record runs past the end of its batch") from None
    if pos != stop:
        raise InvalidRecords(CORRUPT_MESSAGE, "record batch has trailing bytes after its records")
    return keyless


def _check_headers(buf: bytes | bytearray, pos: int, end: int, left: int) -> int:
    """Past a record's headers (count varint at ``pos``, ``left`` bytes of the record
    from there): non-null UTF-8 keys, every field inside the record."""
    varint = _varint
    header_count, pos = varint(buf, pos)
    if header_count < 0 or header_count > left:
        raise InvalidRecords(CORRUPT_MESSAGE, "invalid record header count")
    for _ in range(header_count):
        key_length, pos = varint(buf, pos)
        if key_length < 0:
            raise InvalidRecords(CORRUPT_MESSAGE, "null record header key")
        key_end = _skip_field(key_length, pos, end)
        try:
            buf[pos:key_end].decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecords(CORRUPT_MESSAGE, "record header key is not utf-8") from None
        value_length, pos = varint(buf, key_end)
        pos = _skip_field(value_length, pos, end)
    return pos


def _skip_field(length: int, pos: int, end: int) -> int:
    """Past a key, value or header field of ``length`` bytes (-1 = null) at ``pos``."""
    if length < -1:
        raise InvalidRecords(CORRUPT_MESSAGE, f"invalid field length {length}")
    pos += max(length, 0)
    if pos > end:
        raise InvalidRecords(CORRUPT_MESSAGE, "record field runs past the record")
    return pos
