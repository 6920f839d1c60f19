"""A three-broker cluster with real processes: placement, acks=all, failover, ISR.

One controller (process.roles=controller) and three brokers on 127.0.0.1
(tests/integration/cluster_proc.py). Records are produced with
confluent-kafka (librdkafka) and read back with it; brokers are killed with
SIGKILL.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer

from tests.integration.broker_proc import HOST, BrokerNotReady, BrokerProcess, free_port
from tests.integration.clients import (
    Wire,
    ck_consume,
    fetch_v12,
    parse_response,
    produce_request_v9,
    record_batch,
)
from tests.integration.cluster_proc import CONTROLLER_ID, ClusterProcesses, _wait
from tests.integration.test_controller_quorum import (
    metadata_log_end,
    metadata_log_end_of,
    quorum_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
CONTROLLER_BACK_S = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path_factory.mktemp("cluster"), brokers=3).start()
    try:
        yield c
    finally:
        c.close()


def _produce_acks_all(bootstrap: str, topic: str, values: list[bytes],
                      partition: int = 0) -> list[int]:
    """Produce with acks=all and idempotence; returns the acknowledged offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
    offsets: list[int] = []
    errors: list[str] = []

    def done(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            offsets.append(msg.offset())
        else:
            errors.append(str(err))

    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=done)
        p.poll(0)
    assert p.flush(40) == 0
    assert not errors, errors
    return offsets


def test_rf3_topic_is_placed_on_three_brokers_with_leaders_spread(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("placed", 6, 3)
    views = cluster.partitions("placed")
    assert len(views) == 6
    for v in views.values():
        assert sorted(v.replicas) == [1, 2, 3]
        assert v.leader == v.replicas[0]
        assert v.isr == (1, 2, 3)
    # leaders round-robin over the brokers, followers on the next ones
    assert sorted(v.leader for v in views.values()) == [1, 1, 2, 2, 3, 3]
    for p in range(6):
        nxt = views[(p + 1) % 6].replicas
        assert nxt == views[p].replicas[1:] + views[p].replicas[:1]


def test_topics_describe_shows_leader_replicas_and_isr(cluster: ClusterProcesses) -> None:
    cluster.create_topic("described", 1, 3)
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", cluster.bootstrap,
         "describe", "described"],
        check=False, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    view = cluster.partitions("described")[0]
    line = next(line for line in out.stdout.splitlines() if "Partition: 0" in line)
    assert f"Leader: {view.leader}" in line
    assert "Replicas: " + ",".join(map(str, view.replicas)) in line
    assert "Isr: " in line and len(line.split("Isr: ")[1].split()[0].split(",")) == 3


def test_follower_answers_consumer_fetch_with_not_leader_and_the_leader(
    cluster: ClusterProcesses,
) -> None:
    cluster.create_topic("follower-fetch", 1, 3)
    view = cluster.partitions("follower-fetch")[0]
    follower = next(b for b in view.replicas if b != view.leader)
    _, p = fetch_v12(cluster.brokers[follower].bootstrap, "follower-fetch", 0, 0, 0, 0)
    assert int(p.error_code) == NOT_LEADER_OR_FOLLOWER
    assert p.current_leader.leader_id == view.leader


def test_acks_all_records_survive_leader_kill_and_the_old_leader_rejoins_the_isr(
    cluster: ClusterProcesses,
) -> None:
    topic = "failover"
    cluster.create_topic(topic, 1, 3)
    before = [f"a-{i}".encode() for i in range(500)]
    acked = _produce_acks_all(cluster.bootstrap, topic, before)
    assert sorted(acked) == list(range(500))
    old = cluster.partitions(topic)[0]
    cluster.brokers[old.leader].kill9()
    new = cluster.wait_for_partition(
        topic, 0, lambda v: v.leader not in (-1, old.leader), "a new leader", timeout_s=20
    )
    assert new.leader in old.isr
    after = [f"b-{i}".encode() for i in range(500)]
    acked_after = _produce_acks_all(cluster.live_bootstrap(), topic, after)
    assert sorted(acked_after) == list(range(500, 1000))
    got = ck_consume(cluster.live_bootstrap(), topic, 1000, offset=OFFSET_BEGINNING)
    assert [r.value for r in got] == before + after
    assert [r.offset for r in got] == list(range(1000))
    # the old leader comes back, catches up and rejoins the ISR
    cluster.brokers[old.leader].restart()
    cluster.wait_for_partition(topic, 0, lambda v: old.leader in v.isr,
                               "the old leader back in the ISR", timeout_s=30)


def test_elect_leaders_gives_leadership_back_to_the_preferred_replica(
    cluster: ClusterProcesses,
) -> None:
    from confluent_kafka import ElectionType, TopicPartition

    topic = "preferred"
    for b in cluster.brokers.values():
        if not b.is_running():
            b.restart()
    cluster.wait_for_brokers({1, 2, 3})
    cluster.create_topic(topic, 1, 3)
    view = cluster.partitions(topic)[0]
    preferred = view.replicas[0]
    cluster.brokers[preferred].kill9()
    cluster.wait_for_partition(topic, 0, lambda v: v.leader not in (-1, preferred),
                               "another leader", timeout_s=20)
    cluster.brokers[preferred].restart()
    cluster.wait_for_partition(topic, 0, lambda v: preferred in v.isr,
                               "the preferred replica back in the ISR", timeout_s=30)
    assert cluster.partitions(topic)[0].leader != preferred
    admin = cluster.admin()
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
    errors = result.result(timeout=15)
    assert errors[TopicPartition(topic, 0)] is None, errors
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == preferred,
                               "the preferred replica leading", timeout_s=15)
    # a second election is not needed
    errors = admin.elect_leaders(ElectionType.PREFERRED,
                                 [TopicPartition(topic, 0)]).result(timeout=15)
    assert "ELECTION_NOT_NEEDED" in str(errors[TopicPartition(topic, 0)])


