"""Option validation: every bad or missing option fails with its name, before
any job runs. Most cases are checked on the parser alone (no Spark); a few go
through Spark to show the message reaches the user at load()/save()/start()."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.spark.options import (
    OdradekOptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


@pytest.mark.parametrize(
    ("options", "streaming", "names"),
    [
        ({"subscribe": "t"}, True, "kafka.bootstrap.servers"),
        ({**BS}, True, "exactly one of subscribe, subscribePattern, assign"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, True, "exactly one of"),
        ({**BS, "subscribePattern": "("}, True, "'subscribePattern'"),
        ({**BS, "assign": '{"t":0}'}, True, "'assign'"),
        ({**BS, "subscribe": "t", "startingOffsets": "{nope"}, True, "'startingOffsets': not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-3}}'}, True, "'startingOffsets'"),
        ({**BS, "subscribe": "t", "endingOffsets": "latest"}, True, "'endingOffsets': not supported in streaming"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, False, "'startingOffsets': starting offset can't be latest"),
        ({**BS, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "'endingOffsets'"),
        ({**BS, "subscribe": "t", "startingTimestamp": "yesterday"}, True, "'startingTimestamp'"),
        ({**BS, "assign": '{"t":[0,1]}', "startingOffsets": '{"t":{"0":1}}'}, True, "must name exactly the assigned partitions"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "'maxOffsetsPerTrigger'"),
        ({**BS, "subscribe": "t", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, True, "'minOffsetsPerTrigger'"),
        ({**BS, "subscribe": "t", "maxTriggerDelay": "soon"}, True, "'maxTriggerDelay'"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "maybe"}, True, "'failOnDataLoss'"),
        ({**BS, "subscribe": "t", "minPartitions": "-1"}, True, "'minPartitions'"),
        ({**BS, "subscribe": "t", "kafka.isolation.level": "read_dirty"}, True, "'kafka.isolation.level'"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, True, "'kafka.auto.offset.reset': not supported"),
        ({**BS, "subscribe": "t", "startingOffset": "earliest"}, True, "'startingOffset': unknown source option"),
        ({**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, True, "'startingOffsetsByTimestampStrategy'"),
    ],
)
def test_bad_source_option_is_named(options: dict[str, str], streaming: bool, names: str) -> None:
    with pytest.raises(OdradekOptionError, match=None) as e:
        parse_source_options(options, streaming=streaming)
    assert names in str(e.value)


def test_source_options_parse_as_spark_documents() -> None:
    o = parse_source_options(
        {
            **BS,
            "SUBSCRIBE": "a, b",  # option names are case-insensitive
            "startingOffsetsByTimestamp": json.dumps({"a": {"0": 5}}),
            "startingOffsets": "earliest",  # lower precedence than by-timestamp
            "maxTriggerDelay": "2m",
            "kafka.fetch.max.bytes": "1048576",
            "kafka.isolation.level": "read_committed",
        },
        streaming=True,
    )
    assert o.topics == ("a", "b")
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("a", 0): 5}
    assert o.max_trigger_delay_ms == 120_000
    assert o.kafka == {"fetch.max.bytes": "1048576"}
    assert o.isolation_level == "read_committed"
    batch = parse_source_options({**BS, "subscribe": "a"}, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert parse_source_options({**BS, "subscribe": "a"}, streaming=True).starting.kind == "latest"
    assert [parse_duration_ms("x", v) for v in ("500ms", "10s", "15m", "1h", "250")] == [
        500, 10_000, 900_000, 3_600_000, 250,
    ]


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"topic": "t"}, "kafka.bootstrap.servers"),
        ({**BS, "topic": "t", "deliveryGuarantee": "twice"}, "'deliveryGuarantee'"),
        ({**BS, "topic": "t", "kafka.transactional.id": "x"}, "'kafka.transactional.id'"),
        ({**BS, "topics": "t"}, "'topics': unknown sink option"),
        ({**BS, "topic": "t", "producerPath": "fast"}, "'producerPath': expected one of"),
        ({**BS, "topic": "t", "producerPath": "batch", "kafka.acks": "0"},
         "'producerPath': batch cannot honour kafka.acks=0"),
        ({**BS, "topic": "t", "producerPath": "batch", "kafka.Linger.ms": "50"},
         "'producerPath': batch cannot honour kafka.Linger.ms"),
        ({**BS, "topic": "t", "producerPath": "batch", "kafka.compression.type": "brotli"},
         "batch cannot honour kafka.compression.type=brotli"),
    ],
)
def test_bad_sink_option_is_named(options: dict[str, str], names: str) -> None:
    with pytest.raises(OdradekOptionError) as e:
        parse_sink_options(options)
    assert names in str(e.value)


def test_errors_reach_the_user_before_any_job(spark: Any, spark_broker: Any) -> None:
    bs = spark_broker.bootstrap
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()

    with pytest.raises(Exception, match="'kafka.bootstrap.servers': required"):
        spark.read.format("odradek").option("subscribe", "t").load()
    # A streaming query checks its mode's options when it starts, before its first batch.
    q = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bs)
         .option("subscribe", "t").option("endingOffsets", "latest").load()
         .writeStream.format("console").start())
    with pytest.raises(Exception, match="'endingOffsets': not supported in streaming"):
        q.awaitTermination(60)
    assert q.lastProgress is None
    with pytest.raises(Exception, match="starting offset can't be latest"):
        (spark.read.format("odradek").option("kafka.bootstrap.servers", bs)
         .option("subscribe", "t").option("startingOffsets", "latest").load().collect())
    with pytest.raises(Exception, match="required column 'value' is missing"):
        (spark.createDataFrame([("k",)], "key string").write.format("odradek")
         .option("kafka.bootstrap.servers", bs).option("topic", "t").mode("append").save())
    with pytest.raises(Exception, match="no topic: set option 'topic' or add a 'topic' column"):
        (spark.createDataFrame([("v",)], "value string").write.format("odradek")
         .option("kafka.bootstrap.servers", bs).mode("append").save())
    with pytest.raises(Exception, match="column 'partition' must be int"):
        (spark.createDataFrame([("v", "0")], "value string, partition string").write
         .format("odradek").option("kafka.bootstrap.servers", bs).option("topic", "t")
         .mode("append").save())
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


def test_producer_path_auto_takes_batch_unless_a_librdkafka_setting_needs_the_client() -> None:
    base = {**BS, "topic": "t"}
    assert parse_sink_options(base).producer_path == "batch"
    got = parse_sink_options({**base, "kafka.compression.type": "ZSTD", "kafka.acks": "1"})
    assert (got.producer_path, got.compression, got.acks) == ("batch", "zstd", "1")
    assert parse_sink_options({**base, "kafka.linger.ms": "50"}).producer_path == "client"
    assert parse_sink_options({**base, "kafka.acks": "0"}).producer_path == "client"
    assert parse_sink_options({**base, "producerPath": "client"}).producer_path == "client"
