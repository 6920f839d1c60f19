"""Produce and consume with the clients real Kafka users run: confluent-kafka
(librdkafka), kafka-python and aiokafka.

No consumer groups in this milestone: every consumer uses assign() with an
explicit starting offset and never commits.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec

from tests.integration.clients import (
    CLIENTS,
    TIMEOUT,
    Out,
    Rec,
    acks_conf,
    aio_consume,
    aio_produce,
    ck_admin,
    ck_consume,
    ck_consumer,
    ck_produce,
    ck_producer,
    ck_send,
    compression_conf,
    consume,
    create_topic,
    fetch_v12,
    kp_consume,
    kp_consumer,
    kp_produce,
    produce,
    run,
    wait_for_topic,
    watermarks,
)

pytestmark = pytest.mark.timeout(120)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Kafka's default broker message.max.bytes / topic max.message.bytes.
DEFAULT_MAX_MESSAGE_BYTES = 1048588


def now_ms() -> int:
    return int(time.time() * 1000)


def rich_records(base_ts: int, producer: str = "confluent") -> list[Out]:
    """Keys, null keys, empty keys/values, null values (tombstones), headers
    (repeated keys, empty and null values, non-ASCII) and explicit timestamps.

    Client limits (not broker ones): kafka-python refuses null header values
    on send, and both Python clients refuse a record whose key and value are
    both null.
    """
    headers: list[tuple[str, bytes | None]] = [
        ("a", b"1"),
        ("a", b"2"),
        ("empty", b""),
        ("null", None),
        ("uni-\u00e9", "\u00fc".encode()),
    ]
    if producer == "kafka-python":
        headers = [h for h in headers if h[1] is not None]
    recs = [
        Out(b"v0", key=b"k0", timestamp=base_ts),
        Out(b"v1", key=None, timestamp=base_ts + 1),
        Out(None, key=b"tomb", timestamp=base_ts + 2),
        Out(b"", key=b"", timestamp=base_ts + 3),
        Out(b"with-headers", key=b"h", headers=headers, timestamp=base_ts + 4),
        Out(
            b"\x00\xff" * 100,
            key=b"\x00bin",
            headers=[("bin", bytes(range(256)))],
            timestamp=base_ts - 1000,
        ),  # timestamps need not be monotonic
    ]
    if producer == "confluent":
        recs.append(Out(None, key=None, timestamp=base_ts + 6))
    return recs


def expected_recs(records: list[Out], partition: int = 0, first_offset: int = 0) -> list[Rec]:
    return [
        Rec(partition, first_offset + i, r.key, r.value, tuple(r.headers), r.timestamp)
        for i, r in enumerate(records)
    ]


# --------------------------------------------------------------------------
# acks
# --------------------------------------------------------------------------


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("client", CLIENTS)
def test_acks_round_trip(broker, topic_name, client, acks):
    create_topic(broker.bootstrap, topic_name, 1)
    records = [Out(f"value-{i}".encode(), key=f"key-{i}".encode()) for i in range(30)]
    conf = acks_conf(client, acks)
    if client != "confluent" and acks != "all":
        conf["enable_idempotence"] = False  # idempotence requires acks=all
    delivered = produce(client, broker.bootstrap, topic_name, records, **conf)
    assert len(delivered) == 30
    if acks != "0":
        # (With acks=0 nothing comes back; what a client reports is its own invention.)
        assert delivered == [(0, i) for i in range(30)]
    got = consume(client, broker.bootstrap, topic_name, 30)
    assert [(r.partition, r.offset, r.key, r.value) for r in got] == [
        (0, i, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(30)
    ]


# --------------------------------------------------------------------------
# compression
# --------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_compression_round_trip(broker, topic_name, client, codec):
    create_topic(broker.bootstrap, topic_name, 1)
    ts = now_ms()
    records = [
        Out(
            (f"record {i} " * 40).encode(),
            key=f"k{i % 7}".encode(),
            headers=[("i", str(i).encode())],
            timestamp=ts + i,
        )
        for i in range(200)
    ]
    delivered = produce(
        client, broker.bootstrap, topic_name, records, **compression_conf(client, codec)
    )
    assert [o for _p, o in delivered] == list(range(200))
    want = expected_recs(records)
    # Read back by the producing client and by librdkafka.
    assert consume(client, broker.bootstrap, topic_name, 200) == want
    if client != "confluent":
        assert ck_consume(broker.bootstrap, topic_name, 200) == want


def test_compression_mixed_codecs_in_one_partition(broker, topic_name):
    """Batches with different codecs interleave in one log and read back in order."""
    create_topic(broker.bootstrap, topic_name, 1)
    expected: list[bytes] = []
    for round_ in range(2):
        for codec in CODECS:
            vals = [f"{codec}-{round_}-{i}".encode() * 5 for i in range(10)]
            ck_produce(
                broker.bootstrap, topic_name, [Out(v) for v in vals], **{"compression.type": codec}
            )
            expected += vals
    n = len(expected)
    for client in CLIENTS:
        got = consume(client, broker.bootstrap, topic_name, n)
        assert [r.value for r in got] == expected, client
        assert [r.offset for r in got] == list(range(n)), client


# --------------------------------------------------------------------------
# record fields round-trip exactly
# --------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_record_fields_round_trip(broker, topic_name, client):
    create_topic(broker.bootstrap, topic_name, 1)
    records = rich_records(now_ms() - 60_000, client)
    produce(client, broker.bootstrap, topic_name, records)
    want = expected_recs(records)
    assert consume(client, broker.bootstrap, topic_name, len(records)) == want


@pytest.mark.parametrize("producer", CLIENTS)
@pytest.mark.parametrize("consumer", CLIENTS)
def test_cross_client(broker, topic_name, producer, consumer):
    """What one client writes, every other client reads back unchanged."""
    create_topic(broker.bootstrap, topic_name, 2)
    ts = now_ms() - 30_000
    records = rich_records(ts, producer)
    for r in records:
        r.partition = 1
    produce(producer, broker.bootstrap, topic_name, records, **compression_conf(producer, "lz4"))
    got = consume(consumer, broker.bootstrap, topic_name, len(records), partitions=(0, 1))
    assert got == expected_recs(records, partition=1)


def test_create_time_is_kept_and_default_timestamp_is_now(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    before = now_ms()
    d = ck_produce(
        broker.bootstrap, topic_name, [Out(b"a"), Out(b"b", timestamp=1_600_000_000_000)]
    )
    after = now_ms()
    got = ck_consume(broker.bootstrap, topic_name, 2)
    assert before - 1000 <= got[0].timestamp <= after + 1000
    assert got[0].timestamp == d[0].timestamp
    assert got[1].timestamp == 1_600_000_000_000


# --------------------------------------------------------------------------
# sizes
# --------------------------------------------------------------------------


def _big_producer_conf() -> dict:
    # Let the client send what the broker must judge.
    return {
        "message.max.bytes": 5_000_000,
        "batch.size": 5_000_000,
        "linger.ms": 0,
        "compression.type": "none",
    }


def test_record_near_default_max_message_bytes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    # One record per batch: 61 bytes of batch header + ~20 bytes of record framing.
    near = b"n" * (DEFAULT_MAX_MESSAGE_BYTES - 200)
    d = ck_produce(broker.bootstrap, topic_name, [Out(near, key=b"big")], **_big_producer_conf())
    assert d[0].offset == 0
    over = b"o" * (DEFAULT_MAX_MESSAGE_BYTES + 1000)
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(over)],
        raise_on_error=False,
        **_big_producer_conf(),
        retries=0,
    )
    assert d[0].error is not None and d[0].error.code() == KafkaError.MSG_SIZE_TOO_LARGE, d[0].error
    # The rejected batch took no offset; the log goes on after it.
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"after")])
    assert d[0].offset == 1
    got = ck_consume(
        broker.bootstrap,
        topic_name,
        2,
        **{"fetch.max.bytes": 3_000_000, "max.partition.fetch.bytes": 100_000},
    )
    assert got[0].value == near and got[0].key == b"big"
    assert (got[1].offset, got[1].value) == (1, b"after")
    # kafka-python reads the big record too (KIP-74: at least one batch is returned
    # even when it is larger than the fetch limits).
    got = kp_consume(broker.bootstrap, topic_name, 2, max_partition_fetch_bytes=100_000)
    assert [len(r.value) for r in got] == [len(near), 5]


def test_topic_max_message_bytes_override(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config={"max.message.bytes": "20000"})
    ok = b"x" * 15_000
    assert (
        ck_produce(broker.bootstrap, topic_name, [Out(ok)], **_big_producer_conf())[0].offset == 0
    )
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"y" * 30_000)],
        raise_on_error=False,
        **_big_producer_conf(),
        retries=0,
    )
    assert d[0].error is not None and d[0].error.code() == KafkaError.MSG_SIZE_TOO_LARGE, d[0].error
    # kafka-python sees the same broker error.
    from kafka.errors import MessageSizeTooLargeError

    with pytest.raises(MessageSizeTooLargeError):
        kp_produce(
            broker.bootstrap,
            topic_name,
            [Out(b"z" * 30_000)],
            retries=0,
            max_request_size=5_000_000,
            enable_idempotence=False,
            acks=1,
        )
    assert [r.value for r in ck_consume(broker.bootstrap, topic_name, 1)] == [ok]
    lo, hi = watermarks(broker.bootstrap, topic_name, 0)
    assert (lo, hi) == (0, 1)


# --------------------------------------------------------------------------
# partitions
# --------------------------------------------------------------------------


def test_many_partitions_spread_by_key(broker, topic_name):
    parts = 64
    create_topic(broker.bootstrap, topic_name, parts)
    keys = [f"key-{i}".encode() for i in range(200)]
    records = [Out(f"{k.decode()}#{j}".encode(), key=k) for j in range(3) for k in keys]
    d = ck_produce(broker.bootstrap, topic_name, records)
    # Same key -> same partition, every time.
    by_key: dict[bytes, set[int]] = {}
    for r, dl in zip(records, d):
        by_key.setdefault(r.key, set()).add(dl.partition)
    assert all(len(s) == 1 for s in by_key.values())
    used = {dl.partition for dl in d}
    assert len(used) >= 48, f"200 keys landed on only {len(used)} of 64 partitions"
    # Explicit partition choice is honoured, including the last one.
    extra = ck_produce(broker.bootstrap, topic_name, [Out(b"last", partition=parts - 1)])
    assert extra[0].partition == parts - 1
    total = len(records) + 1
    got = ck_consume(broker.bootstrap, topic_name, total, partitions=range(parts))
    assert len(got) == total
    per_part: dict[int, list[Rec]] = {}
    for r in got:
        per_part.setdefault(r.partition, []).append(r)
    for p, recs in per_part.items():
        assert [r.offset for r in recs] == list(range(len(recs))), p
    # Per key, order is preserved (#0, #1, #2) and the partition is the one produced to.
    for k in keys:
        seen = [r for r in got if r.key == k]
        assert [r.value for r in seen] == [f"{k.decode()}#{j}".encode() for j in range(3)]
        assert {r.partition for r in seen} == by_key[k]
    # kafka-python's murmur2 partitioner spreads keys too, and reads everything back.
    kp_produce(broker.bootstrap, topic_name, [Out(b"kp", key=k) for k in keys])
    got = kp_consume(broker.bootstrap, topic_name, total + len(keys), partitions=range(parts))
    assert len(got) == total + len(keys)
    assert len({r.partition for r in got if r.value == b"kp"}) >= 48


def test_produce_to_missing_partition_fails(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"x", partition=5)],
        raise_on_error=False,
        **{"message.timeout.ms": 3000},
    )
    assert d[0].error is not None
    assert d[0].error.code() == KafkaError._UNKNOWN_PARTITION


# --------------------------------------------------------------------------
# auto topic creation
# --------------------------------------------------------------------------


def test_auto_create_topic_on_produce(broker, topic_name):
    # No CreateTopics: librdkafka's metadata request asks the broker to create it.
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"auto", key=b"k")])
    assert (d[0].partition, d[0].offset) == (0, 0)
    md = ck_admin(broker.bootstrap).list_topics(topic_name, timeout=10)
    t = md.topics[topic_name]
    assert t.error is None
    assert len(t.partitions) == 1  # num.partitions default
    assert [r.value for r in ck_consume(broker.bootstrap, topic_name, 1)] == [b"auto"]


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_auto_create_topic_on_produce_python_clients(broker, topic_name, client):
    delivered = produce(client, broker.bootstrap, topic_name, [Out(b"v1"), Out(b"v2")])
    assert delivered == [(0, 0), (0, 1)]
    assert [r.value for r in consume(client, broker.bootstrap, topic_name, 2)] == [b"v1", b"v2"]


def test_auto_create_topic_on_metadata(broker, topic_name):
    """A Metadata request naming an unknown topic with allow_auto_topic_creation
    creates it (auto.create.topics.enable=true by default)."""
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=10000, max_block_ms=10000
    )
    try:
        parts = p.partitions_for(topic_name)  # blocks on metadata until the topic exists
        assert parts == {0}
    finally:
        p.close(timeout=5)
    wait_for_topic(broker.bootstrap, topic_name, 1)


# --------------------------------------------------------------------------
# idempotent producers
# --------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer(broker, topic_name, client):
    create_topic(broker.bootstrap, topic_name, 3)
    conf = {"enable.idempotence": True} if client == "confluent" else {"enable_idempotence": True}
    records = [Out(f"{i}".encode(), partition=i % 3) for i in range(150)]
    delivered = produce(client, broker.bootstrap, topic_name, records, **conf)
    for p in range(3):
        assert sorted(o for pp, o in delivered if pp == p) == list(range(50))
    got = consume(client, broker.bootstrap, topic_name, 150, partitions=(0, 1, 2))
    for p in range(3):
        assert [r.value for r in got if r.partition == p] == [
            f"{i}".encode() for i in range(p, 150, 3)
        ]


def test_kafka_python_is_idempotent_by_default(broker, topic_name):
    """kafka-python >= 2.1 enables idempotence by default (KIP-679), so its
    first connection runs InitProducerId; producing must work unchanged."""
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, topic_name, 1)
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap, request_timeout_ms=10000, max_block_ms=10000
    )
    try:
        assert p.config["enable_idempotence"] is True
        metas = [p.send(topic_name, f"v{i}".encode()) for i in range(20)]
        p.flush(TIMEOUT)
        assert [m.get(timeout=TIMEOUT).offset for m in metas] == list(range(20))
        pid = p._transaction_manager.producer_id_and_epoch
        assert pid.producer_id >= 0 and pid.epoch >= 0
    finally:
        p.close(timeout=5)


def test_idempotent_producers_get_distinct_ids_and_interleave(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p1 = ck_producer(broker.bootstrap, **{"enable.idempotence": True})
    p2 = ck_producer(broker.bootstrap, **{"enable.idempotence": True})
    for round_ in range(3):
        ck_send(p1, topic_name, [Out(f"a{round_}-{i}".encode()) for i in range(5)])
        ck_send(p2, topic_name, [Out(f"b{round_}-{i}".encode()) for i in range(5)])
    p1.flush(5)
    p2.flush(5)
    del p1, p2  # destroys the librdkafka handles now, not at some later GC
    got = ck_consume(broker.bootstrap, topic_name, 30)
    assert [r.offset for r in got] == list(range(30))
    assert sorted(r.value for r in got) == sorted(
        [f"{c}{r}-{i}".encode() for c in "ab" for r in range(3) for i in range(5)]
    )


# --------------------------------------------------------------------------
# long poll
# --------------------------------------------------------------------------


def test_consumer_long_poll_returns_promptly_on_produce(broker, topic_name):
    """A fetch parked with a long max wait is answered as soon as a record
    arrives, not when the wait runs out."""
    create_topic(broker.bootstrap, topic_name, 1)
    c = ck_consumer(
        broker.bootstrap,
        **{"fetch.wait.max.ms": 8000, "fetch.min.bytes": 1, "socket.timeout.ms": 20000},
    )
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        # Let the consumer settle into its long poll on the empty partition.
        assert c.poll(1.5) is None  # empty partition: nothing yet
        result: dict = {}

        def reader() -> None:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    result["at"] = time.monotonic()
                    result["value"] = m.value()
                    return

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.5)
        sent_at = time.monotonic()
        ck_produce(broker.bootstrap, topic_name, [Out(b"wake")], **{"linger.ms": 0})
        t.join(20)
        assert result.get("value") == b"wake"
        latency = result["at"] - sent_at
        assert latency < 4.0, f"record arrived {latency:.2f}s after produce (max wait 8s)"
    finally:
        c.close()


def test_aiokafka_long_poll(broker, topic_name):
    """aiokafka: getone() issued before the produce returns the record promptly."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    create_topic(broker.bootstrap, topic_name, 1)

    async def main() -> float:
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=8000,
            request_timeout_ms=20000,
        )
        await c.start()
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
        await p.start()
        try:
            c.assign([ATP(topic_name, 0)])
            await c.seek_to_beginning(ATP(topic_name, 0))
            getter = asyncio.ensure_future(c.getone())
            await asyncio.sleep(1.0)
            assert not getter.done()
            sent = time.monotonic()
            await p.send_and_wait(topic_name, b"wake")
            m = await asyncio.wait_for(getter, 15)
            assert m.value == b"wake" and m.offset == 0
            return time.monotonic() - sent
        finally:
            await p.stop()
            await c.stop()

    latency = run(main(), 40)
    assert latency < 4.0, f"record arrived {latency:.2f}s after produce (max wait 8s)"


