"""Partition reassignment (KIP-455) on a real cluster: a controller and three
brokers (tests/integration/cluster_proc.py), real clients.

A partition with records moves to other brokers while a producer keeps
writing with acks=all; a replication throttle slows the copy so the
reassignment is seen in progress and the rate on the new replica is measured;
the new replicas end up with every acknowledged record, in order, on disk;
the old replica's directory goes. Cancel reverts; bad requests get Kafka's
error codes. Reassignments are started with `odradek partitions reassign`
(the CLI) and with kafka-python's KafkaAdminClient.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from odradek.cli.connection import Connection
from odradek.protocol.api import ApiKey
from odradek.protocol.records import decode_batch_records, iter_batch_headers
from odradek.replication.quota import BURST_S
from tests.integration.clients import ck_consume, wait_until
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

RECORD_BYTES = 1000
PRELOAD_RECORDS = 2500  # ~2.5 MB to copy
THROTTLE_BYTES_PER_S = 300_000
MEASURE_S = 3.0
REASSIGN = ApiKey.ALTER_PARTITION_REASSIGNMENTS
BATCH_BYTES = 16384  # the producer's batch.size: the most one read overdraws the throttle


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path_factory.mktemp("reassign"), brokers=3).start()
    try:
        yield c
    finally:
        c.close()


def _kp_admin(cluster: ClusterProcesses) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)


def _create_on(cluster: ClusterProcesses, topic: str, replicas: list[int]) -> None:
    admin = cluster.admin()
    fs = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replica_assignment=[replicas])], operation_timeout=10
    )
    for f in fs.values():
        f.result(timeout=15)
    cluster.wait_for_partition(
        topic, 0, lambda v: v.isr == tuple(sorted(replicas)), "created and in sync"
    )


def _producer(cluster: ClusterProcesses) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
            "batch.size": BATCH_BYTES,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )


def _preload(cluster: ClusterProcesses, topic: str, count: int) -> list[bytes]:
    values = [b"pre-%06d-" % i + b"x" * (RECORD_BYTES - 11) for i in range(count)]
    p = _producer(cluster)
    for v in values:
        p.produce(topic, v, partition=0)
        p.poll(0)
    assert p.flush(60) == 0
    return values


class BackgroundProducer:
    """Produces numbered records with acks=all until stopped; keeps what was
    acknowledged, (offset, value), and every delivery error."""

    def __init__(self, cluster: ClusterProcesses, topic: str) -> None:
        self.producer = _producer(cluster)
        self.topic = topic
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, b"live-%06d" % i, partition=0, on_delivery=self._done)
            i += 1
            self.producer.poll(0.005)  # paces the producer: ~200 records/s
        assert self.producer.flush(60) == 0

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)


def _cli(cluster: ClusterProcesses, json_file: Path, *args: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "partitions",
            "reassign",
            "--bootstrap-server",
            cluster.bootstrap.split(",")[0],
            "--reassignment-json-file",
            str(json_file),
            *args,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _plan(tmp_path: Path, topic: str, replicas: list[int]) -> Path:
    path = tmp_path / f"{topic}.json"
    path.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}
        )
    )
    return path


def _partition_dir(cluster: ClusterProcesses, broker: int, topic: str) -> Path:
    return cluster.brokers[broker].data_dir / f"{topic}-0"


def _bytes_on(cluster: ClusterProcesses, broker: int, topic: str) -> int:
    d = _partition_dir(cluster, broker, topic)
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.is_dir() else 0


def _records_on_disk(cluster: ClusterProcesses, broker: int, topic: str) -> list[tuple[int, bytes]]:
    out = []
    for segment in sorted(_partition_dir(cluster, broker, topic).glob("*.log")):
        data = segment.read_bytes()
        for h in iter_batch_headers(data):
            out += [(r.offset, r.value) for r in decode_batch_records(data, h)]
    return out


def _ongoing(cluster: ClusterProcesses) -> dict[tuple[str, int], dict[str, list[int]]]:
    admin = _kp_admin(cluster)
    try:
        return {
            (tp.topic, tp.partition): v for tp, v in admin.list_partition_reassignments().items()
        }
    finally:
        admin.close()


def _broker_config(cluster: ClusterProcesses, broker: int, key: str) -> ConfigEntry:
    admin = cluster.admin()  # kept alive until the future is done
    [f] = admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))]).values()
    return f.result(timeout=15)[key]


def test_a_throttled_move_under_acks_all_keeps_every_record_and_drops_the_old_replica(
    cluster: ClusterProcesses,
    tmp_path: Path,
) -> None:
    topic = "moved"
    _create_on(cluster, topic, [1])
    preloaded = _preload(cluster, topic, PRELOAD_RECORDS)
    plan = _plan(tmp_path, topic, [2, 3])

    with BackgroundProducer(cluster, topic) as live:
        out = _cli(cluster, plan, "--execute", "--throttle", str(THROTTLE_BYTES_PER_S))
        assert '"replicas":[1]' in out and "Successfully started" in out
        rate = _broker_config(cluster, 2, "follower.replication.throttled.rate")
        assert (rate.value, rate.source) == (
            str(THROTTLE_BYTES_PER_S),
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )

        # In progress, and the copy to broker 2 goes at the throttled rate.
        wait_until(lambda: _bytes_on(cluster, 2, topic) > 0, 30, desc="broker 2 starts copying")
        start_s, start_bytes = time.monotonic(), _bytes_on(cluster, 2, topic)
        while time.monotonic() - start_s < MEASURE_S:
            ongoing = _ongoing(cluster)
            assert ongoing[(topic, 0)] == {
                "replicas": [2, 3, 1],
                "adding_replicas": [2, 3],
                "removing_replicas": [1],
            }
        elapsed_s = time.monotonic() - start_s
        copied = _bytes_on(cluster, 2, topic) - start_bytes
        assert copied > 0
        most = THROTTLE_BYTES_PER_S * (elapsed_s + BURST_S) + 2 * BATCH_BYTES
        assert copied <= most, f"{copied} B in {elapsed_s:.1f} s: over the throttle"
        assert (topic, 0) in _ongoing(cluster)

        # Lift the rate (the topic lists stay until --verify): the move completes.
        admin = cluster.admin()
        resources = [
            ConfigResource(
                ResourceType.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in (
                        "leader.replication.throttled.rate",
                        "follower.replication.throttled.rate",
                    )
                ],
            )
            for b in (1, 2, 3)
        ]
        for res in resources:  # librdkafka takes one BROKER resource a call
            [f] = admin.incremental_alter_configs([res]).values()
            f.result(timeout=15)
        # --verify --wait returns only once the move is done (checking every second)
        waited = _cli(cluster, plan, "--verify", "--wait", "--preserve-throttles")
        assert f"Reassignment of partition {topic}-0 is completed." in waited
        assert _ongoing(cluster) == {}
        view = cluster.wait_for_partition(
            topic, 0, lambda v: v.replicas == (2, 3), "moved to brokers 2 and 3", timeout_s=90
        )
        assert view.leader == 2  # the first target replica in the ISR
        assert _ongoing(cluster) == {}

    assert not live.errors, live.errors[:5]
    assert len(live.acked) > 50
    out = _cli(cluster, plan, "--verify")
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert "Clearing topic-level throttles" in out
    admin = cluster.admin()
    [f] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert f.result(timeout=15)["leader.replication.throttled.replicas"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )

    # Every acknowledged record, in order, on the leader and on both replicas' disks.
    cluster.wait_for_partition(topic, 0, lambda v: v.isr == (2, 3), "both in sync")
    total = PRELOAD_RECORDS + len(live.acked)
    consumed = ck_consume(cluster.bootstrap, topic, total, timeout=60)
    by_offset = {r.offset: r.value for r in consumed}
    assert [r.offset for r in consumed] == list(range(total))
    assert [by_offset[o] for o in range(PRELOAD_RECORDS)] == preloaded
    for offset, value in live.acked:
        assert by_offset[offset] == value
    for broker in (2, 3):
        wait_until(
            lambda b=broker: len(_records_on_disk(cluster, b, topic)) >= total,
            30,
            desc=f"broker {broker} holds every record",
        )
        assert _records_on_disk(cluster, broker, topic)[:total] == [
            (r.offset, r.value) for r in consumed
        ]
    wait_until(
        lambda: not _partition_dir(cluster, 1, topic).exists(),
        30,
        desc="broker 1 deleted its replica",
    )


def test_cancel_reverts_to_the_old_replica_and_the_added_one_is_deleted(
    cluster: ClusterProcesses,
    tmp_path: Path,
) -> None:
    topic = "cancelled"
    _create_on(cluster, topic, [1])
    _preload(cluster, topic, 1000)
    plan = _plan(tmp_path, topic, [2])
    _cli(cluster, plan, "--execute", "--throttle", "20000")  # far too slow to finish
    wait_until(lambda: _bytes_on(cluster, 2, topic) > 0, 30, desc="broker 2 starts copying")
    assert _ongoing(cluster)[(topic, 0)]["adding_replicas"] == [2]

    out = _cli(cluster, plan, "--cancel")
    assert f"Successfully cancelled partition reassignments for: {topic}-0" in out
    view = cluster.wait_for_partition(topic, 0, lambda v: v.replicas == (1,), "reverted")
    assert (view.leader, view.isr) == (1, (1,))
    assert _ongoing(cluster) == {}
    wait_until(
        lambda: not _partition_dir(cluster, 2, topic).exists(),
        30,
        desc="broker 2 deleted the replica it was adding",
    )
    rate = _broker_config(cluster, 1, "leader.replication.throttled.rate")
    assert rate.source == ConfigSource.DEFAULT_CONFIG.value  # cancel clears the throttle


def test_bad_reassignments_get_kafkas_error_codes(cluster: ClusterProcesses) -> None:
    from kafka import TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    topic = "refused"
    _create_on(cluster, topic, [1, 2])
    admin = _kp_admin(cluster)
    try:
        cases = [
            ({TopicPartition("no-such-topic", 0): [1]}, UnknownTopicOrPartitionError),
            ({TopicPartition(topic, 5): [1]}, UnknownTopicOrPartitionError),
            ({TopicPartition(topic, 0): [2, 2]}, InvalidReplicationAssignmentError),
            ({TopicPartition(topic, 0): [1, 42]}, InvalidReplicationAssignmentError),
            ({TopicPartition(topic, 0): None}, NoReassignmentInProgressError),
        ]
        for request, error in cases:
            assert admin.alter_partition_reassignments(request) == {tp: error for tp in request}, (
                request
            )
        # kafka-python refuses an empty list itself: send it on the wire
        conn = Connection(cluster.bootstrap.split(",")[0], 15, {REASSIGN: 0}, b"test")
        try:
            resp = conn.call(
                REASSIGN,
                {
                    "timeout": 15000,
                    "topics": [
                        {"name": topic, "partitions": [{"partition_index": 0, "replicas": []}]}
                    ],
                },
            )
        finally:
            conn.close()
        [part] = resp.responses[0].partitions
        assert part.error_code.value == InvalidReplicationAssignmentError.errno
        assert "empty replica list" in part.error_message
        # a reorder of in-sync replicas is accepted and done at once
        tp = TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
        cluster.wait_for_partition(topic, 0, lambda v: v.replicas == (2, 1), "reordered")
    finally:
        admin.close()
