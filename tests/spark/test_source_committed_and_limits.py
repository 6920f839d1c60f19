"""format("odradek") as a source: read_committed hides aborted and open
transactions; minOffsetsPerTrigger with maxTriggerDelay; failOnDataLoss after
DeleteRecords moved the log start offset (batch and a restarted stream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.spark import reader as reader_mod
from odradek.spark.options import parse_source_options
from odradek.spark.source import source_schema
from tests.spark.conftest import SPARK_TIMEOUT_S
from tests.spark.helpers import create_topic, produce, wait_for


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_read_committed_hides_aborted_and_open_transactions(
    spark: Any, spark_broker: Any, topic_name: str
) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"rc-{topic_name}", "linger.ms": 5})
    p.init_transactions(30)

    def txn(values: list[str], commit: bool) -> None:
        p.begin_transaction()
        for v in values:
            p.produce(topic_name, v.encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    txn(["c0", "c1", "c2"], commit=True)   # offsets 0-2, marker 3
    txn(["a0", "a1", "a2", "a3"], commit=False)  # 4-7 aborted, marker 8
    txn(["c3", "c4"], commit=True)         # 9-10, marker 11
    p.begin_transaction()                  # open: 12-13, not visible yet
    p.produce(topic_name, b"o0", partition=0)
    p.produce(topic_name, b"o1", partition=0)
    p.flush(30)
    try:
        committed = _read(spark, bs, subscribe=topic_name, **{"kafka.isolation.level": "read_committed"})
        assert sorted((r.offset, bytes(r.value)) for r in committed.collect()) == [
            (0, b"c0"), (1, b"c1"), (2, b"c2"), (9, b"c3"), (10, b"c4"),
        ]
        everything = _read(spark, bs, subscribe=topic_name)
        assert sorted(bytes(r.value) for r in everything.collect()) == sorted(
            [b"c0", b"c1", b"c2", b"a0", b"a1", b"a2", b"a3", b"c3", b"c4", b"o0", b"o1"]
        )
    finally:
        p.abort_transaction(30)


def test_min_offsets_per_trigger_waits_at_most_max_trigger_delay(
    spark: Any, spark_broker: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, ((0, None, b"x", None) for _ in range(3)))

    # The driver-side rule, on a clock the test moves.
    now = [1000.0]
    monkeypatch.setattr(reader_mod, "trigger_clock", lambda: now[0])
    opts = parse_source_options(
        {"kafka.bootstrap.servers": bs, "subscribe": topic_name, "startingOffsets": "earliest",
         "minOffsetsPerTrigger": "5", "maxTriggerDelay": "10s", "maxOffsetsPerTrigger": "8"},
        streaming=True,
    )
    r = reader_mod.OdradekStreamReader(opts, source_schema(False))
    try:
        limit = r.getDefaultReadLimit()
        start = r.initialOffset()
        assert start == {topic_name: {"0": 0}}
        assert r.latestOffset(start, limit) == start  # 3 < 5: wait
        now[0] += 9.9
        assert r.latestOffset(start, limit) == start  # still within maxTriggerDelay
        produce(bs, topic_name, ((0, None, b"x", None) for _ in range(3)))
        end1 = r.latestOffset(start, limit)
        assert end1 == {topic_name: {"0": 6}}  # 6 >= 5: a batch at once
        produce(bs, topic_name, ((0, None, b"x", None) for _ in range(2)))
        now[0] += 9.9
        assert r.latestOffset(end1, limit) == end1  # 2 < 5, 9.9 s since the last batch
        now[0] += 0.2
        end2 = r.latestOffset(end1, limit)
        assert end2 == {topic_name: {"0": 8}}  # the delay is over: what there is
        produce(bs, topic_name, ((0, None, b"x", None) for _ in range(20)))
        assert r.latestOffset(end2, limit) == {topic_name: {"0": 16}}  # maxOffsetsPerTrigger
    finally:
        r.stop()
    monkeypatch.undo()

    # Through Spark: a trigger that sees 3 (< 5) records runs no batch; the next
    # records make one batch of all of them.
    other = f"{topic_name}-e2e"
    create_topic(bs, other, 1)
    produce(bs, other, ((0, None, b"y", None) for _ in range(3)))
    table = "minrows_" + topic_name.replace("-", "_").replace(".", "_")
    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", other)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "5")
        .option("maxTriggerDelay", "1h")
        .load()
        .select("offset")
        .writeStream.format("memory")
        .queryName(table)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: q.lastProgress is not None, SPARK_TIMEOUT_S, "a first trigger")
        assert spark.sql(f"SELECT * FROM {table}").count() == 0
        produce(bs, other, ((0, None, b"y", None) for _ in range(3)))
        wait_for(
            lambda: spark.sql(f"SELECT * FROM {table}").count() >= 6, SPARK_TIMEOUT_S, "6 rows"
        )
        assert q.exception() is None
        assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [6]
    finally:
        q.stop()


def test_fail_on_data_loss_after_delete_records(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Path
) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, ((0, None, f"v{i}".encode(), None) for i in range(4)))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def stream(fail_on_data_loss: str) -> Any:
        q = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", topic_name)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
            .select("offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
        return q

    assert stream("true").exception() is None  # offsets 0-3; the checkpoint is at 4
    produce(bs, topic_name, ((0, None, f"v{i}".encode(), None) for i in range(4, 10)))
    admin = AdminClient({"bootstrap.servers": bs})
    [f] = admin.delete_records([TopicPartition(topic_name, 0, 7)]).values()
    assert f.result(30).low_watermark == 7  # the log start offset moved to 7: 4-6 are gone

    # The checkpoint asks for 4..10: the tasks find 4-6 deleted and fail the query.
    with pytest.raises(Exception, match=r"offsets 4\.\.6 were deleted.*failOnDataLoss=false"):
        stream("true")
    assert stream("false").exception() is None  # replays 4..10 without 4-6
    assert sorted(r.offset for r in spark.read.parquet(out).collect()) == [0, 1, 2, 3, 7, 8, 9]

    # Batch: a start below the log start offset fails when planned, or is skipped.
    below = json.dumps({topic_name: {"0": 2}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        _read(spark, bs, subscribe=topic_name, startingOffsets=below).collect()
    skipped = _read(spark, bs, subscribe=topic_name, startingOffsets=below, failOnDataLoss="false")
    assert sorted(r.offset for r in skipped.collect()) == [7, 8, 9]