# --------------------------------------------------------------------------
# offsets: by time, earliest / latest / max timestamp, watermarks
# --------------------------------------------------------------------------


def _timed_topic(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    """Topic with 5 records in one batch whose timestamps are not monotonic."""
    create_topic(bootstrap, topic, 1)
    base = now_ms() - 3_600_000
    ts = [base, base + 1000, base + 5000, base + 2000, base + 3000]
    ck_produce(
        bootstrap,
        topic,
        [Out(f"r{i}".encode(), timestamp=t) for i, t in enumerate(ts)],
        **{"linger.ms": 50},
    )
    return base, ts


def test_offsets_for_times_confluent(broker, topic_name):
    base, _ts = _timed_topic(broker.bootstrap, topic_name)
    c = ck_consumer(broker.bootstrap)
    try:

        def q(t: int) -> int:
            [tp] = c.offsets_for_times([TopicPartition(topic_name, 0, t)], timeout=10)
            assert tp.error is None
            return tp.offset

        assert q(base - 10_000) == 0
        assert q(base) == 0
        assert q(base + 1) == 1
        assert q(base + 1000) == 1
        assert q(base + 1500) == 2  # first record (by offset) with timestamp >= target
        assert q(base + 4000) == 2
        assert q(base + 5000) == 2
        assert q(base + 5001) == -1  # no such record: offset -1 (OFFSET_END)
    finally:
        c.close()


def test_offsets_for_times_kafka_python(broker, topic_name):
    from kafka import TopicPartition as KTP

    base, _ts = _timed_topic(broker.bootstrap, topic_name)
    c = kp_consumer(broker.bootstrap)
    try:
        tp = KTP(topic_name, 0)
        r = c.offsets_for_times({tp: base + 1500})
        assert (r[tp].offset, r[tp].timestamp) == (2, base + 5000)
        r = c.offsets_for_times({tp: base})
        assert (r[tp].offset, r[tp].timestamp) == (0, base)
        assert c.offsets_for_times({tp: base + 6000}) == {tp: None}
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 5}
    finally:
        c.close()


