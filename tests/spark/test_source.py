"""format("odradek") as a source: batch ranges by offset and by timestamp, streaming
with availableNow and processingTime triggers, restart from a checkpoint, and new
partitions and topics picked up by a pattern."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.spark.conftest import SPARK_TIMEOUT_S
from tests.spark.helpers import add_partitions, create_topic, produce, wait_for

BASE_TS = 1_700_000_000_000
PER_PARTITION = 10


def _fill(bootstrap: str, topic: str, partitions: int) -> None:
    """PER_PARTITION records per partition: key k<p>-<i>, value v<p>-<i>,
    CreateTime BASE_TS + i seconds, one header."""
    create_topic(bootstrap, topic, partitions)
    produce(
        bootstrap,
        topic,
        (
            (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), BASE_TS + i * 1000)
            for p in range(partitions)
            for i in range(PER_PARTITION)
        ),
        headers=[("h", b"x")],
    )


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _po(df: Any) -> set[tuple[int, int]]:
    return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}


def test_batch_read_by_offset_ranges(spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    _fill(bs, topic_name, 3)

    df = _read(spark, bs, subscribe=topic_name, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    rows = df.selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect()
    assert len(rows) == 3 * PER_PARTITION
    for r in rows:
        assert r.topic == topic_name
        assert r.key == f"k{r.partition}-{r.offset}".encode()
        assert r.value == f"v{r.partition}-{r.offset}".encode()
        assert r.ts_ms == BASE_TS + r.offset * 1000
        assert r.timestampType == 0  # CreateTime
        assert [(h.key, h.value) for h in r.headers] == [("h", b"x")]

    # JSON ranges, -2 earliest / -1 latest, split into more tasks than partitions.
    ranged = _read(
        spark, bs, subscribe=topic_name, minPartitions="6",
        startingOffsets=json.dumps({topic_name: {"0": 2, "1": -2, "2": 5}}),
        endingOffsets=json.dumps({topic_name: {"0": 4, "1": 3, "2": -1}}),
    )
    assert "headers" not in ranged.columns
    assert ranged.rdd.getNumPartitions() >= 6
    assert _po(ranged) == {(0, 2), (0, 3), (1, 0), (1, 1), (1, 2)} | {(2, o) for o in range(5, 10)}

    assigned = _read(spark, bs, assign=json.dumps({topic_name: [1]}))
    assert _po(assigned) == {(1, o) for o in range(PER_PARTITION)}


def test_batch_read_by_timestamp(spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    _fill(bs, topic_name, 3)

    df = _read(
        spark, bs, subscribe=topic_name,
        startingTimestamp=str(BASE_TS + 3000),
        # p0 ends at the record of BASE_TS+5s, p1 has none that late (-> latest), p2 at +4s.
        endingOffsetsByTimestamp=json.dumps(
            {topic_name: {"0": BASE_TS + 5000, "1": BASE_TS + 999_000, "2": BASE_TS + 4000}}
        ),
    )
    assert _po(df) == {(0, 3), (0, 4)} | {(1, o) for o in range(3, 10)} | {(2, 3)}

    late = json.dumps({topic_name: {str(p): BASE_TS + 999_000 for p in range(3)}})
    with pytest.raises(Exception, match="startingOffsetsByTimestamp"):
        _read(spark, bs, subscribe=topic_name, startingOffsetsByTimestamp=late).collect()
    none_left = _read(
        spark, bs, subscribe=topic_name, startingOffsetsByTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert none_left.count() == 0


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_streaming_available_now_and_restart_from_checkpoint(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Any
) -> None:
    bs = spark_broker.bootstrap
    _fill(bs, topic_name, 2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def run_available_now() -> list[int]:
        q = (
            _stream(spark, bs, subscribe=topic_name, startingOffsets="earliest",
                    maxOffsetsPerTrigger="6")
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
        assert q.exception() is None, q.exception()
        return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

    sizes = run_available_now()
    assert sum(sizes) == 2 * PER_PARTITION
    assert max(sizes) <= 6 and len(sizes) >= 4, sizes  # maxOffsetsPerTrigger holds

    # Restart from the checkpoint: only what arrived since is read, once.
    produce(bs, topic_name, ((p, None, b"late", None) for p in (0, 1) for _ in range(3)))
    sizes = run_available_now()
    assert sum(sizes) == 6, sizes
    rows = spark.read.parquet(out).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * PER_PARTITION + 6
    assert set(keys) == {(p, o) for p in (0, 1) for o in range(PER_PARTITION + 3)}


def test_streaming_processing_time_picks_up_new_partitions_and_topics(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    bs = spark_broker.bootstrap
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(bs, first, 1)
    produce(bs, first, ((0, None, b"x", None) for _ in range(5)))
    table = "pt_" + topic_name.replace("-", "_").replace(".", "_")
    q = (
        _stream(spark, bs, subscribePattern=f"{topic_name}-.*", startingOffsets="earliest")
        .select("topic", "partition", "offset")
        .writeStream.format("memory")
        .queryName(table)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        def seen() -> set[tuple[str, int, int]]:
            assert q.exception() is None, q.exception()
            return {tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect()}

        wait_for(lambda: len(seen()) == 5, SPARK_TIMEOUT_S, "the first 5 records")
        add_partitions(bs, first, 2)
        produce(bs, first, ((1, None, b"y", None) for _ in range(3)))
        create_topic(bs, second, 1)
        produce(bs, second, ((0, None, b"z", None) for _ in range(4)))
        wait_for(lambda: len(seen()) >= 12, SPARK_TIMEOUT_S, "records of the new partition and topic")
        rows = spark.sql(f"SELECT * FROM {table}").collect()
        assert len(rows) == 12
        assert seen() == (
            {(first, 0, o) for o in range(5)}
            | {(first, 1, o) for o in range(3)}
            | {(second, 0, o) for o in range(4)}
        )
    finally:
        q.stop()
