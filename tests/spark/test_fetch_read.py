"""The Fetch read path (brokerReadPath=fetch, the default over PLAINTEXT) returns,
row for row and column for column, what the librdkafka consumer path returns
(brokerReadPath=consumer), against a real broker: every codec, null keys and
values, headers (with null values), LogAppendTime, committed, aborted and open
transactions, under both isolation levels, and ranges that start and end inside
batches. The executor's loop is also run in this process with a tiny
per-partition fetch size, so that every fetch response ends in a cut batch."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark import broker_read, fetch_client
from odradek.spark.options import parse_source_options
from odradek.spark.reader import OdradekBatchReader, OffsetRangePartition, read_consumer
from odradek.spark.source import source_schema

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 2


def _produce(bootstrap: str, topic: str) -> None:
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                      "linger.ms": 5, "batch.num.messages": 50, "enable.idempotence": True})
        for i in range(300):
            key = None if i % 17 == 0 else f"{codec}-{i}".encode()
            value = None if i % 29 == 0 else f"{codec} value {i} ".encode() * (1 + i % 5)
            headers: Any = [("codec", codec.encode()), ("n", None)] if i % 5 == 0 else None
            p.produce(topic, value, key, partition=i % PARTITIONS, headers=headers)
        assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}",
                    "linger.ms": 2, "compression.type": "zstd"})
    txn.init_transactions(30)
    for round_ in range(5):
        txn.begin_transaction()
        for i in range(120):
            txn.produce(topic, f"txn {round_} record {i}".encode(), f"t{round_}-{i}".encode(),
                        partition=i % PARTITIONS)
            if i % 25 == 0:  # non-transactional records between the transaction's
                plain.produce(topic, f"plain {round_}-{i}".encode(), partition=i % PARTITIONS)
                plain.poll(0)
        txn.flush(30)
        (txn.abort_transaction if round_ % 2 else txn.commit_transaction)(30)
    assert plain.flush(30) == 0
    txn.begin_transaction()  # left open: read_committed stops before it
    for i in range(40):
        txn.produce(topic, f"open {i}".encode(), partition=i % PARTITIONS)
    txn.flush(30)


@pytest.fixture(scope="module")
def mixed_topic(spark_broker: Any) -> dict[str, Any]:
    bootstrap = spark_broker.bootstrap
    topic = f"fetch-read-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    _produce(bootstrap, topic)
    log_append = f"fetch-read-lat-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(log_append, 1, 1, config={
        "message.timestamp.type": "LogAppendTime"})])[log_append].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "compression.type": "lz4"})
    for i in range(500):
        p.produce(log_append, f"lat {i}".encode(), timestamp=1_000 + i)
    assert p.flush(30) == 0
    return {"bootstrap": bootstrap, "topic": topic, "log_append": log_append}


def _opts(t: dict[str, Any], path: str, isolation: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": t["bootstrap"], "subscribe": t["topic"],
            "startingOffsets": "earliest", "endingOffsets": "latest", "includeHeaders": "true",
            "kafka.isolation.level": isolation, "brokerReadPath": path, **extra}


def _rows(spark: Any, opts: dict[str, str]) -> list[Any]:
    return spark.read.format("odradek").options(**opts).load().orderBy(
        "partition", "offset").collect()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_fetch_equals_consumer_row_for_row(spark: Any, mixed_topic: dict[str, Any],
                                           isolation: str) -> None:
    fetched = _rows(spark, _opts(mixed_topic, "fetch", isolation))
    consumed = _rows(spark, _opts(mixed_topic, "consumer", isolation))
    assert len(fetched) == len(consumed) > 1500
    assert fetched == consumed
    values = [r.value for r in fetched]
    aborted = [v for v in values if v is not None and v.startswith((b"txn 1 ", b"txn 3 "))]
    opened = [v for v in values if v is not None and v.startswith(b"open ")]
    if isolation == "read_committed":
        assert not aborted and not opened
    else:
        assert len(aborted) == 240 and len(opened) == 40
    assert any(r.key is None for r in fetched) and any(r.value is None for r in fetched)
    assert any(r.headers for r in fetched)
    for codec in CODECS:
        assert any(v is not None and v.startswith(codec.encode()) for v in values), codec


def test_log_append_time_and_ranges_inside_batches(spark: Any, mixed_topic: dict[str, Any]
                                                   ) -> None:
    lat = {**_opts(mixed_topic, "fetch", "read_uncommitted"), "subscribe": mixed_topic["log_append"],
           "startingOffsets": f'{{"{mixed_topic["log_append"]}":{{"0":7}}}}',
           "endingOffsets": f'{{"{mixed_topic["log_append"]}":{{"0":493}}}}',
           "maxRecordsPerPartition": "100"}
    fetched = _rows(spark, lat)
    assert fetched == _rows(spark, {**lat, "brokerReadPath": "consumer"})
    assert [r.offset for r in fetched] == list(range(7, 493))
    assert {r.timestampType for r in fetched} == {1}


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_executor_loop_with_cut_fetch_responses(mixed_topic: dict[str, Any], isolation: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process: a 1 KiB partition fetch size cuts nearly every response inside
    a batch (the batch is fetched again, whole, with a doubled size)."""
    import pyarrow as pa

    monkeypatch.setattr(fetch_client, "PARTITION_MAX_BYTES", 1024)
    monkeypatch.setattr(broker_read, "PARTITION_MAX_BYTES", 1024)
    opts = parse_source_options(_opts(mixed_topic, "fetch", isolation), streaming=False)
    schema = source_schema(True)
    from pyspark.sql.pandas.types import to_arrow_schema

    for part in OdradekBatchReader(opts, schema).partitions():
        assert isinstance(part, OffsetRangePartition)
        stats: dict[str, int] = {}
        fetched = pa.Table.from_batches(list(broker_read.read_fetch(
            part.conf["bootstrap"], part.topic, part.partition, part.from_offset + 3,
            part.until_offset - 2, arrow_schema=to_arrow_schema(schema, timezone="UTC"),
            isolation_level=isolation, fail_on_data_loss=True, poll_timeout_ms=30_000,
            rows_per_batch=97, stats=stats)))
        inner = OffsetRangePartition(part.topic, part.partition, part.from_offset + 3,
                                     part.until_offset - 2, part.conf)
        consumed = pa.Table.from_batches(list(read_consumer(inner, schema)))
        assert fetched.num_rows == consumed.num_rows > 500
        assert fetched.equals(consumed)
        assert stats["fetches"] > 10, stats
