"""The remote-segment reader (odradek/spark/remote_segment.py) on hand-built
segment files: every codec, headers and nulls, control batches, aborted
transactions under both isolation levels, offset ranges inside batches, the
offset index, and truncated or corrupt objects. Files are read through fsspec
(file:// URLs); the S3 path is covered by tests/spark/test_remote_read.py."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
pytest.importorskip("fsspec")

from odradek.protocol.records import Compression, Record, build_batch, build_control_batch
from odradek.spark.remote_segment import (
    TXN_ENTRY,
    AbortedTxn,
    SegmentCorrupt,
    collect_aborted,
    parse_txn_index,
    read_segment,
)


def schema(include_headers: bool = False) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    from odradek.spark.source import source_schema

    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def records(base: int, n: int, ts: int = 1_700_000_000_000, **kw: Any) -> list[Record]:
    return [
        Record(base + i, ts + i, f"k{base + i}".encode(), f"value-{base + i}".encode() * 3, **kw)
        for i in range(n)
    ]


def read(path: Path, start: int, end: int, include_headers: bool = False, **kw: Any) -> Any:
    batches = list(read_segment(
        f"file://{path}", start, end, topic="t", partition=3,
        arrow_schema=schema(include_headers), **kw,
    ))
    return pa.Table.from_batches(batches, schema=schema(include_headers))


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_row_for_row(tmp_path: Path, codec: Compression) -> None:
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(
        build_batch(records(0, 50), base_offset=0, compression=codec)
        + build_batch(records(50, 30), base_offset=50, compression=codec)
    )
    table = read(seg, 0, 80, rows_per_batch=7)
    ranged = read(seg, 0, 80, size=seg.stat().st_size, chunk_bytes=1000)  # ranged GETs
    assert ranged.equals(table)
    assert table.column("offset").to_pylist() == list(range(80))
    assert table.column("key").to_pylist() == [f"k{i}".encode() for i in range(80)]
    assert table.column("value").to_pylist() == [f"value-{i}".encode() * 3 for i in range(80)]
    assert set(table.column("topic").to_pylist()) == {"t"}
    assert set(table.column("partition").to_pylist()) == {3}
    assert table.column("timestampType").to_pylist() == [0] * 80
    ts = [t.timestamp() * 1000 for t in table.column("timestamp").to_pylist()]
    assert ts == [1_700_000_000_000 + (i % 50 if i < 50 else i - 50) for i in range(80)]


def test_range_inside_batches_nulls_headers_log_append_time(tmp_path: Path) -> None:
    recs = [
        Record(0, 10, None, b"v0", (("h1", b"a"), ("h2", None))),
        Record(1, 11, b"k1", None),
        Record(2, 12, b"", b"", (("h", b"x" * 300),)),
        Record(3, 13, b"k3" * 200, b"v3" * 5000),
    ]
    seg = tmp_path / "s.log"
    seg.write_bytes(
        build_batch(recs, base_offset=0, compression=Compression.LZ4)
        + build_batch(records(4, 4, ts=5), base_offset=4, timestamp_type=1, max_timestamp=999)
    )
    t = read(seg, 1, 6, include_headers=True)
    assert t.column("offset").to_pylist() == [1, 2, 3, 4, 5]
    assert t.column("key").to_pylist() == [b"k1", b"", b"k3" * 200, b"k4", b"k5"]
    assert t.column("value").to_pylist()[:3] == [None, b"", b"v3" * 5000]
    assert t.column("timestampType").to_pylist() == [0, 0, 0, 1, 1]
    assert [x.timestamp() * 1000 for x in t.column("timestamp").to_pylist()] == [11, 12, 13, 999, 999]
    assert t.column("headers").to_pylist() == [None, [{"key": "h", "value": b"x" * 300}], None, None, None]
    full = read(seg, 0, 8, include_headers=True)
    assert full.column("headers").to_pylist()[0] == [
        {"key": "h1", "value": b"a"}, {"key": "h2", "value": None}]
    assert full.column("key").to_pylist()[0] is None


def _txn_segment() -> tuple[bytes, list[AbortedTxn]]:
    """pid 7 commits 0-2 (marker 3); pid 8 aborts 4-5 interleaved with pid 9's
    committed 6 (marker of 8 at 7, of 9 at 8); plain records 9-10; pid 8 again
    (a new transaction, committed) 11 (marker 12)."""
    tx: dict[str, Any] = {"is_transactional": True, "producer_epoch": 0}
    data = (
        build_batch(records(0, 3), base_offset=0, producer_id=7, **tx)
        + build_control_batch("commit", 7, 0, 1, base_offset=3)
        + build_batch(records(4, 2), base_offset=4, producer_id=8, **tx)
        + build_batch(records(6, 1), base_offset=6, producer_id=9, **tx)
        + build_control_batch("abort", 8, 0, 1, base_offset=7)
        + build_control_batch("commit", 9, 0, 1, base_offset=8)
        + build_batch(records(9, 2), base_offset=9, compression=Compression.ZSTD)
        + build_batch(records(11, 1), base_offset=11, producer_id=8, **tx)
        + build_control_batch("commit", 8, 0, 1, base_offset=12)
    )
    return data, [AbortedTxn(8, 4, 7, 6)]


def test_control_batches_and_aborted_transactions(tmp_path: Path) -> None:
    data, index = _txn_segment()
    seg = tmp_path / "s.log"
    seg.write_bytes(data)
    txn = tmp_path / "s.txnindex"
    txn.write_bytes(b"".join(TXN_ENTRY.pack(0, t.producer_id, t.first_offset, t.last_offset,
                                            t.last_stable_offset) for t in index))
    entries = parse_txn_index(txn.read_bytes())
    assert entries == index
    aborted, complete = collect_aborted([entries], 0, 13)
    assert aborted == [(8, 4)] and not complete
    uncommitted = read(seg, 0, 13)
    assert uncommitted.column("offset").to_pylist() == [0, 1, 2, 4, 5, 6, 9, 10, 11]
    committed = read(seg, 0, 13, isolation_level="read_committed", aborted=aborted)
    assert committed.column("offset").to_pylist() == [0, 1, 2, 6, 9, 10, 11]
    # The search is complete once an entry's lastStableOffset reaches the end.
    assert collect_aborted([entries, [AbortedTxn(1, 2, 3, 100)]], 0, 50) == ([(8, 4), (1, 2)], True)
    assert collect_aborted([entries], 8, 13) == ([], False)


def test_offset_index_starts_mid_segment(tmp_path: Path) -> None:
    b1 = build_batch(records(100, 10), base_offset=100)
    b2 = build_batch(records(110, 10), base_offset=110, compression=Compression.SNAPPY)
    seg = tmp_path / "s.log"
    seg.write_bytes(b1 + b2)
    idx = tmp_path / "s.index"
    idx.write_bytes(struct.pack(">ii", 10, len(b1)) + b"\0" * 16)
    t = read(seg, 112, 120, index_url=f"file://{idx}", base_offset=100)
    assert t.column("offset").to_pylist() == list(range(112, 120))


def test_truncated_and_corrupt_objects_fail_clearly(tmp_path: Path) -> None:
    whole = build_batch(records(0, 5), base_offset=0) + build_batch(records(5, 5), base_offset=5)
    seg = tmp_path / "cut.log"
    seg.write_bytes(whole[:-7])
    with pytest.raises(SegmentCorrupt, match="truncated: it ends inside a batch"):
        read(seg, 0, 10)
    with pytest.raises(SegmentCorrupt, match="truncated: it ends inside a batch"):
        read(seg, 0, 10, size=len(whole))  # the metadata's size is larger than the object
    seg.write_bytes(whole[: len(whole) // 2 + 1][: len(build_batch(records(0, 5), base_offset=0))])
    with pytest.raises(SegmentCorrupt, match="ends at offset 5 but offsets up to 9"):
        read(seg, 0, 10)
    bad = bytearray(whole)
    bad[80] ^= 0xFF
    seg.write_bytes(bytes(bad))
    with pytest.raises(SegmentCorrupt, match="CRC mismatch"):
        read(seg, 0, 10)
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "missing.log", 0, 10)


def test_small_chunks_bounded_memory(tmp_path: Path) -> None:
    """Chunks smaller than a batch: the reader grows its buffer to one batch only."""
    seg = tmp_path / "s.log"
    seg.write_bytes(b"".join(
        build_batch(records(i * 20, 20), base_offset=i * 20, compression=Compression.GZIP)
        for i in range(10)))
    t = read(seg, 0, 200, chunk_bytes=100)
    assert t.column("offset").to_pylist() == list(range(200))


# -- planning (odradek/spark/remote_plan.py) and options --------------------------------


def _segments(tmp_path: Path, snapshot: bytes | None, txn: list[AbortedTxn]) -> list[Any]:
    """Three remote segments of offsets 0-9, 10-19, 30-39 (a gap at 20-29), the
    txn entries in the second one's .txnindex, `snapshot` as the last one's."""
    from odradek.spark.remote_plan import RemoteSegment

    out = []
    for base, end in ((0, 9), (10, 19), (30, 39)):
        stem = tmp_path / f"{base:020d}-x"
        out.append(RemoteSegment("t", 0, base, end, f"file://{stem}.log", f"file://{stem}.index",
                                 f"file://{stem}.txnindex", f"file://{stem}.snapshot"))
    (tmp_path / f"{10:020d}-x.txnindex").write_bytes(b"".join(
        TXN_ENTRY.pack(0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in txn))
    if snapshot is not None:
        (tmp_path / f"{30:020d}-x.snapshot").write_bytes(snapshot)
    return out


def _snapshot(open_txns: list[tuple[int, int]]) -> bytes:
    entries = b"".join(struct.pack(">qhiqiqiq", pid, 0, 0, 0, 0, 0, 0, first)
                       for pid, first in open_txns)
    return struct.pack(">hIi", 1, 0, len(open_txns)) + entries


def test_plan_remote_tasks_gaps_and_the_local_tail(tmp_path: Path) -> None:
    from odradek.spark.remote_plan import plan_remote

    segs = _segments(tmp_path, _snapshot([]), [])
    remote, broker = plan_remote(segs, 5, 50, {"remote_fs": {}}, "read_uncommitted")
    assert [(p.from_offset, p.until_offset) for p in remote] == [(5, 10), (10, 20), (30, 40)]
    assert broker == [(20, 30), (40, 50)]
    remote, broker = plan_remote(segs, 45, 50, {"remote_fs": {}}, "read_uncommitted")
    assert remote == [] and broker == [(45, 50)]


def test_plan_read_committed_aborted_lists_and_open_transactions(tmp_path: Path) -> None:
    from odradek.spark.remote_plan import plan_remote

    conf: dict[str, Any] = {"remote_fs": {}}
    # pid 5 aborted 3..14 (marker 14, indexed in the second segment): the first
    # segment's task needs it although its own .txnindex is empty.
    txn = [AbortedTxn(5, 3, 14, 12)]
    remote, broker = plan_remote(_segments(tmp_path, _snapshot([]), txn), 0, 40, conf,
                                 "read_committed")
    assert [p.aborted for p in remote] == [((5, 3),), ((5, 3),), ()]
    assert broker == [(20, 30)]
    # A transaction open at the tier's end since offset 15: the segments holding
    # its records whose search is not complete go to the brokers.
    (tmp_path / "b").mkdir()
    remote, broker = plan_remote(_segments(tmp_path / "b", _snapshot([(9, 15)]), txn), 0, 40,
                                 conf, "read_committed")
    assert [(p.from_offset, p.until_offset) for p in remote] == [(0, 10)]
    assert broker == [(10, 40)]
    # No snapshot: every segment whose search is incomplete goes to the brokers.
    (tmp_path / "c").mkdir()
    remote, broker = plan_remote(_segments(tmp_path / "c", None, txn), 0, 40, conf,
                                 "read_committed")
    assert [(p.from_offset, p.until_offset) for p in remote] == [(0, 10)]  # lso 12 >= 10
    assert broker == [(10, 40)]


def test_remote_options() -> None:
    from odradek.spark.options import OdradekOptionError, parse_source_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = parse_source_options({**base, "remote.rsm.config.url": "s3://b/p",
                                 "remote.rsm.config.fs.endpoint_url": "http://s3",
                                 "remote.rsm.config.fs.anon": "true",
                                 "remote.rsm.config.fs.client_kwargs": '{"region_name": "x"}'},
                                streaming=False)
    assert opts.remote_read == "auto" and opts.remote_url == "s3://b/p"
    assert opts.remote_fs == {"endpoint_url": "http://s3", "anon": True,
                              "client_kwargs": {"region_name": "x"}}
    assert parse_source_options(base, streaming=False).remote_url is None
    for bad, match in (({"remoteRead": "sometimes"}, "remoteRead"),
                       ({"remoteRead": "direct"}, "needs remote.rsm.config.url"),
                       ({"remote.rsm.config.fs.key": "k"}, "set remote.rsm.config.url")):
        with pytest.raises(OdradekOptionError, match=match):
            parse_source_options({**base, **bad}, streaming=False)
    with pytest.raises(OdradekOptionError, match="direct is for batch reads"):
        parse_source_options({**base, "remoteRead": "direct", "remote.rsm.config.url": "s3://b"},
                             streaming=True)
