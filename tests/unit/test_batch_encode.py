"""spark/batch_encode.py: Arrow columns to v2 record batches. The C loop
(_batch_encode.c) gives the bytes of the Python loop; a batch decodes with the
broker's decoder (protocol/records.py) to the rows put in, equals build_batch's
bytes for the same records, and holds for every codec; murmur2 matches the
Java client's values; bad buffers are refused, never read past."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.records import (
    Compression,
    Record,
    batch_crc_ok,
    build_batch,
    decode_batch_records,
    parse_batch_header,
)
from odradek.spark import batch_encode
from odradek.spark.batch_encode import SinkColumns

pa = pytest.importorskip("pyarrow")

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

blobs = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))),
             max_size=3))


@st.composite
def tables(draw: st.DrawFn) -> tuple[object, list[tuple]]:
    rows = draw(st.lists(st.tuples(blobs, blobs, header_lists), max_size=30))
    with_key = draw(st.booleans())
    with_headers = draw(st.booleans())
    string_type = draw(st.booleans())
    keys = [r[0] for r in rows]
    values = [r[1] for r in rows]
    cols = {}
    if with_key:
        cols["key"] = pa.array(keys, pa.binary())
    if string_type:  # a string column holds text: keep the values valid utf-8
        values = [None if v is None else v.hex().encode() for v in values]
        cols["value"] = pa.array([None if v is None else v.decode() for v in values], pa.string())
    else:
        cols["value"] = pa.array(values, pa.binary())
    if with_headers:
        cols["headers"] = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for _, _, h in rows],
            HEADERS_TYPE)
    table = pa.table(cols)
    # a slice: Arrow offsets that do not start at 0
    start = draw(st.integers(0, len(rows)))
    stop = draw(st.integers(start, len(rows)))
    batch = table.slice(start, stop - start).combine_chunks().to_batches()
    rb = batch[0] if batch else pa.RecordBatch.from_pydict(
        {n: pa.array([], table.schema.field(n).type) for n in table.schema.names})
    expected = [
        (keys[i] if with_key else None, values[i],
         tuple((k, v) for k, v in (rows[i][2] or ())) if with_headers else ())
        for i in range(start, stop)
    ]
    return rb, expected


def _rows(values: list[int]) -> memoryview:
    return memoryview(array("q", values))


@settings(max_examples=300, deadline=None)
@given(tables(), st.data())
def test_c_encoder_gives_the_python_bytes_and_decodes_to_the_rows(table, data) -> None:
    rb, expected = table
    cols = SinkColumns.of(rb)
    rows = _rows(data.draw(st.permutations(range(rb.num_rows))))
    py = batch_encode.encode_records_py(rows, cols)
    if batch_encode.c_encode_available():
        assert batch_encode.encode_records(rows, cols) == py
    if not len(rows):
        return
    codec = data.draw(st.sampled_from(list(Compression)))
    batch = batch_encode.record_batch(py, len(rows), timestamp_ms=1_700_000_000_123,
                                      compression=codec, producer_id=7, producer_epoch=2,
                                      base_sequence=40, transactional=True)
    header = parse_batch_header(batch)
    assert batch_crc_ok(batch, header)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    got = decode_batch_records(batch, header)
    want = [expected[int(r)] for r in rows]
    assert [(r.key, r.value, r.headers) for r in got] == want
    assert [r.offset for r in got] == list(range(len(rows)))
    assert {r.timestamp for r in got} == {1_700_000_000_123}
    if codec == Compression.NONE:  # the broker's own builder writes the same bytes
        assert batch == build_batch(
            [Record(timestamp=1_700_000_000_123, key=k, value=v, headers=h) for k, v, h in want],
            producer_id=7, producer_epoch=2, base_sequence=40, is_transactional=True)


def test_murmur2_matches_the_java_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka's UtilsTest.testMurmur2 values (as signed int32)
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}
    for data, want in cases.items():
        assert batch_encode.murmur2_py(data) == want & 0xFFFFFFFF
    keys = list(cases) + [None, b""]
    rb = pa.record_batch({"key": pa.array(keys, pa.binary()), "value": pa.array([b"v"] * 8)})
    got = batch_encode.key_partitions(SinkColumns.of(rb), 7)
    want_parts = [-1 if k is None else (batch_encode.murmur2_py(k) & 0x7FFFFFFF) % 7 for k in keys]
    assert got.to_pylist() == want_parts
    monkeypatch.setattr(batch_encode, "_c_murmur2", None)  # the Python stand-in
    assert batch_encode.key_partitions(SinkColumns.of(rb), 7).to_pylist() == want_parts


def test_group_rows_keeps_order_and_cuts_by_bytes() -> None:
    parts = pa.array([1, 0, 1, 1, 0, 1], pa.int32())
    sizes = pa.array([10, 10, 10, 10, 10, 10], pa.int64())
    got = [(p, list(r)) for p, r in batch_encode.group_rows(parts, sizes, max_bytes=20)]
    assert got == [(0, [1, 4]), (1, [0, 2]), (1, [3, 5])]


@pytest.mark.skipif(not batch_encode.c_encode_available(), reason="the C encoder is not built")
def test_c_encoder_refuses_out_of_bounds_buffers() -> None:
    from odradek.spark._batch_encode import encode, murmur2_partitions

    ok = (_rows([0, 3]), b"abc", b"\x01")
    assert encode(_rows([0]), ok, None, None)
    bad_rows = [_rows([1]), _rows([-1])]
    for rows in bad_rows:
        with pytest.raises(ValueError):
            encode(rows, ok, None, None)
        with pytest.raises(ValueError):
            murmur2_partitions(rows, ok, 3)
    for column in [(_rows([0, 4]), b"abc", b"\x01"), (_rows([2, 1]), b"abc", b"\x01"),
                   (_rows([0, 3]), b"abc", b"\x01\x01"), (_rows([0]), b"", b""),
                   (b"\x00" * 12, b"abc", b"\x01")]:
        with pytest.raises(ValueError):
            encode(_rows([0]), column, None, None)
    headers = (_rows([0, 2]), _rows([0, 1]), b"k", _rows([0, 1]), b"v", b"\x01")
    with pytest.raises(ValueError):  # row 0 claims two headers, the columns hold one
        encode(_rows([0]), ok, None, headers)
