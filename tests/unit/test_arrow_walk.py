"""spark/_arrow_walk.c (the C walk of ArrowRecordBuilder) against the Python loop:
the same Arrow rows for valid batches (null keys and values, ranges inside a
batch, LogAppendTime, headers left to Python), and on mutated bytes it either
refuses (None, the Python loop then decides) or agrees with the Python loop:
it never accepts what the Python loop refuses."""

from __future__ import annotations

import random

import pytest

from odradek.protocol.records import (
    BATCH_OVERHEAD,
    Compression,
    InvalidRecords,
    Record,
    TimestampType,
    build_batch,
    parse_batch_header,
)
from odradek.spark import arrow_records

pa = pytest.importorskip("pyarrow")
pytestmark = pytest.mark.skipif(not arrow_records.c_scan_available(),
                                reason="the C walk is not built")


def _schema(headers: bool) -> object:
    fields = [
        pa.field("key", pa.binary()), pa.field("value", pa.binary()),
        pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()), pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if headers:
        fields.append(pa.field("headers", pa.list_(pa.struct(
            [pa.field("key", pa.string()), pa.field("value", pa.binary())]))))
    return pa.schema(fields)


def _batch(n: int, base: int, *, headers: bool = False, log_append: bool = False) -> bytes:
    rng = random.Random(n * 7 + base)
    records = []
    for i in range(n):
        key = None if i % 7 == 0 else f"k{i}".encode() * rng.randint(1, 40)
        value = None if i % 11 == 0 else bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
        hdrs = (("h", b"v"), ("n", None)) if headers and i % 3 == 0 else ()
        records.append(Record(timestamp=1_700_000_000_000 + i * rng.randint(0, 5000), key=key,
                              value=value, headers=hdrs))
    return build_batch(records, base_offset=base, compression=Compression.NONE,
                       timestamp_type=TimestampType.LOG_APPEND_TIME if log_append
                       else TimestampType.CREATE_TIME,
                       max_timestamp=1_800_000_000_000 if log_append else None)


def _read(batches: list[bytes], lo: int, hi: int, headers: bool, c: bool,
          monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as m:
        if not c:
            m.setattr(arrow_records, "_c_scan", None)
        builder = arrow_records.ArrowRecordBuilder("t", 3, _schema(headers))
        for raw in batches:
            h = parse_batch_header(raw)
            builder.add(raw[BATCH_OVERHEAD:], h, lo, hi)
        return builder.flush()


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("log_append", [False, True])
def test_c_walk_equals_python(headers: bool, log_append: bool,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [_batch(300, 0, log_append=log_append), _batch(1, 300),
               _batch(200, 301, headers=headers, log_append=log_append), _batch(500, 501)]
    for lo, hi in ((0, 1001), (5, 990), (300, 301), (700, 702)):
        fast = _read(batches, lo, hi, headers, True, monkeypatch)
        slow = _read(batches, lo, hi, headers, False, monkeypatch)
        assert fast.num_rows == hi - lo
        assert fast.equals(slow), (lo, hi)
        if hi - lo > 100:
            assert fast.column("key").null_count > 0 and fast.column("value").null_count > 0


def test_c_walk_never_accepts_what_python_refuses() -> None:
    rng = random.Random(17)
    raw = _batch(40, 0)
    header = parse_batch_header(raw)
    blob = raw[BATCH_OVERHEAD:]
    schema = _schema(False)
    refused = agreed = 0
    for _ in range(3000):
        mutated = bytearray(blob)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)):]
        data = bytes(mutated)
        got = arrow_records._c_scan(data, header.records_count, 0, 1 << 40,  # type: ignore[misc]
                                    header.base_offset, header.base_timestamp, 0)
        if got is None:
            refused += 1
            continue
        py = arrow_records.ArrowRecordBuilder("t", 0, schema)
        try:
            py._add_py(data, header, 0, 1 << 40)
        except (InvalidRecords, OverflowError) as e:
            raise AssertionError(f"C accepted what Python refuses: {e}") from e
        c = arrow_records.ArrowRecordBuilder("t", 0, schema)
        c._add_scanned(data, header, got)
        assert c.flush().equals(py.flush())
        agreed += 1
    assert refused > 100 and agreed > 100, (refused, agreed)
