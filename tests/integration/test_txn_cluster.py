"""Transactions across brokers: the coordinator writes markers to partitions
other brokers lead (WriteTxnMarkers), so a transaction over partitions spread
on three brokers commits and aborts as a whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.txn_helpers import read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, brokers=3, overrides={
        "transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0}).start()
    try:
        yield c
    finally:
        c.close()


def test_txn_over_partitions_led_by_three_brokers_commits_and_aborts_as_a_whole(
        cluster: ClusterProcesses, topic_name: str) -> None:
    cluster.create_topic(topic_name, 3, 1)
    leaders = {p: v.leader for p, v in cluster.partitions(topic_name).items()}
    assert len(set(leaders.values())) == 3, leaders  # one leader per broker
    bs = cluster.bootstrap
    p = txn_producer(bs, "tx-cluster")
    p.begin_transaction()
    for i in range(9):
        p.produce(topic_name, value=b"c-%d" % i, partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, value=b"a-%d" % i, partition=i % 3)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"last", partition=2)
    p.commit_transaction(30)
    got = read_values(bs, topic_name, 3, "read_committed", expect=10, timeout_s=30)
    assert sorted(got) == sorted([b"c-%d" % i for i in range(9)] + [b"last"])
    assert len(read_values(bs, topic_name, 3, "read_uncommitted", expect=16)) == 16


def test_offsets_in_a_txn_commit_on_the_group_coordinators_broker(
        cluster: ClusterProcesses, topic_name: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from tests.integration.clients import ck_common

    cluster.create_topic(topic_name, 3, 1)
    bs = cluster.bootstrap
    committed_by_group = {}
    for n in range(3):  # groups hash to different __consumer_offsets partitions/brokers
        group = f"g{n}-{topic_name}"
        c = Consumer({**ck_common(bs), "group.id": group, "enable.auto.commit": False})
        p = txn_producer(bs, f"tx-offsets-{n}")
        p.begin_transaction()
        p.produce(topic_name, value=b"x", partition=n)
        p.send_offsets_to_transaction([TopicPartition(topic_name, n, 10 + n)],
                                      c.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        committed_by_group[group] = c.committed([TopicPartition(topic_name, n)],
                                                timeout=20)[0].offset
        c.close()
    assert committed_by_group == {f"g{n}-{topic_name}": 10 + n for n in range(3)}
