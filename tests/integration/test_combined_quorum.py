"""Three combined nodes (`process.roles=broker,controller`), with real processes (issue 7).

Each node is a voter of the metadata quorum and a broker: its broker role
registers, heartbeats and takes producer id blocks through the active
controller (itself or another node) as a broker-only node does. The node
that is the active controller is killed with SIGKILL: the two others elect a
new leader, topics can still be created (through any live node: a standby
relays to the active controller) and records still flow.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.broker_proc import HOST, BrokerProcess, free_port, odradek_server_available
from tests.integration.cluster_proc import CLUSTER_ID, FAST_TIMEOUTS, _wait
from tests.integration.test_controller_quorum import (
    ELECTION_BOUND_S,
    METADATA_PARTITION_DIR,
    produce_and_consume,
)

pytestmark = pytest.mark.skipif(not odradek_server_available(), reason="odradek server missing")

NODE_IDS = (1, 2, 3)


class CombinedNodes:
    def __init__(self, base: Path) -> None:
        controller_ports = {n: free_port() for n in NODE_IDS}
        voters = ",".join(f"{n}@{HOST}:{p}" for n, p in controller_ports.items())
        self.nodes: dict[int, BrokerProcess] = {}
        for n in NODE_IDS:
            port = free_port()
            self.nodes[n] = BrokerProcess(
                overrides={
                    "process.roles": "broker,controller", "node.id": n,
                    "controller.quorum.voters": voters,
                    "controller.listener.names": "CONTROLLER",
                    "listeners": f"PLAINTEXT://{HOST}:{port},"
                                 f"CONTROLLER://{HOST}:{controller_ports[n]}",
                    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    "cluster.id": CLUSTER_ID,
                    **FAST_TIMEOUTS,
                },
                port=port,
                data_dir=base / f"node-{n}",
            )

    def start(self) -> None:
        # Together: a node opens its client listener once the quorum (which
        # needs a majority of the nodes) has unfenced it.
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for future in [pool.submit(node.start) for node in self.nodes.values()]:
                future.result()

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.nodes.values() if b.is_running())

    def active_controller(self) -> tuple[int, int] | None:
        """(leader id, epoch) once a running node says it leads the newest epoch."""
        leaders = []
        for n, node in self.nodes.items():
            path = node.data_dir / METADATA_PARTITION_DIR / "quorum-state"
            if node.is_running() and path.exists():
                state = json.loads(path.read_text())
                if int(state["leaderId"]) == n:
                    leaders.append((int(state["leaderEpoch"]), n))
        if not leaders:
            return None
        epoch, node_id = max(leaders)
        return node_id, epoch

    def brokers_in_metadata(self) -> set[int]:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.live_bootstrap()})
        return set(admin.list_topics(timeout=5).brokers)

    def create_topic(self, name: str, partitions: int, rf: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.live_bootstrap()})
        for f in admin.create_topics([NewTopic(name, partitions, rf)],
                                     operation_timeout=10).values():
            f.result(timeout=15)

        def ready() -> bool:
            t = admin.list_topics(name, timeout=5).topics[name]
            return t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values())

        _wait(ready, 30, f"{name}: every partition led, {rf} in sync")


def test_three_combined_nodes_survive_kill_9_of_the_active_controller(tmp_path: Path) -> None:
    nodes = CombinedNodes(tmp_path)
    try:
        nodes.start()
        first, first_epoch = _wait(nodes.active_controller, ELECTION_BOUND_S,
                                   "an active controller")
        _wait(lambda: nodes.brokers_in_metadata() == set(NODE_IDS), 30, "all three registered")
        nodes.create_topic("before", 3, 3)
        produce_and_consume(nodes, "before", 50)

        killed_at = time.monotonic()
        nodes.nodes[first].kill9()
        second, second_epoch = _wait(
            lambda: (a := nodes.active_controller()) and a[1] > first_epoch and a,
            ELECTION_BOUND_S, "a new active controller",
        )
        assert second != first
        print(f"node {first} killed; {second} leads epoch {second_epoch} after "
              f"{time.monotonic() - killed_at:.1f} s")

        nodes.create_topic("after", 3, 2)
        print(f"a topic created {time.monotonic() - killed_at:.1f} s after the kill")
        produce_and_consume(nodes, "after", 50)
        for n, node in nodes.nodes.items():
            if n != first:
                assert ": fenced by the controller" not in node.log_tail(1 << 20), n
    finally:
        nodes.close()