def test_offsets_for_times_aiokafka(broker, topic_name):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    base, _ts = _timed_topic(broker.bootstrap, topic_name)

    async def main() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=10000,
        )
        await c.start()
        try:
            tp = ATP(topic_name, 0)
            r = await c.offsets_for_times({tp: base + 2500})
            assert (r[tp].offset, r[tp].timestamp) == (2, base + 5000)
            r = await c.offsets_for_times({tp: base + 3000})
            assert (r[tp].offset, r[tp].timestamp) == (2, base + 5000)
            assert await c.offsets_for_times({tp: base + 99_000}) == {tp: None}
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 5}
        finally:
            await c.stop()

    run(main())


def test_admin_list_offsets(broker, topic_name):
    base, _ts = _timed_topic(broker.bootstrap, topic_name)
    a = ck_admin(broker.bootstrap)
    tp = TopicPartition(topic_name, 0)

    def lo(spec):
        return a.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15)

    assert lo(OffsetSpec.earliest()).offset == 0
    assert lo(OffsetSpec.latest()).offset == 5
    mx = lo(OffsetSpec.max_timestamp())
    assert (mx.offset, mx.timestamp) == (2, base + 5000)
    r = lo(OffsetSpec.for_timestamp(base + 2000))
    assert (r.offset, r.timestamp) == (2, base + 5000)
    r = lo(OffsetSpec.for_timestamp(base))
    assert (r.offset, r.timestamp) == (0, base)
    assert lo(OffsetSpec.for_timestamp(base + 10_000)).offset == -1
    # More records move latest; earliest stays.
    ck_produce(broker.bootstrap, topic_name, [Out(b"later", timestamp=base + 7000)])
    assert lo(OffsetSpec.latest()).offset == 6
    assert lo(OffsetSpec.earliest()).offset == 0
    mx = lo(OffsetSpec.max_timestamp())
    assert (mx.offset, mx.timestamp) == (5, base + 7000)


