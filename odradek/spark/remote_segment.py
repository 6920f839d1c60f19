"""Read one remote-tier segment straight from the object store, as Arrow.

Theory of operation
-------------------
The remote tier (KIP-405, issue 14) holds closed segments as objects laid out
as ``<url>/<topic>-<topicId>/<partition>/<baseOffset:020d>-<segmentId>.<suffix>``
where ``.log`` is byte-identical to a local Kafka segment file, ``.index`` is
the offset index and ``.txnindex`` the transaction index (both in Kafka's
formats). `read_segment` runs on a Spark executor:

1. If an ``.index`` URL is given, the index entry at or below the start offset
   gives the byte position to start from (one small GET); otherwise the read
   starts at byte 0.
2. The ``.log`` is streamed through fsspec in chunks of `chunk_bytes` (bounded
   memory: one chunk plus at most one batch). Every batch is checked (magic 2,
   batch length, CRC32C); a segment that ends inside a batch, or before the
   offset its metadata promises, is an error naming the object and the offset
   (`SegmentCorrupt`), never a silent short read.
3. Batches wholly outside [start, end) are skipped from their headers; control
   batches are always skipped; under ``read_committed`` transactional batches
   of aborted transactions are skipped exactly as a Kafka consumer does with a
   fetch response's aborted-transactions list (see `AbortFilter`).
4. Kept batches are decompressed (every codec, protocol/compression.py) and
   decoded into Arrow columns in bulk (arrow_records.py).

The aborted transactions come from the ``.txnindex`` objects: an entry is
stored in the segment holding its ABORT marker, so a transaction whose data is
in this segment may be indexed in a later one. `collect_aborted` applies
Kafka's rule (entries with lastOffset >= start and firstOffset < end, searched
segment after segment until an entry's lastStableOffset reaches end); the
planner runs it on the driver and hands each task its list.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    BatchHeader,
    ControlRecordType,
    InvalidRecords,
    batch_crc_ok,
    decode_batch_records,
    decompress,
    parse_control_record,
)
from odradek.spark.arrow_records import MAX_BUFFER_BYTES, ArrowRecordBuilder

DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024
DEFAULT_ROWS_PER_BATCH = 20_000
MAX_BATCH_BYTES = DEFAULT_MAX_DECOMPRESSED_BYTES  # a larger length is corruption
TXN_ENTRY = struct.Struct(">hqqqq")  # version, producerId, first, last, lastStableOffset
INDEX_ENTRY = struct.Struct(">ii")  # relative offset, byte position


class SegmentCorrupt(RuntimeError):
    """A remote segment object that is cut short or does not hold valid batches."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def parse_txn_index(data: bytes, what: str = ".txnindex") -> list[AbortedTxn]:
    """Entries of a ``.txnindex`` (Kafka's TransactionIndex format, 34 bytes each)."""
    if len(data) % TXN_ENTRY.size:
        raise SegmentCorrupt(f"{what}: {len(data)} bytes is not a whole number of 34-byte entries")
    out = []
    for pos in range(0, len(data), TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        if version != 0:
            raise SegmentCorrupt(f"{what}: entry version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect_aborted(
    indexes: Iterable[Sequence[AbortedTxn]], start: int, end: int
) -> tuple[list[tuple[int, int]], bool]:
    """Kafka's collectAbortedTxns over the txn indexes of a segment and the ones
    after it, in order: (producer id, first offset) of every aborted transaction
    overlapping [start, end), and whether the search is complete (an entry's
    lastStableOffset reached ``end``, so no later index can add one)."""
    found: list[tuple[int, int]] = []
    for entries in indexes:
        for t in entries:
            if t.last_offset >= start and t.first_offset < end:
                found.append((t.producer_id, t.first_offset))
            if t.last_stable_offset >= end:
                return found, True
    return found, False


class AbortFilter:
    """The read_committed filter of a Kafka consumer (Fetcher's
    abortedProducerIds): aborted transactions, ordered by first offset, become
    active once a batch reaches their first offset; a transactional batch of an
    active producer is skipped; its ABORT marker ends it."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda a: a[1], reverse=True)
        self.active: set[int] = set()

    def skip(self, buf: Any, header: BatchHeader) -> bool:
        """True if this batch yields no rows under read_committed."""
        pending = self.pending
        while pending and pending[-1][1] <= header.last_offset:
            self.active.add(pending.pop()[0])
        if header.is_control:
            if header.producer_id in self.active and header.records_count > 0:
                kind, _epoch = parse_control_record(decode_batch_records(buf, header)[0])
                if kind == ControlRecordType.ABORT:
                    self.active.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self.active


_FILESYSTEMS: dict[str, Any] = {}


def open_url(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """(fsspec filesystem, path) of an object URL. One filesystem per protocol and
    options for the life of the process: fsspec's own instance cache is per thread,
    and a new s3fs client (session, credentials, connection pool) costs far more
    CPU than reading a segment."""
    import json

    from fsspec.core import split_protocol, url_to_fs

    options = json.dumps(storage_options or {}, sort_keys=True, default=str)
    key = f"{split_protocol(url)[0] or 'file'} {options}"
    fs = _FILESYSTEMS.get(key)
    if fs is None:
        fs, path = url_to_fs(url, **(storage_options or {}))
        _FILESYSTEMS[key] = fs
        return fs, path
    return fs, fs._strip_protocol(url)


def start_position(
    index_url: str | None, base_offset: int, start: int, storage_options: dict[str, Any] | None
) -> int:
    """Byte position of the last ``.index`` entry at or below ``start`` (0 without one)."""
    if not index_url or start <= base_offset:
        return 0
    fs, path = open_url(index_url, storage_options)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return 0
    best = 0
    for pos in range(0, len(data) - len(data) % INDEX_ENTRY.size, INDEX_ENTRY.size):
        rel, position = INDEX_ENTRY.unpack_from(data, pos)
        if pos and rel == 0 and position == 0:
            break  # preallocated, unused tail
        if base_offset + rel > start:
            break
        best = position
    return best


def iter_batches(
    f: Any, what: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> Iterator[tuple[bytes, BatchHeader]]:
    """Whole, checked batches from a binary file object, read in chunks.

    Yields (buffer, header) with ``header.position`` inside ``buffer``; the
    buffer is valid until the next item."""
    buf = b""
    pos = 0
    eof = False
    file_pos = f.tell()
    while True:
        if len(buf) - pos >= LOG_OVERHEAD and _batch_length(buf, pos) > MAX_BATCH_BYTES:
            raise SegmentCorrupt(
                f"{what} byte {file_pos + pos}: batch length {_batch_length(buf, pos)} "
                f"is over {MAX_BATCH_BYTES} (not a segment, or corrupt)"
            )
        if len(buf) - pos < BATCH_OVERHEAD or (
            len(buf) - pos < LOG_OVERHEAD + _batch_length(buf, pos)
        ):
            if eof:
                break
            chunk = f.read(chunk_bytes)
            if not chunk:
                eof = True
                continue
            file_pos += pos
            buf = buf[pos:] + chunk
            pos = 0
            continue
        header = BatchHeader(pos, *HEADER_STRUCT.unpack_from(buf, pos))
        at = f"{what} byte {file_pos + pos} (offset {header.base_offset})"
        if header.batch_length < MIN_BATCH_LENGTH:
            raise SegmentCorrupt(f"{at}: batch length {header.batch_length} is too small")
        if header.magic != MAGIC_V2:
            raise SegmentCorrupt(f"{at}: magic {header.magic}, only v2 record batches are read")
        if not batch_crc_ok(buf, header):
            raise SegmentCorrupt(f"{at}: CRC mismatch")
        yield buf, header
        pos += header.size
    if pos < len(buf):
        raise SegmentCorrupt(
            f"{what} is truncated: it ends inside a batch at byte {file_pos + pos} "
            f"({len(buf) - pos} bytes of a batch)"
        )


class RangeReader:
    """A read-only file over an object of known size: each read() is one ranged GET."""

    def __init__(self, fs: Any, path: str, pos: int, size: int) -> None:
        self.fs, self.path, self.pos, self.size = fs, path, pos, size

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def seek(self, pos: int) -> None:
        self.pos = pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int) -> bytes:
        end = min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = bytes(self.fs.cat_file(self.path, start=self.pos, end=end))
        self.pos += len(data)
        return data


def _batch_length(buf: bytes, pos: int) -> int:
    return int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)


def read_segment(
    log_url: str,
    start: int,
    end: int,
    *,
    topic: str,
    partition: int,
    arrow_schema: Any,
    isolation_level: str = "read_uncommitted",
    aborted: Iterable[tuple[int, int]] = (),
    storage_options: dict[str, Any] | None = None,
    index_url: str | None = None,
    base_offset: int = 0,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
    stats: dict[str, int] | None = None,
    size: int = 0,
) -> Iterator[Any]:
    """Yield Arrow record batches of the records at offsets [start, end) of the
    segment object ``log_url``; ``aborted`` is (producer id, first offset) of
    the aborted transactions overlapping the range (see `collect_aborted`).
    With the object's ``size`` known (from its metadata) each chunk is one
    ranged GET, without the HEAD and read-ahead cache of a file object."""
    builder = ArrowRecordBuilder(topic, partition, arrow_schema)
    abort_filter = AbortFilter(aborted) if isolation_level == "read_committed" else None
    fs, path = open_url(log_url, storage_options)
    first_byte = start_position(index_url, base_offset, start, storage_options)
    next_offset = None
    batches = 0
    f = RangeReader(fs, path, first_byte, size) if size else fs.open(
        path, "rb", block_size=chunk_bytes)
    with f:
        f.seek(first_byte)
        for buf, header in iter_batches(f, log_url, chunk_bytes):
            if header.base_offset >= end:
                next_offset = header.base_offset
                break
            next_offset = header.next_offset
            if next_offset <= start:
                continue
            if abort_filter is not None:
                if abort_filter.skip(buf, header):
                    continue
            elif header.is_control:
                continue
            batches += 1
            body = memoryview(buf)[header.position + BATCH_OVERHEAD : header.position + header.size]
            try:
                blob = (
                    bytes(decompress(body, header.compression, DEFAULT_MAX_DECOMPRESSED_BYTES))
                    if header.compression
                    else bytes(body)
                )
                builder.add(blob, header, start, end)
            except InvalidRecords as e:
                raise SegmentCorrupt(f"{log_url}: batch at offset {header.base_offset}: {e}") from e
            if builder.rows >= rows_per_batch or builder.buffered_bytes >= MAX_BUFFER_BYTES // 4:
                yield builder.flush()
    if next_offset is None or next_offset < end:
        raise SegmentCorrupt(
            f"{log_url} ends at offset {next_offset if next_offset is not None else start} "
            f"but offsets up to {end - 1} were expected in it (truncated object?)"
        )
    if builder.rows:
        yield builder.flush()
    if stats is not None:
        stats["batches"] = stats.get("batches", 0) + batches
