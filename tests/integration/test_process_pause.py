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
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING

from tests.integration.acked_load import NumberedProducer, create_led_by_3, read_back_every_acked
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
    create_led_by_3(cluster, topic)
    bootstrap = cluster.bootstrap
    load = NumberedProducer(bootstrap, topic, message_timeout_ms=90_000).start()
    time.sleep(2.0)
    pid = cluster.brokers[3].pid
    assert pid is not None
    before = len(load.acked)
    os.kill(pid, signal.SIGSTOP)
    try:
        new = cluster.wait_for_partition(
            topic, 0, lambda v: v.leader in (1, 2) and 3 not in v.isr,
            "a new leader, broker 3 out of the ISR", timeout_s=30)
        assert new.leader != 3
        during = len(load.acked)
        time.sleep(max(PAUSE_S - 2.0, 0))
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.wait_for_partition(topic, 0, lambda v: 3 in v.isr and v.leader != 3,
                               "broker 3 following, back in the ISR", timeout_s=60)
    time.sleep(1.0)
    load.stop()
    assert not load.failed, load.failed[:5]
    assert before > 0 and len(load.acked) > during >= before, (before, during, len(load.acked))
    assert "fenced by the controller" in cluster.brokers[3].log_tail()
    got = read_back_every_acked(bootstrap, topic, load.acked)
    total = max(o for o, _ in load.acked) + 1
    # broker 3's own copy now matches the leader's: it serves as leader again
    # after a preferred election, and a consumer reading from it sees the same
    cluster.brokers[1].stop()
    cluster.brokers[2].stop()
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3, "broker 3 leading alone",
                               timeout_s=30)
    again = ck_consume(cluster.live_bootstrap(), topic, total, offset=OFFSET_BEGINNING)
    assert [(r.offset, int(r.value)) for r in again] == [(r.offset, int(r.value)) for r in got]
