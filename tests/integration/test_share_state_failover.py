"""Share-partition state survives the loss of brokers (KIP-932's share coordinator):
the state is in `__share_group_state`, replicated, not on the partition leader.

Three brokers. The topic's partition is led by broker 1, the state's partition
of `__share_group_state` (created here with one partition, so every key maps
to it) by broker 2: broker 1 writes its state to broker 2 with
WriteShareGroupState. A librdkafka ShareConsumer reads everything, accepts some
records and releases the rest; broker 1 is killed with kill -9; the new leader
reads the state from the coordinator: no accepted record comes again, the
released ones come with delivery count 2. Then broker 1 is back and the
coordinator's broker 2 is killed: a new coordinator loads the state from its
replica of `__share_group_state` and the group goes on from there.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_share_groups import _group_configs, _poll, _produce

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

TOPIC = "share-failover"
STATE = "__share_group_state"


def _create(cluster: ClusterProcesses, name: str, assignment: list[int],
            config: dict[str, str]) -> None:
    admin = cluster.admin()
    fs = admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[assignment],
                                       config=config)],
                             operation_timeout=10)
    for f in fs.values():
        f.result(timeout=15)
    cluster.wait_for_partition(name, 0, lambda v: v.leader == assignment[0] and len(v.isr) == 3,
                               "led by its first replica, all in sync")


def _consumer(bootstrap: str, group: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    return c


def _read_and_ack(bootstrap: str, group: str, want: int,
                  accept: Any) -> list[tuple[int, int]]:
    """Poll `want` records, accept those `accept(offset)` says, release the others;
    the (offset, delivery count) read."""
    c = _consumer(bootstrap, group)
    try:
        got = _poll(c, want, timeout_s=40)
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT if accept(m.offset())
                          else AcknowledgeType.RELEASE)
        assert all(err is None for err in c.commit_sync(30).values())
    finally:
        c.close()  # before a kill: a live member would hold records unacknowledged
    return sorted((m.offset(), m.delivery_count()) for m in got)


def _check_pruned(bootstrap: str) -> None:
    """The coordinator deleted the records below the key's last snapshot: the log
    of the state partition starts above 0, at a ShareSnapshot (record type 0),
    and what follows is snapshots and ShareUpdates (1)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"x-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:
            low, high = c.get_watermark_offsets(TopicPartition(STATE, 0), timeout=10)
            if low > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert 0 < low < high, (low, high)
        c.assign([TopicPartition(STATE, 0, low)])
        types: list[int] = []
        while len(types) < high - low and time.monotonic() < deadline + 30:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                types.append(int.from_bytes(m.key()[:2], "big"))
        assert types[0] == 0 and set(types) <= {0, 1}, types
    finally:
        c.close()


def test_share_state_survives_the_partition_leader_and_the_coordinator(tmp_path: Path) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=3, overrides={
        "share.coordinator.state.topic.num.partitions": 1,
        # a snapshot every 3 updates, pruned twice a second: the loads below
        # replay snapshots and updates from a log whose start has moved
        "share.coordinator.snapshot.update.records.per.snapshot": 3,
        "share.coordinator.state.topic.prune.interval.ms": 500,
        "group.share.heartbeat.interval.ms": 500}).start()
    try:
        # as the coordinator creates it (cleanup.policy=delete): the state is
        # written as snapshots and ShareUpdate deltas, replayed on failover
        _create(cluster, STATE, [2, 3, 1], {"cleanup.policy": "delete", "retention.ms": "-1",
                                            "min.insync.replicas": "2"})
        _create(cluster, TOPIC, [1, 2, 3], {"min.insync.replicas": "2"})
        bootstrap = cluster.bootstrap
        group = f"sg-{uuid.uuid4().hex[:8]}"
        _group_configs(bootstrap, group, **{"share.auto.offset.reset": "earliest"})
        _produce(bootstrap, TOPIC, 100)

        first = _read_and_ack(bootstrap, group, 100, lambda o: o < 30)
        assert first == [(o, 1) for o in range(100)]

        # the share-partition leader dies; the new one reads the state from broker 2
        cluster.brokers[1].kill9()
        cluster.wait_for_partition(TOPIC, 0, lambda v: v.leader in (2, 3), "a new leader")
        t0 = time.monotonic()
        second = _read_and_ack(cluster.live_bootstrap(), group, 70, lambda o: o < 60)
        took_s = time.monotonic() - t0
        # at least once, exactly as Kafka: accepted records never again; the
        # released ones once more, their delivery counts kept
        assert second == [(o, 2) for o in range(30, 100)], second
        assert took_s < 40, took_s

        # broker 1 back, then the coordinator's broker dies: a new coordinator
        # loads __share_group_state from its replica
        cluster.brokers[1].start()
        for name in (TOPIC, STATE):
            cluster.wait_for_partition(name, 0, lambda v: len(v.isr) == 3, "all in sync")
        cluster.brokers[2].kill9()
        cluster.wait_for_partition(STATE, 0, lambda v: v.leader in (1, 3), "a new coordinator")
        cluster.wait_for_partition(TOPIC, 0, lambda v: v.leader in (1, 3), "a leader")
        third = _read_and_ack(cluster.live_bootstrap(), group, 40, lambda o: True)
        assert third == [(o, 3) for o in range(60, 100)], third
        _check_pruned(cluster.live_bootstrap())
    finally:
        cluster.close()
