"""The sink's bulk path (producerPath=batch) against a real broker, without Spark:
Arrow batches written by bulk_writer.produce_arrow read back row for row by a
confluent-kafka consumer and by odradek's own batch decoder (every codec; keys,
null keys, null values, headers, explicit and default partitions, timestamps);
the idempotent producer's sequences; a transactional producer left with its
transaction open is fenced and its records aborted by the next one of the same
transactional.id."""

from __future__ import annotations

import time
from typing import Any

import pytest

from odradek.protocol.records import decode_batch_records, iter_batch_headers
from odradek.spark.batch_encode import murmur2_py
from odradek.spark.bulk_producer import BulkProducer, ProducerFenced
from odradek.spark.bulk_writer import new_producer, produce_arrow
from odradek.spark.fetch_client import PartitionClient
from odradek.spark.options import parse_sink_options
from tests.spark.helpers import committed_records, create_topic

pa = pytest.importorskip("pyarrow")

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
PARTITIONS = 3


def _rows(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append({
            "key": None if i % 5 == 0 else f"k{i}",
            "value": None if i % 7 == 3 else f"v{i}".encode() * (1 + i % 3),
            "partition": (i % PARTITIONS) if i % 4 == 0 else None,
            "headers": (None if i % 3 == 0 else
                        [{"key": "h", "value": str(i).encode()}, {"key": "n", "value": None}]),
        })
    return out


def _batches(rows: list[dict[str, Any]], size: int) -> list[Any]:
    schema = pa.schema([("key", pa.string()), ("value", pa.binary()),
                        ("partition", pa.int32()), ("headers", HEADERS)])
    table = pa.Table.from_pylist(rows, schema)
    return table.to_batches(max_chunksize=size)


def _consume(bootstrap: str, topic: str, total: int) -> list[tuple[int, Any, Any, Any, int]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < total:
            assert time.monotonic() < deadline, f"read {len(out)} of {total}"
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                hs = tuple((k, v) for k, v in (m.headers() or ()))
                out.append((m.partition(), m.key(), m.value(), hs, m.timestamp()[1]))
    finally:
        c.close()
    return out


def _decode(bootstrap: str, topic: str) -> list[tuple[int, Any, Any, Any, int]]:
    out = []
    for p in range(PARTITIONS):
        client = PartitionClient(bootstrap, topic, p, "read_uncommitted")
        deadline = time.monotonic() + 30
        end = client.list_offset(-1, deadline)
        offset = 0
        while offset < end:
            got = client.fetch(offset, deadline)
            for header in iter_batch_headers(got.records):
                for r in decode_batch_records(got.records, header):
                    out.append((p, r.key, r.value, r.headers, r.timestamp))
                offset = header.next_offset
        client.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_bulk_batches_read_back_row_for_row(spark_broker: Any, topic_name: str,
                                            codec: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, PARTITIONS)
    opts = parse_sink_options({"kafka.bootstrap.servers": bs, "topic": topic_name,
                               "kafka.compression.type": codec})
    assert (opts.producer_path, opts.compression) == ("batch", codec)
    rows = _rows(300)
    before = int(time.time() * 1000)
    producer = new_producer(opts)
    producer.init()
    try:
        assert produce_arrow(producer, iter(_batches(rows, 64)), opts) == len(rows)
    finally:
        producer.close()
    after = int(time.time() * 1000)

    def expected_partition(i: int, row: dict[str, Any]) -> int | None:
        if row["partition"] is not None:
            return int(row["partition"])
        if row["key"] is not None:
            return (murmur2_py(row["key"].encode()) & 0x7FFFFFFF) % PARTITIONS
        return None  # sticky: any partition, the same for the rows of one Arrow batch

    consumed = _consume(bs, topic_name, len(rows))
    decoded = _decode(bs, topic_name)
    for got in (consumed, decoded):
        assert len(got) == len(rows)
        by_value: dict[Any, list[Any]] = {}
        for part, key, value, hs, ts in got:
            assert before <= ts <= after
            by_value.setdefault((key, value, hs), []).append(part)
        for i, row in enumerate(rows):
            key = row["key"].encode() if row["key"] is not None else None
            hs = () if row["headers"] is None else (("h", str(i).encode()), ("n", None))
            part = by_value[(key, row["value"], hs)].pop()
            want = expected_partition(i, row)
            assert want is None or part == want, (i, part, want)
    # the same order per partition both ways
    assert sorted(consumed, key=lambda r: r[0]) == sorted(decoded, key=lambda r: r[0])


def test_null_key_rows_of_one_arrow_batch_share_a_partition(spark_broker: Any,
                                                            topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, PARTITIONS)
    opts = parse_sink_options({"kafka.bootstrap.servers": bs, "topic": topic_name})
    rows = [{"key": None, "value": f"v{i}".encode(), "partition": None, "headers": None}
            for i in range(60)]
    producer = new_producer(opts)
    producer.init()
    try:
        produce_arrow(producer, iter(_batches(rows, 20)), opts)
    finally:
        producer.close()
    got = _consume(bs, topic_name, 60)
    by_batch: dict[int, set[int]] = {}
    for part, _, value, _, _ in got:
        by_batch.setdefault(int(value[1:]) // 20, set()).add(part)
    assert all(len(parts) == 1 for parts in by_batch.values()), by_batch


def test_open_transaction_is_aborted_and_its_producer_fenced(spark_broker: Any,
                                                              topic_name: str) -> None:
    """The bulk path's answer to a task killed with its transaction open: the next
    producer of the transactional.id bumps the epoch, which aborts the open
    transaction (read_committed never sees its rows) and fences the old one."""
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    tid = f"bulk-{topic_name}"
    old = BulkProducer(bs, transactional_id=tid)
    old.init()
    old.begin_transaction()
    old.send([(topic_name, 0, _blob(["lost-1", "lost-2"]), 2, int(time.time() * 1000))])

    new = BulkProducer(bs, transactional_id=tid)
    new.init()  # fences `old`, aborts its transaction
    assert new.producer_epoch > old.producer_epoch
    new.begin_transaction()
    new.send([(topic_name, 0, _blob(["kept"]), 1, int(time.time() * 1000))])
    new.send_offsets(tid, topic_name, 0, 7)
    new.commit_transaction()
    assert new.committed_offset(tid, topic_name, 0) == 7
    late = pa.record_batch({"value": pa.array([b"late"], pa.binary())})
    opts = parse_sink_options({"kafka.bootstrap.servers": bs, "topic": topic_name})
    with pytest.raises(ProducerFenced):  # raised in the sender thread, seen by the task
        produce_arrow(old, iter([late]), opts)
    with pytest.raises(ProducerFenced):
        old.commit_transaction()
    old.close()
    new.close()
    assert [v for _, _, v in committed_records(bs, topic_name)] == [b"kept"]


def _blob(values: list[str]) -> bytes:
    from odradek.spark.batch_encode import SinkColumns, encode_records, row_range

    batch = pa.record_batch({"value": pa.array([v.encode() for v in values], pa.binary())})
    return encode_records(row_range(len(values)), SinkColumns.of(batch))
