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

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.acked_load import NumberedProducer, create_led_by_3, read_back_every_acked
from tests.integration.broker_proc import HOST, free_port
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
    create_led_by_3(cluster, topic)
    load = NumberedProducer(bootstrap, topic, message_timeout_ms=60_000).start()
    time.sleep(2.0)
    before_cut = len(load.acked)
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
    load.stop()
    assert not load.failed, load.failed[:5]
    assert before_cut > 0 and len(load.acked) > before_cut, (before_cut, len(load.acked))
    read_back_every_acked(bootstrap, topic, load.acked)
