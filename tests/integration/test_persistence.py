"""What odradek keeps on disk: Kafka's layout, and everything acknowledged survives restarts.

Clean restarts (SIGTERM) and crashes (kill -9) must both bring back the
topics, their configs and every acknowledged record, read by a real client.
"""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Producer, TopicPartition

from odradek.protocol.records import iter_batch_headers
from tests.integration.clients import (
    Out,
    ck_admin,
    ck_consume,
    ck_consumer,
    ck_produce,
    create_topic,
    watermarks,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _dir(proc, topic: str, partition: int) -> Path:
    return Path(proc.data_dir) / f"{topic}-{partition}"


def test_on_disk_layout_is_kafkas(broker_factory, topic_name):
    proc = broker_factory(overrides={"log.segment.bytes": 2048})
    create_topic(proc.bootstrap, topic_name, 2)
    for round_ in range(8):  # 8 batches of ~1 KiB into 2 KiB segments
        outs = [Out(key=b"k%d" % i, value=b"v" * 200, partition=0) for i in range(5)]
        ck_produce(proc.bootstrap, topic_name, outs)
    d = _dir(proc, topic_name, 0)
    logs = sorted(p.name for p in d.glob("*.log"))
    assert len(logs) >= 3, logs  # rolled by size
    assert logs[0] == "00000000000000000000.log"
    assert all(len(name) == len("00000000000000000000.log") for name in logs)
    for name in logs:
        stem = name[:-4]
        assert (d / f"{stem}.index").exists() and (d / f"{stem}.timeindex").exists()
    # every .log holds record batches v2 whose offsets continue across segments
    expected = 0
    for name in logs:
        data = (d / name).read_bytes()
        assert int(name[:-4]) == expected
        for h in iter_batch_headers(data):
            assert h.magic == 2 and h.base_offset == expected
            expected = h.last_offset + 1
    assert expected == 40
    meta = (d / "partition.metadata").read_text()
    assert meta.startswith("version: 0\ntopic_id: ")
    props = (Path(proc.data_dir) / "meta.properties").read_text()
    assert "node.id=1" in props and "cluster.id=" in props
    # the index is 8-byte entries of (relative offset, position)
    idx = (d / "00000000000000000000.index").read_bytes()
    assert len(idx) % 8 == 0


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_topics_configs_and_records_survive_restart(broker_factory, topic_name, how):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 3, config={"retention.ms": "123456789"})
    outs = [Out(key=b"k%d" % i, value=b"v%d" % i, partition=i % 3) for i in range(300)]
    ck_produce(proc.bootstrap, topic_name, outs, acks="all")
    if how == "clean":
        proc.restart()
    else:
        proc.kill9()
        proc.start()
    got = ck_consume(proc.bootstrap, topic_name, 300, partitions=[0, 1, 2])
    assert sorted((r.key, r.value) for r in got) == sorted((o.key, o.value) for o in outs)
    for p in range(3):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(100)), p
    from confluent_kafka.admin import ConfigResource, ResourceType

    a = ck_admin(proc.bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = a.describe_configs([res])[res].result(timeout=15)
    assert configs["retention.ms"].value == "123456789"
    # and the broker keeps appending after the last offset
    ck_produce(proc.bootstrap, topic_name, [Out(key=b"after", value=b"x", partition=0)])
    again = ck_consume(proc.bootstrap, topic_name, 101, partitions=[0])
    assert again[-1].offset == 100 and again[-1].key == b"after"


def test_acked_records_survive_kill9_during_load(broker_factory, topic_name):
    """Every record the broker acknowledged (acks=all) is there after kill -9 mid-load."""
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 2)
    acked: list[bytes] = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        if err is None:
            with lock:
                acked.append(msg.value())

    p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 2,
                  "message.timeout.ms": 5000, "retries": 0})
    deadline = time.monotonic() + 3.0
    i = 0
    killed = False
    while time.monotonic() < deadline + 1.0:
        try:
            p.produce(topic_name, value=struct.pack(">I", i), on_delivery=on_delivery)
            i += 1
        except BufferError:
            pass
        p.poll(0)
        if not killed and time.monotonic() > deadline - 1.5 and len(acked) > 1000:
            proc.kill9()
            killed = True
    p.flush(10)
    assert killed and len(acked) > 1000
    proc.start()
    got = ck_consume(proc.bootstrap, topic_name, len(acked), partitions=[0, 1], timeout=30)
    values = {r.value for r in got}
    assert len(got) == len(values), "duplicates after restart"
    # `got` holds the first len(acked) records; every acked one must be among all records
    hw = sum(watermarks(proc.bootstrap, topic_name, p)[1] for p in (0, 1))
    assert hw >= len(acked)
    everything = {r.value for r in ck_consume(proc.bootstrap, topic_name, hw, partitions=[0, 1])}
    missing = [v for v in acked if v not in everything]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost"


def test_log_append_time_topic_stamps_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1,
                 config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ck_produce(broker.bootstrap, topic_name, [Out(key=b"k", value=b"v", partition=0,
                                                  timestamp=1_000)])
    after = int(time.time() * 1000)
    c = ck_consumer(broker.bootstrap)
    try:
        c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        msgs = [m for m in c.consume(1, timeout=15) if not m.error()]
    finally:
        c.close()
    [msg] = msgs
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME
    assert before - 5 <= ts <= after + 5
