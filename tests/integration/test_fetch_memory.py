"""`odradek.fetch.memory.max.bytes`: consumers asking for big Fetch answers
(64 MiB) against a broker with a small fetch memory budget, some of them never
reading their answers (each such answer sits in the broker's write buffer). The
broker's RSS stays bounded, every reading consumer still reads everything,
nothing crashes, and the budget is given back when the stuck clients go
(odradek/broker/fetch_memory.py)."""

from __future__ import annotations

import datetime
import io
import os
import threading

import pytest
from confluent_kafka import Consumer, Producer

from tests.integration.clients import Wire, ck_common, create_topic, wait_until
from tests.integration.test_connection_limits import RssSampler, _metric, _start

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

MiB = 1024 * 1024
PARTITIONS = 8
RECORDS = 16_000
VALUE = b"v" * 1000  # 16 MB in all
CONSUMERS = 4
STUCK = int(os.environ.get("ODRADEK_FETCH_MEMORY_STUCK", "10"))


def _fill(bootstrap: str, topic: str) -> None:
    producer = Producer({**ck_common(bootstrap), "linger.ms": 20, "batch.size": 256 * 1024,
                         "compression.type": "none", "acks": "1"})
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def _read_all(bootstrap: str, topic: str, counts: list[int], slot: int,
              errors: list[BaseException]) -> None:
    try:
        consumer = Consumer({**ck_common(bootstrap), "group.id": f"big-{slot}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.max.bytes": 64 * MiB,
                             "max.partition.fetch.bytes": 16 * MiB,
                             "receive.message.max.bytes": 80 * MiB})
        consumer.subscribe([topic])
        try:
            while counts[slot] < RECORDS:
                for m in consumer.consume(1000, 1.0):
                    if m.error() is None:
                        counts[slot] += 1
        finally:
            consumer.close()
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


def _big_fetch(topic: str) -> bytes:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.serial import entity_writer
    from kio.static.primitive import i32, i32Timedelta, i64

    req = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1), max_bytes=i32(64 * MiB),
        topics=(FetchTopic(topic=topic, partitions=tuple(
            FetchPartition(partition=i32(p), fetch_offset=i64(0),
                           partition_max_bytes=i32(16 * MiB))
            for p in range(PARTITIONS))),),
        forgotten_topics_data=())
    buf = io.BytesIO()
    entity_writer(FetchRequest)(buf, req)
    return buf.getvalue()


def _run(proc, topic: str) -> tuple[int, list[int]]:
    """STUCK clients send a 64 MiB Fetch each and never read; CONSUMERS
    consumers read the topic meanwhile. Returns the peak RSS growth and the
    records each consumer read."""
    rss = RssSampler(proc.pid)
    stuck = []
    body = _big_fetch(topic)
    for i in range(STUCK):
        w = Wire(proc.bootstrap, timeout=30)
        w.send_request(1, 12, i, body)
        stuck.append(w)
    counts = [0] * CONSUMERS
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_read_all, args=(proc.bootstrap, topic, counts, i, errors),
                                daemon=True) for i in range(CONSUMERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    growth = rss.stop()
    assert not errors, errors[:3]
    assert proc.is_running()
    # The stuck answers hold what the kernel's socket buffers did not take:
    # never more than the budget and a batch.
    held = _metric(proc, "odradek_fetch_memory_bytes")
    budget = _metric(proc, "odradek_fetch_memory_max_bytes")
    if budget > 0:
        assert 0 < held <= budget + 512 * 1024
    for w in stuck:
        w.close()
    return growth, counts


def test_small_fetch_memory_budget_bounds_rss_and_every_consumer_progresses(
        broker_factory, topic_name, record_property):
    budget = int(os.environ.get("ODRADEK_FETCH_MEMORY_BUDGET", str(8 * MiB)))
    proc = _start(broker_factory, **{"odradek.fetch.memory.max.bytes": budget})
    create_topic(proc.bootstrap, topic_name, PARTITIONS)
    _fill(proc.bootstrap, topic_name)
    growth, counts = _run(proc, topic_name)
    assert counts == [RECORDS] * CONSUMERS
    record_property("rss_growth_mib", growth / MiB)
    waits = _metric(proc, "odradek_fetch_memory_waits")
    print(f"{STUCK} stuck clients + {CONSUMERS} consumers, {RECORDS * len(VALUE) / MiB:.0f} "
          f"MiB topic, fetch.max.bytes 64 MiB, budget {budget / MiB:.0f} MiB: peak RSS "
          f"growth {growth / MiB:.1f} MiB, {waits:.0f} fetches waited")
    # Every answer written or dropped with its connection: the budget given back.
    wait_until(lambda: _metric(proc, "odradek_fetch_memory_bytes") == 0, 10,
               desc="the fetch memory budget given back")
    if budget > 0:
        # The budget (the first stuck client's answer: what the kernel's socket
        # buffers do not take stays in the write buffer, holding the budget), a
        # 256 KiB batch per later fetch, the encoded copies; without a budget
        # each stuck client holds its whole 15 MiB answer (about 200 MiB here).
        assert growth < 64 * MiB