def test_admin_list_offsets_empty_partition(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    ck_produce(broker.bootstrap, topic_name, [Out(b"p0", partition=0)])
    a = ck_admin(broker.bootstrap)
    tp = TopicPartition(topic_name, 1)
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        assert a.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15).offset == 0
    # No record, so no max timestamp: Kafka answers offset -1, timestamp -1.
    mx = a.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=10)[tp].result(timeout=15)
    assert (mx.offset, mx.timestamp) == (-1, -1)


def test_get_watermark_offsets(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"x", partition=0) for _ in range(7)] + [Out(b"y", partition=1) for _ in range(3)],
    )
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 7)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 3)
    # A consumer that has fetched also knows them (cached from fetch responses).
    c = ck_consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        n = 0
        deadline = time.monotonic() + 15
        while n < 7 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                n += 1
        assert n == 7
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), cached=True) == (0, 7)
    finally:
        c.close()


def test_consume_from_the_middle(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(f"{i}".encode()) for i in range(20)],
        **{"batch.num.messages": 4},
    )
    got = ck_consume(broker.bootstrap, topic_name, 5, offset=13)
    assert [(r.offset, r.value) for r in got] == [(i, f"{i}".encode()) for i in range(13, 18)]
    # aiokafka and kafka-python, seeking into the middle of a batch.
    from kafka import TopicPartition as KTP

    kc = kp_consumer(broker.bootstrap)
    try:
        kc.assign([KTP(topic_name, 0)])
        kc.seek(KTP(topic_name, 0), 6)
        vals = []
        deadline = time.monotonic() + 15
        while len(vals) < 3 and time.monotonic() < deadline:
            for msgs in kc.poll(timeout_ms=500, max_records=3 - len(vals)).values():
                vals += [(m.offset, m.value) for m in msgs]
        assert vals == [(6, b"6"), (7, b"7"), (8, b"8")]
    finally:
        kc.close()
    got = aio_consume(broker.bootstrap, topic_name, 20)
    assert [r.offset for r in got] == list(range(20))


