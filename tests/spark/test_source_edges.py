"""Where odradek's source and sink used to differ from Spark's Kafka integration
(issue 17): deleted ranges with failOnDataLoss=false, ending offsets past the end,
partitions in startingOffsets that are not read, kafka.acks on the sink, options
named as the user spelt them, and no librdkafka lines on the console."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.spark.options import OdradekOptionError, parse_sink_options, parse_source_options

from .helpers import create_topic, produce

BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


def _read(spark: Any, bs: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bs).option(
        "subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _offsets(topic: str, start: int) -> str:
    return json.dumps({topic: {"0": start}})


def test_a_deleted_range_reads_as_no_rows_with_failondataloss_false(
        spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [(0, None, b"v%d" % i, None) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": bs})
    [f] = admin.delete_records([TopicPartition(topic_name, 0, 50)]).values()
    f.result(30)
    opts = {"startingOffsets": _offsets(topic_name, 10), "endingOffsets": _offsets(topic_name, 40)}
    assert _read(spark, bs, topic_name, failOnDataLoss="false", **opts).count() == 0
    with pytest.raises(Exception, match="below the log start offset 50"):
        _read(spark, bs, topic_name, **opts).count()
    # a range that only starts in the deleted part keeps what is left
    rows = _read(spark, bs, topic_name, failOnDataLoss="false",
                 startingOffsets=_offsets(topic_name, 10),
                 endingOffsets=_offsets(topic_name, 60)).select("offset").collect()
    assert [r.offset for r in rows] == list(range(50, 60))


def test_ending_offsets_past_the_end_fail_unless_failondataloss_false(
        spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    produce(bs, topic_name, [(0, None, b"v%d" % i, None) for i in range(20)])
    ending = _offsets(topic_name, 30)
    with pytest.raises(Exception, match="ending offset 30 is past the end offset 20"):
        _read(spark, bs, topic_name, endingOffsets=ending).count()
    df = _read(spark, bs, topic_name, endingOffsets=ending, failOnDataLoss="false")
    assert [r.offset for r in df.select("offset").collect()] == list(range(20))


def test_starting_offsets_naming_a_partition_not_read_fail(
        spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    starting = json.dumps({topic_name: {"0": 0}, "no-such-topic": {"0": 0}})
    with pytest.raises(Exception, match="names partitions that are not read.*no-such-topic-0"):
        _read(spark, bs, topic_name, startingOffsets=starting).count()


def test_sink_acks_is_honoured_or_refused(spark: Any, spark_broker: Any, topic_name: str) -> None:
    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    (spark.createDataFrame([(f"v{i}",) for i in range(10)], "value string").write
     .format("odradek").option("kafka.bootstrap.servers", bs).option("topic", topic_name)
     .option("kafka.acks", "1").mode("append").save())
    assert _read(spark, bs, topic_name).count() == 10
    o = parse_sink_options({**BS, "topic": "t", "kafka.acks": "1"})
    with pytest.raises(OdradekOptionError, match="'kafka.acks': acks=1 .*at-least-once"):
        parse_sink_options({**BS, "topic": "t", "kafka.acks": "1",
                            "deliveryGuarantee": "exactly-once"})
    assert parse_sink_options({**BS, "topic": "t", "kafka.acks": "1",
                               "deliveryGuarantee": "at-least-once"}).acks == "1"
    from odradek.spark.writer import producer_conf

    assert producer_conf(o)["acks"] == "1" and producer_conf(o)["enable.idempotence"] is False
    default = producer_conf(parse_sink_options({**BS, "topic": "t"}))
    assert default["acks"] == "all" and default["enable.idempotence"] is True
    with pytest.raises(OdradekOptionError, match="'kafka.acks': expected one of"):
        parse_sink_options({**BS, "topic": "t", "kafka.acks": "2"})
    # a streaming write whose guarantee is auto would pick exactly-once: refused when
    # the stream writer is made (decide_exactly_once), before any broker is asked
    from odradek.spark.writer import decide_exactly_once

    with pytest.raises(OdradekOptionError, match="acks=1 .*deliveryGuarantee=at-least-once"):
        decide_exactly_once(parse_sink_options({**BS, "topic": "t", "kafka.acks": "1"}))
    assert decide_exactly_once(parse_sink_options(
        {**BS, "topic": "t", "kafka.acks": "1", "deliveryGuarantee": "at-least-once"})) is False


def test_sink_include_headers_is_refused_with_what_to_do() -> None:
    with pytest.raises(OdradekOptionError, match="'includeHeaders': not a sink option.*headers"):
        parse_sink_options({**BS, "topic": "t", "includeheaders": "true"})


def test_unknown_options_are_named_with_spark_spelling_and_a_hint() -> None:
    # Spark lowercases option names before a Python data source sees them
    with pytest.raises(OdradekOptionError) as e:
        parse_source_options({**BS, "subscribe": "t", "startingoffset": "earliest"},
                             streaming=False)
    message = str(e.value)
    assert "did you mean 'startingOffsets'?" in message
    assert "failOnDataLoss" in message and "failondataloss" not in message
