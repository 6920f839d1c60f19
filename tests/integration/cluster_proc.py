"""A real odradek cluster for integration tests: controllers and N brokers.

Theory of operation
-------------------
`ClusterProcesses` formats a cluster id and starts, on 127.0.0.1, `controllers`
nodes with `process.roles=controller` (node ids 100, 101, ..., the voters of
the metadata quorum; one by default, `self.controller` is the first) and
`brokers` nodes with `process.roles=broker` (node ids 1..N) that
find it through `controller.quorum.voters`, each a `BrokerProcess` with its
own data dir, port and log. Timeouts are lowered as Kafka's own cluster tests
lower them (heartbeats 250 ms, session 2 s, replica lag 2 s), so fencing and
failover take seconds. Helpers read the cluster's view through the Kafka
protocol (confluent-kafka's AdminClient metadata): leaders, replicas, ISR.

Rules: every wait is bounded; `close()` kills whatever still runs; brokers
keep their port and data dir across restarts (clients hold the addresses).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.broker_proc import HOST, BrokerProcess, free_port

CONTROLLER_ID = 100
CLUSTER_ID = "OdradekTestCluster0001"

FAST_TIMEOUTS: dict[str, object] = {
    "broker.heartbeat.interval.ms": 250,
    "broker.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.backoff.ms": 100,
    "replica.fetch.wait.max.ms": 200,
    "leader.imbalance.check.interval.seconds": 3600,
}


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterProcesses:
    def __init__(self, base: Path, brokers: int = 3, overrides: dict[str, object] | None = None,
                 racks: dict[int, str] | None = None,
                 broker_overrides: dict[int, dict[str, object]] | None = None,
                 controllers: int = 1) -> None:
        self.base = base
        ports = {CONTROLLER_ID + i: free_port() for i in range(controllers)}
        self.controller_port = ports[CONTROLLER_ID]
        common = {
            "controller.quorum.voters": ",".join(f"{n}@{HOST}:{p}" for n, p in ports.items()),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "cluster.id": CLUSTER_ID,
            **FAST_TIMEOUTS,
            **(overrides or {}),
        }
        self.controllers: dict[int, BrokerProcess] = {
            node_id: BrokerProcess(
                overrides={**common, "process.roles": "controller", "node.id": node_id,
                           "listeners": f"CONTROLLER://{HOST}:{port}"},
                port=port,
                data_dir=base / ("controller" if node_id == CONTROLLER_ID
                                 else f"controller-{node_id}"),
            )
            for node_id, port in ports.items()
        }
        self.controller = self.controllers[CONTROLLER_ID]
        self.brokers: dict[int, BrokerProcess] = {}
        for node_id in range(1, brokers + 1):
            extra: dict[str, object] = {"process.roles": "broker", "node.id": node_id}
            if racks and node_id in racks:
                extra["broker.rack"] = racks[node_id]
            extra.update((broker_overrides or {}).get(node_id, {}))
            self.brokers[node_id] = BrokerProcess(
                overrides={**common, **extra}, data_dir=base / f"broker-{node_id}"
            )

    def start(self) -> ClusterProcesses:
        for c in self.controllers.values():
            c.start()
        for b in self.brokers.values():
            b.start()
        self.wait_for_brokers(set(self.brokers))
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            b.close()
        for c in self.controllers.values():
            c.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_running())

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.live_bootstrap()})

    # -- the cluster's view ------------------------------------------------------------

    def brokers_in_metadata(self) -> set[int]:
        return set(self.admin().list_topics(timeout=5).brokers)

    def wait_for_brokers(self, ids: set[int], timeout_s: float = 30.0) -> None:
        _wait(lambda: self.brokers_in_metadata() == ids, timeout_s, f"brokers {ids}")

    def partitions(self, topic: str) -> dict[int, PartitionView]:
        md = self.admin().list_topics(topic, timeout=5)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(str(t.error))
        return {
            p.id: PartitionView(p.leader, tuple(p.replicas), tuple(sorted(p.isrs)))
            for p in t.partitions.values()
        }

    def wait_for_partition(self, topic: str, partition: int, pred: Any, desc: str,
                           timeout_s: float = 30.0) -> PartitionView:
        def check() -> PartitionView | None:
            view = self.partitions(topic).get(partition)
            return view if view is not None and pred(view) else None

        return _wait(check, timeout_s, f"{topic}-{partition}: {desc}")

    def create_topic(self, name: str, partitions: int, rf: int,
                     config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept alive until the futures are done
        fs = admin.create_topics(
            [NewTopic(name, partitions, rf, config=config or {})], operation_timeout=10
        )
        for f in fs.values():
            f.result(timeout=15)
        del admin
        for p in range(partitions):
            self.wait_for_partition(name, p, lambda v: v.leader >= 0 and len(v.isr) == rf,
                                    f"a leader and {rf} in sync")


def _wait(pred: Any, timeout_s: float, desc: str, interval_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = pred()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {desc} (last error: {last!r})")
