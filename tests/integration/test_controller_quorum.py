"""A metadata quorum of three controllers, with real processes (issue 7).

Three `process.roles=controller` nodes (the Raft voters) and three brokers on
127.0.0.1. The active controller (the Raft leader) is killed with SIGKILL: the
two others elect a new leader, the brokers find it and stay registered, topics
can still be created, records still flow; the killed controller restarts and
catches up as a follower (its metadata log reaches the leader's).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Protocol

import pytest

from tests.integration.broker_proc import odradek_server_available
from tests.integration.cluster_proc import ClusterProcesses, _wait

pytestmark = pytest.mark.skipif(not odradek_server_available(), reason="odradek server missing")

METADATA_PARTITION_DIR = "__cluster_metadata-0"
ELECTION_BOUND_S = 20.0


def quorum_state(cluster: ClusterProcesses, node_id: int) -> dict[str, int]:
    path = cluster.controllers[node_id].data_dir / METADATA_PARTITION_DIR / "quorum-state"
    data = json.loads(path.read_text())
    return {"leader": int(data["leaderId"]), "epoch": int(data["leaderEpoch"])}


def active_controller(cluster: ClusterProcesses) -> tuple[int, int] | None:
    """(leader id, epoch) once a running controller says it leads the newest epoch."""
    states = {
        n: quorum_state(cluster, n)
        for n, c in cluster.controllers.items()
        if c.is_running() and (c.data_dir / METADATA_PARTITION_DIR / "quorum-state").exists()
    }
    leaders = [(s["epoch"], n) for n, s in states.items() if s["leader"] == n]
    if not leaders:
        return None
    epoch, node = max(leaders)
    return node, epoch


def metadata_log_end(cluster: ClusterProcesses, node_id: int) -> int:
    """A controller's metadata log end offset, from its files on disk."""
    return metadata_log_end_of(cluster.controllers[node_id].data_dir)


def metadata_log_end_of(data_dir: Path) -> int:
    """The metadata log end offset in `data_dir`: the end of its last batch, or
    the base offset of a segment past it (a log emptied at a snapshot's end
    offset - a fetched snapshot installed - holds an empty segment there and
    no batch, and its end offset is that base offset, not 0)."""
    from odradek.protocol import records as batches

    end = 0
    for segment in sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log")):
        end = max(end, int(segment.stem))
        data = segment.read_bytes()
        for header in batches.iter_batch_headers(data):
            end = max(end, header.next_offset)
    return end


class LiveNodes(Protocol):
    def live_bootstrap(self) -> str: ...


def produce_and_consume(cluster: LiveNodes, topic: str, count: int) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert sorted(got) == sorted(f"{topic}-{i}".encode() for i in range(count))


def test_three_controllers_survive_kill_9_of_the_active_one(tmp_path: Path) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=3, controllers=3)
    try:
        cluster.start()
        first, first_epoch = _wait(
            lambda: active_controller(cluster), ELECTION_BOUND_S, "an active controller"
        )
        cluster.create_topic("before", 3, 3)
        produce_and_consume(cluster, "before", 50)

        killed_at = time.monotonic()
        cluster.controllers[first].kill9()
        second, second_epoch = _wait(
            lambda: (a := active_controller(cluster)) and a[1] > first_epoch and a,
            ELECTION_BOUND_S,
            "a new active controller",
        )
        elected_s = time.monotonic() - killed_at
        assert second != first
        print(
            f"controller {first} killed; {second} leads epoch {second_epoch} after "
            f"{elected_s:.1f} s"
        )

        # The brokers found the new controller and stay registered and unfenced.
        cluster.create_topic("after", 3, 3)
        moved_s = time.monotonic() - killed_at
        print(f"a topic created through the new controller {moved_s:.1f} s after the kill")
        assert cluster.brokers_in_metadata() == set(cluster.brokers)  # none fenced
        for node_id, b in cluster.brokers.items():
            assert ": fenced by the controller" not in b.log_tail(1 << 20), node_id
        produce_and_consume(cluster, "after", 50)

        # The killed controller rejoins as a follower and catches up.
        cluster.controllers[first].start()
        _wait(
            lambda: quorum_state(cluster, first)["leader"] == second,
            ELECTION_BOUND_S,
            f"controller {first} follows {second}",
        )
        _wait(
            lambda: metadata_log_end(cluster, first) >= metadata_log_end(cluster, second) > 0,
            ELECTION_BOUND_S,
            f"controller {first} catches up",
        )
        assert active_controller(cluster) == (second, second_epoch)
    finally:
        cluster.close()