def test_aiokafka_produce_kafka_python_consume_many_batches(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    records = [Out(f"m{i}".encode(), key=f"{i % 3}".encode()) for i in range(1000)]
    aio_produce(broker.bootstrap, topic_name, records, max_batch_size=2048)
    got = kp_consume(broker.bootstrap, topic_name, 1000)
    assert [r.value for r in got] == [r.value for r in records]
    assert [r.offset for r in got] == list(range(1000))


# --------------------------------------------------------------------------
# Fetch purgatory, on the wire: fetch.min.bytes / fetch.max.wait.ms
# --------------------------------------------------------------------------


def test_fetch_min_bytes_not_reached_waits_for_max_wait(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(broker.bootstrap, topic_name, [Out(b"small")])
    elapsed, p = fetch_v12(broker.bootstrap, topic_name, 0, 0, max_wait_ms=1500, min_bytes=10**6)
    assert int(p.error_code) == 0
    assert 1.2 <= elapsed < 8, f"answered after {elapsed:.2f}s; max wait was 1.5s"
    # At max wait the broker answers with what it has.
    assert p.high_watermark == 1
    assert p.records and b"small" in bytes(p.records)


def test_fetch_min_bytes_reached_answers_at_once(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(broker.bootstrap, topic_name, [Out(b"ready")])
    elapsed, p = fetch_v12(broker.bootstrap, topic_name, 0, 0, max_wait_ms=6000, min_bytes=1)
    assert elapsed < 3, f"answered after {elapsed:.2f}s although min bytes were there"
    assert p.high_watermark == 1 and b"ready" in bytes(p.records)


def test_fetch_empty_partition_waits_then_answers_empty(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    elapsed, p = fetch_v12(broker.bootstrap, topic_name, 0, 0, max_wait_ms=1000, min_bytes=1)
    assert int(p.error_code) == 0
    assert 0.8 <= elapsed < 8, f"answered after {elapsed:.2f}s; max wait was 1s"
    assert p.high_watermark == 0
    assert not p.records


def test_fetch_parked_is_woken_by_produce(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    out: dict = {}

    def fetcher() -> None:
        out["r"] = fetch_v12(broker.bootstrap, topic_name, 0, 0, max_wait_ms=10000, min_bytes=1)

    t = threading.Thread(target=fetcher)
    t.start()
    time.sleep(0.7)
    sent = time.monotonic()
    ck_produce(broker.bootstrap, topic_name, [Out(b"wake-up")], **{"linger.ms": 0})
    t.join(25)
    assert "r" in out, "Fetch never returned"
    elapsed, p = out["r"]
    # The fetch was sent ~0.7s before the produce; max wait was 10s.
    assert elapsed < 0.7 + 4, f"parked fetch answered {elapsed - 0.7:.2f}s after the produce"
    assert time.monotonic() - sent < 8
    assert b"wake-up" in bytes(p.records)


def test_fetch_offset_out_of_range(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    ck_produce(broker.bootstrap, topic_name, [Out(b"one")])
    _elapsed, p = fetch_v12(broker.bootstrap, topic_name, 0, 100, max_wait_ms=100, min_bytes=1)
    assert int(p.error_code) == 1  # OFFSET_OUT_OF_RANGE
    assert not p.records


# --------------------------------------------------------------------------
# Topic settings the broker enforces on produce
# --------------------------------------------------------------------------


def test_log_append_time_topic(broker, topic_name):
    """message.timestamp.type=LogAppendTime: the broker stamps the batch and
    consumers see its time, whatever the producer put in."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    create_topic(
        broker.bootstrap, topic_name, 1, config={"message.timestamp.type": "LogAppendTime"}
    )
    before = now_ms()
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"a", timestamp=1_600_000_000_000), Out(b"b", timestamp=1_600_000_000_001)],
        **{"compression.type": "lz4"},
    )
    after = now_ms()
    c = ck_consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        msgs = []
        deadline = time.monotonic() + 15
        while len(msgs) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                msgs.append(m)
    finally:
        c.close()
    assert [m.value() for m in msgs] == [b"a", b"b"]
    for m in msgs:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000, ts
    # The produce response carries the append time too.
    assert all(before - 1000 <= x.timestamp <= after + 1000 for x in d)
    got = kp_consume(broker.bootstrap, topic_name, 2)
    assert all(before - 1000 <= r.timestamp <= after + 1000 for r in got)


def test_acks_all_needs_min_insync_replicas(broker, topic_name):
    """min.insync.replicas=2 with one replica: acks=all is refused with
    NOT_ENOUGH_REPLICAS (19); acks=1 is appended, but with eligible leader
    replicas on (a new cluster's default, as Kafka 4.1's) the high watermark
    stays put while the ISR is below min.insync.replicas (KIP-966): the record
    is read once the topic's min.insync.replicas is 1 and the next append
    moves the high watermark."""
    create_topic(broker.bootstrap, topic_name, 1, config={"min.insync.replicas": "2"})
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"all")],
        raise_on_error=False,
        acks="all",
        retries=0,
        **{"message.timeout.ms": 5000},
    )
    assert d[0].error is not None
    assert d[0].error.code() == KafkaError.NOT_ENOUGH_REPLICAS, d[0].error
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"one")], acks="1")
    assert d[0].offset == 0
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
    admin = ck_admin(broker.bootstrap)
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"two")], acks="1")
    assert d[0].offset == 1
    assert [r.value for r in ck_consume(broker.bootstrap, topic_name, 2)] == [b"one", b"two"]


@pytest.mark.parametrize(
    ("setting", "skew_ms"),
    [
        ("message.timestamp.after.max.ms", 3_600_000),
        ("message.timestamp.before.max.ms", -3_600_000),
    ],
)
def test_timestamp_out_of_bounds_is_invalid_timestamp(broker, topic_name, setting, skew_ms):
    create_topic(broker.bootstrap, topic_name, 1, config={setting: "60000"})
    d = ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"skewed", timestamp=now_ms() + skew_ms)],
        raise_on_error=False,
        retries=0,
    )
    assert d[0].error is not None
    assert d[0].error.code() == KafkaError.INVALID_TIMESTAMP, d[0].error  # 32
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"on-time")])
    assert d[0].offset == 0


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_offsets_for_times_inside_compressed_batch(broker, topic_name, codec):
    """The answer is the exact record, even inside one compressed batch."""
    create_topic(broker.bootstrap, topic_name, 1)
    base = now_ms() - 600_000
    ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(f"r{i}".encode(), timestamp=base + 10 * i) for i in range(50)],
        **{"compression.type": codec, "linger.ms": 100},
    )
    c = ck_consumer(broker.bootstrap)
    try:
        for target, want in [(base, 0), (base + 1, 1), (base + 255, 26), (base + 490, 49)]:
            [tp] = c.offsets_for_times([TopicPartition(topic_name, 0, target)], timeout=10)
            assert tp.offset == want, (target, tp.offset)
    finally:
        c.close()
