"""A broker cut off from the controller and from everyone who connects to it.

Broker 3 reaches the controller, and is reached by clients and the other
brokers, only through `PartitionProxy`s (tests/integration/partition_proxy.py):
its `controller.quorum.voters` and `advertised.listeners` name the proxies.
It leads a partition (RF=3, min.insync.replicas=2) when both links are cut:
the controller fences it (no heartbeats for broker.session.timeout.ms) and
moves the leadership to an ISR member; the producer (acks=all, idempotence)
carries on with the new leader. Whatever broker 3 took alone is never
acknowledged (its ISR cannot shrink without the controller, so its high
watermark stands still). Once healed it is unfenced, follows, truncates what
diverges and rejoins the ISR; every acknowledged record is read back once,
in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer
from confluent_kafka.admin import NewTopic

from tests.integration.broker_proc import HOST, free_port
from tests.integration.clients import ck_consume
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.partition_proxy import PartitionProxy

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

CUT_S = 8.0


@pytest.fixture
def isolated(
    tmp_path: Path,
) -> Iterator[tuple[ClusterProcesses, PartitionProxy, PartitionProxy]]:
    to_controller_port, to_broker_port = free_port(), free_port()
    cluster = ClusterProcesses(tmp_path, brokers=3, broker_overrides={3: {
        "controller.quorum.voters": f"100@{HOST}:{to_controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{to_broker_port}",
    }})
    to_controller = PartitionProxy(to_controller_port, cluster.controller_port)
    to_broker = PartitionProxy(to_broker_port, cluster.brokers[3].port)
    try:
        cluster.start()
        yield cluster, to_controller, to_broker
    finally:
        cluster.close()
        to_controller.close()
        to_broker.close()


def test_a_partitioned_leader_is_fenced_and_rejoins_without_losing_acked_records(
    isolated: tuple[ClusterProcesses, PartitionProxy, PartitionProxy],
) -> None:
    cluster, to_controller, to_broker = isolated
    bootstrap = ",".join(cluster.brokers[b].bootstrap for b in (1, 2))
    topic = "partitioned"
    admin = cluster.admin()
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[3, 1, 2]],
                                           config={"min.insync.replicas": "2"})]).values():
        f.result(timeout=15)
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3 and len(v.isr) == 3,
                               "broker 3 leading with the ISR whole")
    acked: list[tuple[int, int]] = []
    failed: list[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60_000,
                         "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5})

    def done(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.offset(), int(msg.value())))
        else:
            failed.append(str(err))

    def send() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(topic, str(n).encode(), partition=0, on_delivery=done)
            n += 1
            producer.poll(0.005)
        producer.flush(90)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    time.sleep(2.0)
    before_cut = len(acked)
    to_controller.cut()
    to_broker.cut()
    new = cluster.wait_for_partition(topic, 0, lambda v: v.leader in (1, 2),
                                     "a leader other than the cut-off broker", timeout_s=20)
    assert 3 not in new.isr
    time.sleep(CUT_S)
    to_controller.heal()
    to_broker.heal()
    cluster.wait_for_partition(topic, 0, lambda v: 3 in v.isr, "broker 3 back in the ISR",
                               timeout_s=40)
    time.sleep(1.0)
    stop.set()
    sender.join(120)
    assert not failed, failed[:5]
    assert before_cut > 0 and len(acked) > before_cut, (before_cut, len(acked))
    total = max(o for o, _ in acked) + 1
    got = ck_consume(bootstrap, topic, total, offset=OFFSET_BEGINNING)
    values = [int(r.value) for r in got]
    assert len(values) == len(set(values)), "a record was read twice"
    assert values == sorted(values), "records out of order"
    at = {r.offset: int(r.value) for r in got}
    for offset, value in acked:
        assert at[offset] == value
