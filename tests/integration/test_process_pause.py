"""A partition leader paused (SIGSTOP) for longer than broker.session.timeout.ms.

Broker 3 leads a partition (RF=3, min.insync.replicas=2) under an acks=all,
idempotent producer. It is stopped with SIGSTOP: its heartbeats stop, the
controller fences it and moves the leadership to an ISR member, and the
producer carries on there. While stopped it may hold requests it read before
the stop; when continued it must not acknowledge anything from its stale
leadership (its high watermark cannot move without the others), it learns it
was fenced, follows the new leader, truncates what diverges and rejoins the
ISR. Every acknowledged record is read back once, in order, at its offset.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer
from confluent_kafka.admin import NewTopic

from tests.integration.clients import ck_consume
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PAUSE_S = 6.0  # three times broker.session.timeout.ms (2 s in cluster_proc)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, brokers=3).start()
    try:
        yield c
    finally:
        pid = c.brokers[3].pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        c.close()


def test_a_paused_leader_is_fenced_then_follows_truncates_and_rejoins(
    cluster: ClusterProcesses,
) -> None:
    topic = "paused"
    admin = cluster.admin()
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[3, 1, 2]],
                                           config={"min.insync.replicas": "2"})]).values():
        f.result(timeout=15)
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3 and len(v.isr) == 3,
                               "broker 3 leading with the ISR whole")
    acked: list[tuple[int, int]] = []
    failed: list[str] = []
    stop = threading.Event()
    bootstrap = cluster.bootstrap
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 90_000,
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
        producer.flush(120)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    time.sleep(2.0)
    pid = cluster.brokers[3].pid
    assert pid is not None
    before = len(acked)
    os.kill(pid, signal.SIGSTOP)
    try:
        new = cluster.wait_for_partition(
            topic, 0, lambda v: v.leader in (1, 2) and 3 not in v.isr,
            "a new leader, broker 3 out of the ISR", timeout_s=30)
        assert new.leader != 3
        during = len(acked)
        time.sleep(max(PAUSE_S - 2.0, 0))
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.wait_for_partition(topic, 0, lambda v: 3 in v.isr and v.leader != 3,
                               "broker 3 following, back in the ISR", timeout_s=60)
    time.sleep(1.0)
    stop.set()
    sender.join(150)
    assert not sender.is_alive()
    assert not failed, failed[:5]
    assert before > 0 and len(acked) > during >= before, (before, during, len(acked))
    assert "fenced by the controller" in cluster.brokers[3].log_tail()
    total = max(o for o, _ in acked) + 1
    got = ck_consume(bootstrap, topic, total, offset=OFFSET_BEGINNING)
    values = [int(r.value) for r in got]
    assert len(values) == len(set(values)), "a record was read twice"
    assert values == sorted(values), "records out of order"
    at = {r.offset: int(r.value) for r in got}
    for offset, value in acked:
        assert at[offset] == value
    # broker 3's own copy now matches the leader's: it serves as leader again
    # after a preferred election, and a consumer reading from it sees the same
    cluster.brokers[1].stop()
    cluster.brokers[2].stop()
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3, "broker 3 leading alone",
                               timeout_s=30)
    again = ck_consume(cluster.live_bootstrap(), topic, total, offset=OFFSET_BEGINNING)
    assert [(r.offset, int(r.value)) for r in again] == [(r.offset, int(r.value)) for r in got]
