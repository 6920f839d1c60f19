"""The replication simulator's nodes, settings and network plumbing.

What `replication.py`'s simulation is made of: the settings a seed draws, the
simulated controller, brokers (their disks survive a crash) and producer, and
`SimulationBase`, the fields of a run and the seeded network every part sends
through. The broker processes are in `replication_brokers.py`; the controller,
the producer, the events and the checks of a whole run in `replication.py`.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata import cluster_control as CC
from odradek.metadata import records as R
from odradek.metadata.image import MetadataImage
from odradek.replication.leader import (
    PartitionLeader,
)
from tests.simulation.replica_log import ReplicaLog
from tests.simulation.replication_checker import Checker
from tests.simulation.scheduling import Scheduler

TOPIC = "t"
CONTROLLER = 0
BROKERS = (1, 2, 3)
PRODUCER = 9
MIN_INSYNC_REPLICAS = 2
LIVENESS_BOUND_MS = 60_000
MAX_PENDING_ACKS = 1_000

# Kafka error codes the glue uses
NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
BROKER_NOT_AVAILABLE = 8


@dataclass(slots=True)
class Settings:
    """Timings and faults of one schedule, drawn from its seed."""

    partitions: int
    heartbeat_interval_ms: int
    session_timeout_ms: int
    lag_time_max_ms: int
    fetch_wait_ms: int
    fetch_max_batches: int
    request_timeout_ms: int
    checkpoint_every_ms: int
    rebalance_every_ms: int
    drop: float
    max_delay_ms: int
    slow_delay_ms: int
    crash_every_ms: int
    controller_crash_every_ms: int
    partition_every_ms: int

    @classmethod
    def draw(cls, rng: random.Random) -> Settings:
        return cls(
            partitions=rng.choice([1, 2, 3]),
            heartbeat_interval_ms=rng.choice([50, 100]),
            session_timeout_ms=rng.choice([400, 900]),
            lag_time_max_ms=rng.choice([200, 500, 1500]),
            fetch_wait_ms=rng.choice([10, 50]),
            fetch_max_batches=rng.choice([1, 2, 100]),
            request_timeout_ms=rng.choice([300, 1000]),
            checkpoint_every_ms=rng.choice([50, 500, 5000]),
            rebalance_every_ms=rng.choice([500, 3000, 0]),
            drop=rng.choice([0.0, 0.01, 0.05]),
            max_delay_ms=rng.choice([2, 10, 40]),
            slow_delay_ms=rng.choice([100, 600]),
            crash_every_ms=rng.choice([0, 700, 2000]),
            controller_crash_every_ms=rng.choice([0, 0, 1500]),
            partition_every_ms=rng.choice([0, 800, 2500]),
        )


# -- nodes --------------------------------------------------------------------------------------


@dataclass(slots=True)
class PartitionView:
    """What `broker/replica_manager.Partition` holds of the image."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int


@dataclass(slots=True)
class BrokerDisk:
    logs: dict[int, ReplicaLog] = field(default_factory=dict)
    hw_checkpoint: dict[int, int] = field(default_factory=dict)
    metadata: list[tuple[int, list[R.MetadataRecord]]] = field(default_factory=list)


@dataclass(slots=True)
class PendingAck:
    partition: int
    required_offset: int
    base_offset: int
    request_id: int
    producer_incarnation: int
    deadline_ms: int


class SimBroker:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.disk = BrokerDisk()
        self.alive = False
        self.incarnation = 0
        self._reset()

    def _reset(self) -> None:
        self.image = MetadataImage()
        self.views: dict[int, PartitionView] = {}
        self.leaders: dict[int, PartitionLeader] = {}
        self.broker_epoch = -1
        # Leadership and replication follow the image only once the controller
        # has unfenced this broker (broker.py publishes it then): a stale image
        # from before a restart must not make it lead, set a high watermark or
        # fetch. It serves requests from then on too.
        self.serving = False
        self.alter_in_flight: dict[int, int] = {}  # partition -> sent ms
        self.fetch_in_flight: dict[int, tuple[int, int]] = {}  # leader -> (corr, sent ms)
        self.fetch_sent: dict[int, dict[int, tuple[int, int]]] = {}  # corr -> p -> (epoch, leo)
        self.next_fetch_ms: dict[int, int] = {}
        self.meta_in_flight: tuple[int, int] | None = None
        self.control_in_flight: tuple[int, int] | None = None  # (corr, sent ms)
        self.next_heartbeat_ms = 0
        self.next_shrink_ms = 0
        self.next_checkpoint_ms = 0
        self.pending: list[PendingAck] = []
        self.last_hw: dict[int, int] = {}


