"""Transactions across brokers: the coordinator writes markers to partitions
other brokers lead (WriteTxnMarkers), so a transaction over partitions spread
on three brokers commits and aborts as a whole."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.txn_helpers import call, read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120


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


def _until_ok(fn: Any, what: str, timeout_s: float = 30.0) -> Any:
    """Retry ``fn`` (which returns (error_code, value)) while the coordinator loads."""
    deadline = time.monotonic() + timeout_s
    while True:
        code, value = fn()
        if code == 0:
            return value
        assert code in (14, 15, 16), f"{what}: error {code}"  # loading / not yet available
        assert time.monotonic() < deadline, f"{what}: still error {code}"
        time.sleep(0.2)


def test_kip890_a_leader_verifies_a_txn_write_with_the_coordinator_on_another_broker(
        cluster: ClusterProcesses, topic_name: str) -> None:
    from odradek.protocol import api
    from odradek.protocol.records import Record, build_batch

    cluster.create_topic(topic_name, 3, 1)
    leaders = {p: v.leader for p, v in cluster.partitions(topic_name).items()}
    tid = "tx-verify"

    def find() -> tuple[int, int]:
        c = call(cluster.brokers[1].bootstrap, api.ApiKey.FIND_COORDINATOR, 4,
                 {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
        return c.error_code.value, c.node_id

    coordinator = _until_ok(find, "FindCoordinator")
    partition = next(p for p, leader in leaders.items() if leader != coordinator)
    at_leader = cluster.brokers[leaders[partition]].bootstrap
    at_coordinator = cluster.brokers[coordinator].bootstrap

    def init() -> tuple[int, tuple[int, int]]:
        r = call(at_coordinator, api.ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1})
        return r.error_code.value, (r.producer_id, r.producer_epoch)

    pid, epoch = _until_ok(init, "InitProducerId")

    def produce(seq: int, version: int = 9) -> tuple[int, int]:
        batch = build_batch([Record(offset=-1, timestamp=1_700_000_000_000, value=b"v%d" % seq)],
                            producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            is_transactional=True)
        r = call(at_leader, api.ApiKey.PRODUCE, version, {
            "transactional_id": tid, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": topic_name,
                            "partition_data": [{"index": partition, "records": batch}]}]})
        p = r.responses[0].partition_responses[0]
        return p.error_code.value, p.base_offset

    def add_partition() -> int:
        r = call(at_coordinator, api.ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic_name, "partitions": [partition]}]})
        return r.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code.value

    # Not added to the transaction: the leader asks the coordinator, which says no:
    # TRANSACTION_ABORTABLE to Produce v11+ (the client may abort and go on),
    # INVALID_TXN_STATE to the versions before
    assert produce(0)[0] == INVALID_TXN_STATE
    assert produce(0, version=11)[0] == TRANSACTION_ABORTABLE
    assert add_partition() == 0
    assert produce(0) == (0, 0)
    assert produce(1) == (0, 1)  # the transaction is open here: no second question
    end = call(at_coordinator, api.ApiKey.END_TXN, 3, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert end.error_code.value == 0
    got = read_values(cluster.bootstrap, topic_name, 3, "read_committed", expect=2, timeout_s=30)
    assert sorted(got) == [b"v0", b"v1"]
    # The marker closed it: the next write must be verified again, and is refused.
    assert produce(2)[0] == INVALID_TXN_STATE


def test_transactions_v2_a_leader_adds_its_partition_with_the_coordinator_on_another_broker(
        cluster: ClusterProcesses, topic_name: str) -> None:
    """KIP-890 part 2 across brokers: transaction.version 2 set through any broker
    reaches every broker; a Produce v12 to a leader that is not the coordinator
    adds the partition remotely (AddPartitionsToTxn v4, verify_only=false)."""
    from odradek.protocol import api
    from odradek.protocol.records import Record, build_batch

    cluster.create_topic(topic_name, 3, 1)
    leaders = {p: v.leader for p, v in cluster.partitions(topic_name).items()}
    tid = "tx-v2-remote"
    update = call(cluster.brokers[1].bootstrap, api.ApiKey.UPDATE_FEATURES, 1, {
        "timeout": 30000, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}]})
    assert [r.error_code.value for r in update.results] == [0]

    def find() -> tuple[int, int]:
        c = call(cluster.brokers[1].bootstrap, api.ApiKey.FIND_COORDINATOR, 4,
                 {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
        return c.error_code.value, c.node_id

    coordinator = _until_ok(find, "FindCoordinator")
    partition = next(p for p, leader in leaders.items() if leader != coordinator)
    at_leader = cluster.brokers[leaders[partition]].bootstrap
    at_coordinator = cluster.brokers[coordinator].bootstrap

    def finalized() -> tuple[int, None]:
        r = call(at_leader, api.ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})
        levels = {f.name: f.max_version_level for f in r.finalized_features}
        return (0 if levels.get("transaction.version") == 2 else 15), None

    _until_ok(finalized, "transaction.version 2 at the leader")

    def init() -> tuple[int, tuple[int, int]]:
        r = call(at_coordinator, api.ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": tid, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1})
        return r.error_code.value, (r.producer_id, r.producer_epoch)

    pid, epoch = _until_ok(init, "InitProducerId")

    def produce(producer_epoch: int, seq: int) -> int:
        batch = build_batch([Record(offset=-1, timestamp=1_700_000_000_000, value=b"v%d" % seq)],
                            producer_id=pid, producer_epoch=producer_epoch, base_sequence=seq,
                            is_transactional=True)
        r = call(at_leader, api.ApiKey.PRODUCE, 12, {
            "transactional_id": tid, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": topic_name,
                            "partition_data": [{"index": partition, "records": batch}]}]})
        return r.responses[0].partition_responses[0].error_code.value

    assert produce(epoch, 0) == 0  # no AddPartitionsToTxn: added by the leader
    assert produce(epoch, 1) == 0
    end = call(at_coordinator, api.ApiKey.END_TXN, 5, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": True})
    assert (end.error_code.value, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)
    got = read_values(cluster.bootstrap, topic_name, 3, "read_committed", expect=2, timeout_s=30)
    assert sorted(got) == [b"v0", b"v1"]
    assert produce(epoch, 2) == 47  # INVALID_PRODUCER_EPOCH: the marker carried epoch + 1