def test_acks_all_with_too_few_in_sync_replicas_is_not_enough_replicas(
    cluster: ClusterProcesses,
) -> None:
    topic = "min-isr"
    for b in cluster.brokers.values():
        if not b.is_running():
            b.restart()
    cluster.wait_for_brokers({1, 2, 3})
    cluster.create_topic(topic, 1, 3, {"min.insync.replicas": "3"})
    view = cluster.partitions(topic)[0]
    follower = next(b for b in view.replicas if b != view.leader)
    cluster.brokers[follower].kill9()
    try:
        cluster.wait_for_partition(topic, 0, lambda v: follower not in v.isr,
                                   "the killed follower out of the ISR", timeout_s=20)
        leader = cluster.brokers[view.leader]
        batch = record_batch([(None, b"x")], int(time.time() * 1000))
        with Wire(leader.bootstrap) as w:
            w.send_request(0, 9, 7, produce_request_v9(topic, 0, batch, acks=-1))
            frame = w.read_frame()
        from kio.schema.produce.v9.response import ProduceResponse

        _, resp = parse_response(frame, ProduceResponse)
        code = int(resp.responses[0].partition_responses[0].error_code)
        assert code == NOT_ENOUGH_REPLICAS
    finally:
        cluster.brokers[follower].restart()
    cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "the ISR whole again")


def test_a_restarted_controller_takes_the_cluster_back(cluster: ClusterProcesses) -> None:
    """The one controller is killed with SIGKILL: brokers keep serving what
    they lead; once it is back (from its metadata log, every broker with a
    fresh session) a leader's death is handled again."""
    topic = "controller-restart"
    for b in cluster.brokers.values():
        if not b.is_running():
            b.restart()
    cluster.wait_for_brokers({1, 2, 3})
    cluster.create_topic(topic, 1, 3)
    # every replica has the partition (an acks=all write went through all of
    # them) before the controller goes: a follower that had not yet learned of
    # it would hold the high watermark until the controller shrinks the ISR
    first = _produce_acks_all(cluster.bootstrap, topic, [b"before-%d" % i for i in range(10)])
    assert sorted(first) == list(range(10))
    cluster.controller.kill9()
    down = _produce_acks_all(cluster.bootstrap, topic, [b"while-down-%d" % i for i in range(40)])
    assert sorted(down) == list(range(10, 50))
    epoch_before = quorum_state(cluster, CONTROLLER_ID)["epoch"]
    cluster.controller.restart()
    # Back means: the controller leads a new epoch (its LeaderChange entry is
    # in its log), and every broker has fetched its metadata log up to that
    # entry, so each has found the restarted controller again.
    _wait(lambda: (state := quorum_state(cluster, CONTROLLER_ID))["leader"] == CONTROLLER_ID
          and state["epoch"] > epoch_before, CONTROLLER_BACK_S,
          f"the restarted controller to lead an epoch after {epoch_before}")
    controller_end = metadata_log_end(cluster, CONTROLLER_ID)
    _wait(lambda: all(metadata_log_end_of(b.data_dir) >= controller_end
                      for b in cluster.brokers.values()), CONTROLLER_BACK_S,
          f"every broker's metadata log to reach the controller's end {controller_end}")
    old = cluster.partitions(topic)[0]
    cluster.brokers[old.leader].kill9()
    new = cluster.wait_for_partition(topic, 0, lambda v: v.leader not in (-1, old.leader),
                                     "a new leader after the controller restart", timeout_s=20)
    assert new.leader in old.isr
    after = _produce_acks_all(cluster.live_bootstrap(), topic, [b"after-%d" % i for i in range(50)])
    assert sorted(after) == list(range(50, 100))
    got = ck_consume(cluster.live_bootstrap(), topic, 100, offset=OFFSET_BEGINNING)
    assert [r.offset for r in got] == list(range(100))
    cluster.brokers[old.leader].restart()
    cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "the ISR whole again",
                               timeout_s=30)


def test_a_broker_whose_port_is_taken_exits_before_registering(
    cluster: ClusterProcesses, tmp_path: Path,
) -> None:
    """A CI run saw a broker register, then fail to bind a port an outgoing
    connection had taken: its registered endpoint pointed at nothing. A broker
    binds first, so that broker stops with a clear error and registers nothing."""
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((HOST, port))  # an outgoing connection from that port
        taken.connect((HOST, cluster.controller_port))
        broker = BrokerProcess(
            overrides={**cluster.brokers[1].overrides, "node.id": 4},
            port=port, data_dir=tmp_path / "broker-4",
        )
        try:
            with pytest.raises(BrokerNotReady) as failed:
                broker.start()
        finally:
            broker.close()
    assert f"cannot bind listener PLAINTEXT to {HOST}:{port}: Address already in use" in str(
        failed.value)
    assert "registered with the controller" not in broker.log_tail(1 << 20)
    assert "broker 4 registered" not in cluster.controller.log_tail(1 << 20)