@dataclass(slots=True)
class SimController:
    log: list[tuple[int, list[R.MetadataRecord]]] = field(default_factory=list)
    next_offset: int = 0
    image: MetadataImage = field(default_factory=MetadataImage)
    control: CC.ClusterControl | None = None
    alive: bool = False
    incarnation: int = 0
    next_rebalance_ms: int = 0


@dataclass(slots=True)
class InFlightProduce:
    request_id: int
    values: tuple[int, ...]
    broker: int
    sent_ms: int


@dataclass(slots=True)
class SimProducer:
    incarnation: int = 1
    next_value: int = 0
    next_request_id: int = 0
    leader_guess: dict[int, int] = field(default_factory=dict)
    batch: dict[int, tuple[int, ...]] = field(default_factory=dict)  # partition -> unacked
    in_flight: dict[int, InFlightProduce] = field(default_factory=dict)
    retry_at_ms: dict[int, int] = field(default_factory=dict)
    acks: int = 0
    stopped: bool = False


# -- the network and the fields of a run ---------------------------------------------------------


class SimulationBase(Scheduler):
    def __init__(self, seed: int, steps: int, elr: bool = False) -> None:
        super().__init__(seed)
        self.steps = steps
        # KIP-966: the controller keeps eligible leader replicas (the feature at
        # 1) and leaders keep the high watermark while the ISR is below min ISR
        self.elr = elr
        self.s = Settings.draw(self.rng)
        self._corr = 0
        self.checker = Checker()
        self.controller = SimController()
        self.brokers = {b: SimBroker(b) for b in BROKERS}
        self.producer = SimProducer()
        self.blocked: set[tuple[int, int]] = set()
        self.faulty = True
        self.steps_run = 0
        self.topic_id: uuid.UUID | None = None
        self.stats = {"crashes": 0, "controller_crashes": 0, "partitions": 0, "acks": 0,
                      "truncations": 0, "leader_changes": 0, "isr_changes": 0,
                      "elr_changes": 0}


    def _incarnation(self, node: int) -> int:
        if node == CONTROLLER:
            return self.controller.incarnation
        if node == PRODUCER:
            return self.producer.incarnation
        return self.brokers[node].incarnation

    def _alive(self, node: int) -> bool:
        if node == CONTROLLER:
            return self.controller.alive
        if node == PRODUCER:
            return True
        return self.brokers[node].alive

    def _send(self, src: int, dst: int, kind: str, body: dict[str, Any]) -> None:
        if self.faulty and ((src, dst) in self.blocked or self.rng.random() < self.s.drop):
            return
        if self.faulty and self.rng.random() < 0.02:
            delay = self.rng.randint(1, self.s.slow_delay_ms)
        else:
            delay = self.rng.randint(1, self.s.max_delay_ms)
        # a message reaches only the incarnations it was sent between (a
        # connection dies with its process)
        self._push(self.now_ms + delay, "deliver",
                   (src, dst, kind, body, self._incarnation(src), self._incarnation(dst)))

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr


def written_epochs(log: ReplicaLog) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for offset, epoch in enumerate(log.epochs_at):
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return out


def brief(records: list[R.MetadataRecord]) -> str:
    parts = []
    for r in records:
        kind = r["type"]
        if kind == R.PARTITION_CHANGE:
            fields = {k: v for k, v in r.items() if k in ("partition", "leader", "isr",
                                                         "leader_epoch")}
            parts.append(f"change {fields}")
        elif kind == R.BROKER_REGISTRATION_CHANGE:
            parts.append(f"broker {r['broker_id']} fenced={r.get('fenced')}")
        elif kind == R.REGISTER_BROKER:
            parts.append(f"register {r['broker_id']}")
        else:
            parts.append(str(kind))
    return "; ".join(parts)
