"""Spark reads the remote tier directly (issue 14 item 7), against real parts:
an odradek broker, a SeaweedFS S3 server and a Spark session.

The test plays the tiered-storage copier's part (tiered/storage_manager.py)
on a plain broker: it copies the broker's closed local segments (.log, .index,
.timeindex, .txnindex and the producer snapshot taken at the roll) into S3 in
the remote layout of issue 14's contract, then the `.metadata` marker
(COPY_SEGMENT_FINISHED) last, so the local segments stay and the same offsets
can be read both ways. It then proves, row for row,
that `remoteRead=direct` returns what the same query returns through the
broker (`remoteRead=off`), for read_uncommitted and read_committed, with every
codec, headers, null keys, committed and aborted transactions, and ranges that
start inside a remote segment and end in the local tail.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.spark.remote_plan import kafka_uuid
from tests.integration.remote_tier_copy import copy_closed_segments
from tests.integration.s3_server import S3Server, s3_server  # noqa: F401 (fixture)

PARTITIONS = 2
SEGMENT_BYTES = 4 * 1024
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _produce_everything(bootstrap: str, topic: str) -> None:
    for codec in CODECS:
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                      "linger.ms": 5, "batch.num.messages": 40, "enable.idempotence": True})
        for i in range(240):
            key = None if i % 17 == 0 else f"{codec}-{i}".encode()
            headers: Any = [("codec", codec.encode()), ("n", None)] if i % 5 == 0 else None
            p.produce(topic, f"{codec} value {i} ".encode() * (1 + i % 4), key,
                      partition=i % PARTITIONS, headers=headers)
        assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}",
                    "linger.ms": 2, "compression.type": "lz4"})
    txn.init_transactions(30)
    for round_ in range(6):
        txn.begin_transaction()
        for i in range(150):
            txn.produce(topic, f"txn {round_} record {i}".encode() * 3, f"t{round_}-{i}".encode(),
                        partition=i % PARTITIONS)
            if i % 30 == 0:  # non-transactional records interleaved with the open transaction
                plain.produce(topic, f"plain {round_}-{i}".encode(), partition=i % PARTITIONS)
                plain.poll(0)
        txn.flush(30)
        if round_ % 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
    assert plain.flush(30) == 0
    tail = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(100):  # the local tail, beyond the last remote segment
        tail.produce(topic, f"tail {i}".encode(), partition=i % PARTITIONS)
    assert tail.flush(30) == 0


@pytest.fixture(scope="module")
def tiered_topic(spark_broker: Any, s3_server: S3Server) -> dict[str, Any]:  # noqa: F811
    bootstrap = spark_broker.bootstrap
    topic = f"remote-read-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={
        "segment.bytes": str(SEGMENT_BYTES)})])[topic].result(30)
    _produce_everything(bootstrap, topic)
    from confluent_kafka import TopicCollection

    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    bucket = s3_server.bucket()
    url = f"s3://{bucket}/tier"
    copied = copy_closed_segments(spark_broker.data_dir, topic, kafka_uuid(desc.topic_id),
                                  PARTITIONS, s3_server.filesystem(), f"{bucket}/tier",
                                  orphan=True)
    files = sorted(f.name + f":{f.stat().st_size}" for f in spark_broker.data_dir.glob(f"{topic}-*/*"))
    assert copied >= 8, f"only {copied} closed segments: {files}"
    return {"bootstrap": bootstrap, "topic": topic, "url": url, "s3": s3_server,
            "segments": copied}


def _options(t: dict[str, Any], mode: str, isolation: str, **extra: str) -> dict[str, str]:
    s3: S3Server = t["s3"]
    opts = {
        "kafka.bootstrap.servers": t["bootstrap"], "subscribe": t["topic"],
        "startingOffsets": "earliest", "endingOffsets": "latest", "includeHeaders": "true",
        "kafka.isolation.level": isolation, "remoteRead": mode,
        "remote.rsm.config.url": t["url"],
        "remote.rsm.config.fs.endpoint_url": s3.endpoint_url,
        "remote.rsm.config.fs.key": s3.key, "remote.rsm.config.fs.secret": s3.secret,
    }
    opts.update(extra)
    return opts


def _rows(spark: Any, opts: dict[str, str]) -> list[Any]:
    df = spark.read.format("odradek").options(**opts).load()
    return df.orderBy("partition", "offset").collect()


def _plan(opts: dict[str, str]) -> tuple[int, int]:
    from odradek.spark.options import parse_source_options
    from odradek.spark.reader import OdradekBatchReader
    from odradek.spark.remote_plan import RemoteSegmentPartition
    from odradek.spark.source import source_schema

    parts = OdradekBatchReader(parse_source_options(opts, streaming=False),
                               source_schema(True)).partitions()
    remote = sum(isinstance(p, RemoteSegmentPartition) for p in parts)
    return remote, len(parts) - remote


def test_spark_workers_import_this_checkout(spark: Any) -> None:
    here = str(Path(__file__).resolve().parents[2])
    files = spark.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("odradek").__file__).collect()
    assert files[0].startswith(here), (files, here, os.environ.get("PYTHONPATH"))


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_direct_equals_broker_row_for_row(spark: Any, tiered_topic: dict[str, Any],
                                          isolation: str) -> None:
    direct_opts = _options(tiered_topic, "direct", isolation)
    remote_tasks, broker_tasks = _plan(direct_opts)
    assert remote_tasks >= tiered_topic["segments"] // 2, (remote_tasks, broker_tasks)
    assert broker_tasks >= PARTITIONS  # the local tail of each partition
    direct = _rows(spark, direct_opts)
    through_broker = _rows(spark, _options(tiered_topic, "off", isolation))
    assert len(direct) == len(through_broker) > 1000
    assert direct == through_broker
    values = [r.value for r in direct]
    aborted = [v for v in values if v.startswith((b"txn 1 ", b"txn 3 "))]
    if isolation == "read_committed":
        assert not aborted
    else:
        assert len(aborted) == 300
    assert any(r.key is None for r in direct) and any(r.headers for r in direct)


def test_range_from_inside_a_segment_into_the_local_tail(spark: Any,
                                                         tiered_topic: dict[str, Any]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = tiered_topic["topic"]
    c = Consumer({"bootstrap.servers": tiered_topic["bootstrap"], "group.id": "ends"})
    _, end = c.get_watermark_offsets(TopicPartition(topic, 1), timeout=30)
    c.close()
    # partition 1 ends a few records before its end: inside the local tail (an end past
    # it fails as in Spark, tests/spark/test_source_edges.py)
    extra = {"startingOffsets": f'{{"{topic}":{{"0":37,"1":501}}}}',
             "endingOffsets": f'{{"{topic}":{{"0":-1,"1":{end - 5}}}}}'}
    opts = _options(tiered_topic, "direct", "read_committed", **extra)
    assert _plan(opts)[0] > 0
    direct = _rows(spark, opts)
    assert direct == _rows(spark, _options(tiered_topic, "off", "read_committed", **extra))
    assert {r.partition for r in direct} == {0, 1}
    assert min(r.offset for r in direct if r.partition == 0) >= 37


def test_fully_remote_range_plans_no_broker_task(tiered_topic: dict[str, Any]) -> None:
    topic = tiered_topic["topic"]
    extra = {"startingOffsets": f'{{"{topic}":{{"0":0,"1":0}}}}',
             "endingOffsets": f'{{"{topic}":{{"0":300,"1":300}}}}'}
    assert _plan(_options(tiered_topic, "direct", "read_uncommitted", **extra))[1] == 0
    assert _plan(_options(tiered_topic, "off", "read_uncommitted", **extra))[0] == 0


@pytest.fixture(scope="module")
def real_tier(tmp_path_factory: pytest.TempPathFactory,
              s3_server: S3Server) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A broker with tiered storage on (branch tier's RemoteLogManager) copying to S3
    and deleting copied segments locally: the oldest offsets exist only remotely."""
    from tests.integration.broker_proc import BrokerProcess
    from tests.integration.tiered_helpers import TIERED_BROKER, list_offsets, tiered_topic

    bucket = s3_server.bucket()
    url = f"s3://{bucket}/tier"
    base = tmp_path_factory.mktemp("tiered-broker")
    proc = BrokerProcess("odradek", data_dir=base / "data", log_path=base / "broker.log",
                         overrides={**TIERED_BROKER, "rsm.config.url": url,
                                    **{f"rsm.config.fs.{k}": v
                                       for k, v in s3_server.storage_options.items()}})
    proc.start()
    try:
        topic = f"real-tier-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=tiered_topic())])[
            topic].result(30)
        _produce_everything(proc.bootstrap, topic)
        deadline = time.monotonic() + 60
        while not all(list_offsets(proc.port, topic, -4, 8, p)[1] > 300 for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"segments not tiered:\n{proc.log_tail()}"
            time.sleep(0.5)
        yield {"bootstrap": proc.bootstrap, "topic": topic, "url": url, "s3": s3_server,
               "segments": 0}
    finally:
        proc.close()


def _expected(committed: bool) -> list[tuple[int, bytes | None, bytes]]:
    """(partition, key, value) of every record `_produce_everything` writes, sorted."""
    out = []
    for codec in CODECS:
        for i in range(240):
            key = None if i % 17 == 0 else f"{codec}-{i}".encode()
            out.append((i % PARTITIONS, key, f"{codec} value {i} ".encode() * (1 + i % 4)))
    for round_ in range(6):
        for i in range(150):
            if not (committed and round_ % 2):
                out.append((i % PARTITIONS, f"t{round_}-{i}".encode(),
                            f"txn {round_} record {i}".encode() * 3))
            if i % 30 == 0:
                out.append((i % PARTITIONS, None, f"plain {round_}-{i}".encode()))
    out += [(i % PARTITIONS, None, f"tail {i}".encode()) for i in range(100)]
    return sorted(out, key=repr)


def test_real_tiered_broker_auto_reads_remote_directly(spark: Any,
                                                        real_tier: dict[str, Any]) -> None:
    """`auto` (the default) with the remote tier configured: the offsets only the
    remote tier holds (copied by branch tier's RemoteLogManager, deleted locally)
    are read from S3 by the executors, the local tail through the broker; every
    record produced comes back exactly once, aborted ones only under
    read_uncommitted, and the rows equal, row for row, what the broker serves
    (from its own remote tier below the local log start)."""
    for isolation in ("read_uncommitted", "read_committed"):
        opts = _options(real_tier, "auto", isolation)
        remote_tasks, broker_tasks = _plan(opts)
        assert remote_tasks >= 4 and broker_tasks >= 1, (remote_tasks, broker_tasks)
        rows = _rows(spark, opts)
        got = sorted(((r.partition, r.key, r.value) for r in rows), key=repr)
        assert got == _expected(committed=isolation == "read_committed")
        assert rows == _rows(spark, _options(real_tier, "off", isolation,
                                             **{"kafkaConsumer.pollTimeoutMs": "30000"}))
        for p in range(PARTITIONS):
            offsets = [r.offset for r in rows if r.partition == p]
            assert offsets[0] == 0 and offsets == sorted(set(offsets))


def _delete_records(bootstrap: str, topic: str, offset: int) -> None:
    from confluent_kafka import TopicPartition

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, offset)],
                                  request_timeout=30).values():
        assert f.result(30).low_watermark == offset


