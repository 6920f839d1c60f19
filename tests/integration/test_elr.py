"""Eligible leader replicas (KIP-966) on a real cluster.

Brokers 1-3 hold a topic with RF=3 and min.insync.replicas=2; broker 4 holds
none of it and answers the DescribeTopicPartitions requests (odradek's own
client, API 75) while the others are down. With the feature on, acks=all
records are acknowledged (a new cluster starts with the feature at 1, as
Kafka 4.1's); broker 3 is killed with kill -9 (ISR [1, 2]);
broker 2 shuts down cleanly (the ISR falls to [1], below min ISR: 2 joins the
ELR); broker 1, the leader, is killed with kill -9 (ISR empty, ELR [1, 2],
last known ELR [1]; `odradek topics describe` prints them as kafka-topics.sh
does). Broker 2 comes back and leads without an unclean
election (ISR [2], ELR [1]) and serves every acknowledged record.

A broker killed with kill -9 and back would leave every ELR (an unclean
shutdown, as Kafka rules): that is why the ELR member brought back is the one
that stopped cleanly (tests/unit/test_elr.py has the unclean case).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

from odradek.protocol import api
from odradek.protocol.client import KafkaChannel
from tests.integration.broker_proc import HOST
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

TOPIC = "elr"
RECORDS = 200
DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # DescribeConfigs config_source


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path_factory.mktemp("elr"), brokers=4,
                         overrides={"min.insync.replicas": 2}).start()
    try:
        yield c
    finally:
        c.close()


def _call(port: int, key: int, version: int, data: dict[str, Any]) -> Any:
    async def go() -> Any:
        ch = KafkaChannel(HOST, port)
        try:
            return await ch.request(key, version, data)
        finally:
            ch.close()
    return asyncio.run(go())


def _partition(port: int) -> Any:
    response = _call(port, api.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": TOPIC}], "response_partition_limit": 100, "cursor": None})
    [topic] = response.topics
    [part] = topic.partitions
    return part


def _wait_partition(port: int, pred: Any, desc: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = _partition(port)
        if pred(last):
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {desc}; last: {last}")


def _state(part: Any) -> tuple[int, list[int], list[int], list[int]]:
    return (int(part.leader_id), sorted(int(r) for r in part.isr_nodes),
            sorted(int(r) for r in part.eligible_leader_replicas),
            sorted(int(r) for r in part.last_known_elr))


def test_an_eligible_leader_replica_back_after_the_isr_is_lost_leads_with_every_acked_record(
        cluster: ClusterProcesses) -> None:
    watcher = cluster.brokers[4].port
    versions = _call(watcher, api.ApiKey.API_VERSIONS, 3, {
        "client_software_name": "test", "client_software_version": "1"})
    finalized = {str(f.name): int(f.max_version_level) for f in versions.finalized_features}
    assert finalized.get("eligible.leader.replicas.version") == 1, finalized

    admin = cluster.admin()
    new = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])
    for f in admin.create_topics([new], operation_timeout=10).values():
        f.result(timeout=15)
    cluster.wait_for_partition(TOPIC, 0, lambda v: v.leader == 1 and len(v.isr) == 3,
                               "leader 1, 3 in sync")
    # the cluster-level min.insync.replicas the new cluster's controller wrote (KIP-966)
    [configs] = admin.describe_configs([ConfigResource("topic", TOPIC)]).values()
    entry = configs.result(timeout=10)["min.insync.replicas"]
    assert entry.value == "2" and int(entry.source) == DYNAMIC_DEFAULT_BROKER_CONFIG

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: list[tuple[int, bytes]] = []

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.offset(), msg.value()))

    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=done)
    assert producer.flush(30) == 0
    assert len(acked) == RECORDS

    cluster.brokers[3].kill9()
    _wait_partition(watcher, lambda p: _state(p)[:3] == (1, [1, 2], []),
                    "3 out of the ISR, no ELR (the ISR is still at min ISR)")
    cluster.brokers[2].stop()  # a clean shutdown
    part = _wait_partition(watcher, lambda p: _state(p)[:3] == (1, [1], [2]),
                           "ISR [1] below min ISR: 2 in the ELR")
    cluster.brokers[1].kill9()
    part = _wait_partition(watcher, lambda p: int(p.leader_id) == -1,
                           "no leader once the last ISR member is gone")
    assert _state(part) == (-1, [], [1, 2], [1])
    described = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "describe", TOPIC, "--bootstrap-server",
         f"{HOST}:{watcher}", "--timeout", "10"], capture_output=True, text=True, timeout=60, check=False)
    assert described.returncode == 0, described.stderr
    [line] = [x for x in described.stdout.splitlines() if "Partition: 0" in x]
    fields = dict(f.split(": ", 1) for f in line.strip("\t").split("\t") if ": " in f)
    assert fields["Leader"] == "none" or fields["Leader"] == "-1", line
    assert fields["Isr"] == "" and sorted(fields["Elr"].split(",")) == ["1", "2"], line
    assert fields["LastKnownElr"] == "1", line

    cluster.brokers[2].start()
    part = _wait_partition(watcher, lambda p: int(p.leader_id) == 2,
                           "2 leads, elected from the ELR")
    assert _state(part) == (2, [2], [1], [])

    consumer = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": "elr",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(read) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append((msg.offset(), msg.value()))
        assert read == sorted(acked)
    finally:
        consumer.close()
