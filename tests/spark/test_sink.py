"""format("odradek") as a sink: a batch write read back, and an at-least-once
streaming write read back; exactly-once being refused without transactions."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from odradek.spark import writer as writer_mod
from odradek.spark.broker import broker_supports_transactions
from tests.spark.conftest import SPARK_TIMEOUT_S
from tests.spark.helpers import create_topic, produce


def _read_back(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    return (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .collect()
    )


def test_batch_write_then_read_back(spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 2)
    rows = [
        (f"k{i}", f"v{i}".encode(), topic_name, i % 2, [("n", str(i).encode())] if i % 3 else None)
        for i in range(40)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).mode("append").save()

    back = _read_back(spark, bs, topic_name)
    assert len(back) == 40
    for r in back:
        i = int(r.value[1:])
        assert (r.key, r.partition) == (f"k{i}".encode(), i % 2)
        assert (r.headers and [(h.key, h.value) for h in r.headers]) == (
            [("n", str(i).encode())] if i % 3 else None
        )


def test_streaming_write_at_least_once_then_read_back(
    spark: Any, spark_broker: Any, topic_name: str, tmp_path: Any
) -> None:
    bs = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, src, 2)
    create_topic(bs, dst, 2)
    produce(bs, src, ((i % 2, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(60)))

    def query(guarantee: str, checkpoint: str) -> Any:
        return (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "25")
            .load()
            .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
            .writeStream.format("odradek")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", dst)
            .option("deliveryGuarantee", guarantee)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    # odradek serves transactions, so `auto` is exactly-once (the exactly-once
    # tests are in test_exactly_once.py); this one asks for at-least-once.
    assert broker_supports_transactions(bs)
    q = query("at-least-once", str(tmp_path / "alo"))
    assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
    assert q.exception() is None, q.exception()
    back = _read_back(spark, bs, dst)
    assert Counter((r.key, r.value) for r in back) == Counter(
        (f"k{i}".encode(), f"V{i}".encode()) for i in range(60)
    )


def test_exactly_once_refused_without_broker_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """decide_exactly_once, as the stream writer runs it when the query starts,
    against a broker that does not serve transactions (the probe says no)."""
    from odradek.spark.options import parse_sink_options

    monkeypatch.setattr(writer_mod, "broker_supports_transactions", lambda *_a, **_k: False)

    def opts(guarantee: str) -> Any:
        return parse_sink_options(
            {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "deliveryGuarantee": guarantee}
        )

    with pytest.raises(Exception, match="'deliveryGuarantee': exactly-once needs a broker"):
        writer_mod.decide_exactly_once(opts("exactly-once"))
    assert writer_mod.decide_exactly_once(opts("auto")) is False
    assert writer_mod.decide_exactly_once(opts("at-least-once")) is False
