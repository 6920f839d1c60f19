"""One client's acks=all produce requests overlap their waits (broker/network.py).

Kafka mutes a connection from a request until its answer is sent, so a client
that sends one record per request (librdkafka with linger.ms=0) gets one
acks=all request through per round of the followers: about 800 records/s at a
round of 1.2 ms, whatever the client offers. odradek handles the next requests
of the connection while an acks=all answer waits for the ISR, and still
answers in order.

The test stops the follower (SIGSTOP: it stays in the ISR, so every acks=all
request waits), sends records one request each from one producer, and checks
that the leader has appended all of them while none is acknowledged; then
the follower resumes and every record is acknowledged, in order, at the
offsets it was appended at. Done for a plain producer (up to 1,000,000
requests in flight) and an idempotent one (5).
"""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker_proc import free_port
from tests.integration.clients import ck_common, wait_until
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _log_end_offset(port: int, topic: str) -> float:
    want = f'odradek_partition_log_end_offset{{partition="0",topic="{topic}"}} '
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(want):
                return float(line.rpartition(" ")[2])
    return -1.0


@pytest.mark.parametrize("idempotent,records", [(False, 40), (True, 5)])
def test_acks_all_requests_of_one_connection_overlap_their_waits(
        tmp_path: Path, idempotent: bool, records: int) -> None:
    ports = {1: free_port(), 2: free_port()}
    cluster = ClusterProcesses(tmp_path, brokers=2, overrides={
        # the stopped follower stays registered and in the ISR: requests wait
        "broker.session.timeout.ms": 120_000, "replica.lag.time.max.ms": 120_000,
    }, broker_overrides={n: {"odradek.metrics.port": p} for n, p in ports.items()})
    cluster.start()
    try:
        topic = "pipelined"
        cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "2"})
        view = cluster.partitions(topic)[0]
        leader = cluster.brokers[view.leader]
        follower = cluster.brokers[next(n for n in view.replicas if n != view.leader)]
        assert follower.pid is not None
        acked: list[tuple[int, bytes]] = []
        errors: list[str] = []

        def on_delivery(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.offset(), msg.value()))

        producer = Producer({**ck_common(leader.bootstrap), "acks": "all", "linger.ms": 0,
                             "enable.idempotence": idempotent,
                             "request.timeout.ms": 60_000, "message.timeout.ms": 90_000})
        producer.produce(topic, b"warm", partition=0)  # connection and metadata
        assert producer.flush(30) == 0
        os.kill(follower.pid, signal.SIGSTOP)
        try:
            for i in range(records):  # one request each: sent before the next is produced
                producer.produce(topic, b"r%d" % i, partition=0, on_delivery=on_delivery)
                producer.poll(0.02)
            # every request appended, though none is answered: the connection did
            # not wait for the first answer before handling the next request
            wait_until(lambda: _log_end_offset(ports[view.leader], topic) == 1 + records,
                       30, desc=f"{records} waiting requests appended")
            producer.poll(0.2)
            assert acked == [] and errors == []
        finally:
            os.kill(follower.pid, signal.SIGCONT)
        assert producer.flush(60) == 0
        assert errors == []
        # answered in order, each at the offset it was appended at
        assert acked == [(1 + i, b"r%d" % i) for i in range(records)]
        consumer = Consumer({**ck_common(leader.bootstrap), "group.id": "pipelined",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, 1)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < records and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            assert got == [b"r%d" % i for i in range(records)]
        finally:
            consumer.close()
    finally:
        cluster.close()