def _read_in_process(reader: Any, parts: list[Any]) -> list[tuple[int, bytes]]:
    out = []
    for part in parts:
        for batch in reader.read(part):
            out += list(zip(batch.column("offset").to_pylist(),
                            batch.column("value").to_pylist(), strict=True))
    return sorted(out)


def test_delete_records_into_the_remote_tier_is_honoured(spark: Any,
                                                         real_tier: dict[str, Any]) -> None:
    """DeleteRecords below the local start (stored in the remote tier's
    `log-start-offset` object): the direct reader returns no row below it and
    applies failOnDataLoss as the broker path does, whether the DeleteRecords came
    before planning or between planning and the tasks."""
    from odradek.spark.broker_read import DataLossError
    from odradek.spark.options import parse_source_options
    from odradek.spark.reader import OdradekBatchReader
    from odradek.spark.remote_plan import RemoteSegmentPartition
    from odradek.spark.source import source_schema
    from tests.integration.tiered_helpers import list_offsets, tiered_topic

    bootstrap = real_tier["bootstrap"]
    port = int(bootstrap.rsplit(":", 1)[1])
    topic = f"deleted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=tiered_topic())])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 5})
    for i in range(600):
        p.produce(topic, b"v%04d-" % i * 8, partition=0)
    assert p.flush(30) == 0
    deadline = time.monotonic() + 60
    while list_offsets(port, topic, -4, 8)[1] <= 250:
        assert time.monotonic() < deadline, \
            f"segments not tiered: {list_offsets(port, topic, -4, 8)}"
        time.sleep(0.5)
    t = {**real_tier, "topic": topic}
    from_zero = {"startingOffsets": f'{{"{topic}":{{"0":0}}}}', "includeHeaders": "false"}

    # 1. DeleteRecords before planning: rows from 100 on, both ways; failOnDataLoss
    # (the default) fails both ways
    _delete_records(bootstrap, topic, 100)
    lenient = {**from_zero, "failOnDataLoss": "false"}
    direct = _rows(spark, _options(t, "direct", "read_uncommitted", **lenient))
    assert [r.offset for r in direct] == list(range(100, 600))
    assert direct == _rows(spark, _options(t, "off", "read_uncommitted", **lenient))
    for mode in ("direct", "off"):
        with pytest.raises(Exception, match="log start offset 100"):
            _rows(spark, _options(t, mode, "read_uncommitted", **from_zero))

    # 2. DeleteRecords between planning and the tasks: each remote task reads the stored
    # log start again; the same answer as the broker path's tasks
    def planned(mode: str, fail: str) -> tuple[Any, list[Any]]:
        opts = parse_source_options(_options(t, mode, "read_uncommitted",
                                             startingOffsets="earliest", failOnDataLoss=fail,
                                             includeHeaders="false"), streaming=False)
        reader = OdradekBatchReader(opts, source_schema(False))
        return reader, list(reader.partitions())

    plans = {(mode, fail): planned(mode, fail)
             for mode in ("direct", "off") for fail in ("true", "false")}
    assert any(isinstance(x, RemoteSegmentPartition) for x in plans[("direct", "true")][1])
    assert not any(isinstance(x, RemoteSegmentPartition) for x in plans[("off", "true")][1])
    _delete_records(bootstrap, topic, 150)
    assert list_offsets(port, topic, -4, 8)[1] > 150  # the deleted offsets were remote only
    for mode in ("direct", "off"):
        with pytest.raises(DataLossError, match="log start offset 150"):
            _read_in_process(*(plans[(mode, "true")]))
    direct_rows = _read_in_process(*(plans[("direct", "false")]))
    assert [o for o, _ in direct_rows] == list(range(150, 600))
    assert direct_rows == _read_in_process(*(plans[("off", "false")]))
