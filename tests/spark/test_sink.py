"""format("odradek") as a sink: a batch write read back, and a streaming write
(at-least-once until the broker serves transactions) read back."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

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

    if not broker_supports_transactions(bs):
        # Exactly-once needs the broker's transactions: asking for it is refused
        # when the query starts, before any batch.
        refused = query("exactly-once", str(tmp_path / "eo"))
        with pytest.raises(Exception, match="'deliveryGuarantee': exactly-once needs a broker"):
            refused.awaitTermination(SPARK_TIMEOUT_S)

    q = query("at-least-once", str(tmp_path / "alo"))
    assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
    assert q.exception() is None, q.exception()
    back = _read_back(spark, bs, dst)
    assert Counter((r.key, r.value) for r in back) == Counter(
        (f"k{i}".encode(), f"V{i}".encode()) for i in range(60)
    )
