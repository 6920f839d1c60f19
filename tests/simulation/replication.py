"""A deterministic simulator for the controller and partition replication.

Theory of operation
-------------------
One `ReplicationSimulation` is one schedule, fully determined by its seed, in
the style of `cluster.py` (the Raft simulator): a fake clock, an event queue
ordered by (time, sequence number), a seeded network that drops, delays and
reorders messages and partitions nodes, and crashes with restarts.

The nodes run odradek's own pure state machines; the glue here only moves
their inputs and outputs, as the asyncio shells in `broker/` do:

* a controller: `metadata/controller.py` creates the topic (RF=3,
  `min.insync.replicas=2`) and `metadata/cluster_control.py` registers
  brokers, answers heartbeats, fences brokers whose session ran out, elects
  leaders from the ISR, applies AlterPartition and moves preferred leaders
  back; its decisions are records appended to a metadata log that the
  images (`metadata/image.py`) replay. Here the log commits atomically: that
  it is never lost, changed or reordered across controller failovers is what
  the Raft simulator checks of `raft/core.py`. A controller crash loses the
  sessions (a restarted controller gives every broker a fresh one, as a
  failover does) but not the log.
* three brokers: each replays the metadata log it fetched, leads or follows
  as its image says, and replicates with `replication/leader.py` (follower
  offsets, the ISR, the high watermark, acks=all) and
  `replication/follower.py` (diverging epochs, truncation, the follower's
  high watermark) over an in-memory log with the real leader epoch cache
  (`storage/leader_epoch.py`). A crash is a process crash (kill -9): the log
  and epoch cache stay as written (the page cache outlives the process); the
  high watermark comes back from its last checkpoint, the image from the
  broker's copy of the metadata log. A restarted broker publishes its image
  to its replicas (leads, follows, fetches) and serves requests only once the
  controller unfences it, as `broker/broker.py` does.
* a producer with acks=all sending numbered batches of 1-3 records, one
  request at a time per partition, retrying on errors and timeouts.

Invariants (`Checker`), after every event that could break them:

* at most one broker leads a partition in a leader epoch, ever;
* the records a leader exposed (below its high watermark, what consumers may
  read) never change: every later leader holds them when it starts to lead,
  a leader of a newer epoch holds whatever an older one exposes, and no
  replica truncates one away;
* every acknowledged batch is exposed at the offsets the answer gave, and a
  partition's acknowledged batches have increasing offsets (never reordered);
* a broker's high watermark never goes back while it runs, and never passes
  its log end offset.

At the end the network heals, every node restarts, and within a bounded
simulated time the producer must get another batch acknowledged and all
replicas must converge: the same records at the same offsets, the full ISR,
the high watermark at the log end, every exposed and acknowledged record in
place.

A failing schedule raises `SimulationFailure` with its seed and the tail of
its trace; ``ODRADEK_REPL_SIM_SEED=<seed>`` replays exactly that schedule.
"""

from __future__ import annotations

import heapq
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata import cluster_control as CC
from odradek.metadata import records as R
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import MetadataImage, apply
from odradek.replication.follower import (
    diverging_epoch,
    follower_high_watermark,
    truncation_offset,
)
from odradek.replication.leader import (
    PartitionLeader,
    acks_all_outcome,
    isr_answer_applies,
    may_join_isr,
)
from tests.simulation.replica_log import ReplicaLog
from tests.simulation.replication_checker import Checker
from tests.simulation.scheduling import Scheduler, SimulationFailure

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


# -- the simulation -----------------------------------------------------------------------------


class ReplicationSimulation(Scheduler):
    def __init__(self, seed: int, steps: int) -> None:
        super().__init__(seed)
        self.steps = steps
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
                      "truncations": 0, "leader_changes": 0, "isr_changes": 0}


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

    # -- the controller ---------------------------------------------------------------------------
    def _controller_start(self) -> None:
        c = self.controller
        c.alive = True
        c.incarnation += 1
        c.control = CC.ClusterControl(self.s.session_timeout_ms, lambda image, topic: False)
        c.control.activate(c.image, self.now_ms)
        c.next_rebalance_ms = self.now_ms + self.s.rebalance_every_ms
        self._push(self.now_ms + 100, "controller_tick", c.incarnation)
        self.log("controller starts")

    def _commit(self, records: list[R.MetadataRecord]) -> None:
        if not records:
            return
        c = self.controller
        offset = c.next_offset + len(records) - 1
        c.image = apply(c.image, records, offset)
        c.log.append((offset, records))
        c.next_offset = offset + 1
        for r in records:
            if r["type"] == R.PARTITION_CHANGE:
                if "leader" in r:
                    self.stats["leader_changes"] += 1
                if "isr" in r:
                    self.stats["isr_changes"] += 1
        self.log(f"controller commits {offset}: {_brief(records)}")

    def _controller_tick(self) -> None:
        c = self.controller
        assert c.control is not None
        image = c.image
        if TOPIC not in image.topics_by_name and sum(
            1 for b in image.brokers.values() if not b.fenced
        ) >= len(BROKERS):
            controller = Controller(1, 3, lambda configs: None, rng=random.Random(self.seed))
            results, records = controller.create_topics(image, [NewTopic(
                TOPIC, self.s.partitions, 3, {},
                {"min.insync.replicas": str(MIN_INSYNC_REPLICAS)})], False)
            assert results[TOPIC].error_code == 0, results
            self._commit(records)
        self._commit(c.control.check_sessions(c.image, self.now_ms))
        if self.s.rebalance_every_ms and self.now_ms >= c.next_rebalance_ms:
            c.next_rebalance_ms = self.now_ms + self.s.rebalance_every_ms
            self._commit(c.control.preferred_leader_elections(c.image))
        self._push(self.now_ms + 100, "controller_tick", c.incarnation)

    def _controller_handle(self, src: int, kind: str, body: dict[str, Any]) -> None:
        c = self.controller
        assert c.control is not None
        if kind == "register":
            code, records = c.control.register(
                c.image, src, body["incarnation"], [], None, self.now_ms)
            self._commit(records)
            broker = c.image.brokers.get(src)
            self._send(CONTROLLER, src, "register_answer", {
                "corr": body["corr"], "error": code,
                "epoch": broker.epoch if broker is not None else -1})
        elif kind == "heartbeat":
            answer, records = c.control.heartbeat(
                c.image, src, body["epoch"], body["metadata_offset"], False, False, self.now_ms)
            self._commit(records)
            self._send(CONTROLLER, src, "heartbeat_answer", {"corr": body["corr"],
                                                              "answer": answer})
        elif kind == "alter":
            answer, records = c.control.alter_partition(
                c.image, src, body["topic_id"], body["partition"], body["leader_epoch"],
                body["partition_epoch"], body["isr"])
            self._commit(records)
            self._send(CONTROLLER, src, "alter_answer", {
                "corr": body["corr"], "partition": body["partition"], "answer": answer})
        elif kind == "metadata":
            after = [(o, recs) for o, recs in c.log if o >= body["from_offset"]][:20]
            self._send(CONTROLLER, src, "metadata_answer", {"corr": body["corr"],
                                                             "batches": after})

    # -- brokers ----------------------------------------------------------------------------------
    def _broker_start(self, b: SimBroker) -> None:
        b.alive = True
        b.incarnation += 1
        b._reset()
        for p, log in b.disk.logs.items():
            # the high watermark from its checkpoint (never above the log end)
            log.high_watermark = min(b.disk.hw_checkpoint.get(p, 0), log.log_end_offset)
            b.last_hw[p] = log.high_watermark
        # the image from this broker's copy of the metadata log (possibly
        # stale: acted on once caught up)
        image = MetadataImage()
        for offset, records in b.disk.metadata:
            image = apply(image, records, offset)
        b.image = image
        self._push(self.now_ms + 1, "broker_tick", (b.node_id, b.incarnation))
        self.log(f"broker {b.node_id} starts (image at {image.offset})")

    def _crash_broker(self, b: SimBroker) -> None:
        self.stats["crashes"] += 1
        b.alive = False
        b.incarnation += 1
        self.log(f"crash broker {b.node_id}")
        self._push(self.now_ms + self._exp(800), "restart", b.node_id)

    def _on_metadata(self, b: SimBroker, image: MetadataImage, first: bool = False) -> None:
        """`replica_manager.on_metadata` + `_on_leadership` + `replication.sync`."""
        before = None if first else b.image.topics_by_name.get(TOPIC)
        b.image = image
        topic = image.topics_by_name.get(TOPIC)
        if topic is None or topic is before:
            return
        self.topic_id = topic.topic_id
        for p, pimg in topic.partitions.items():
            if b.node_id not in pimg.replicas:
                continue
            log = b.disk.logs.setdefault(p, ReplicaLog())
            view = b.views.get(p)
            was_leading = view is not None and view.leader == b.node_id
            old_epoch = view.leader_epoch if view is not None else -1
            if view is not None and pimg.leader_epoch == view.leader_epoch and (
                pimg.partition_epoch < view.partition_epoch
            ):
                # an AlterPartition answer newer than this image (replica_manager.py)
                view.leader, view.replicas = pimg.leader, pimg.replicas
            else:
                view = b.views[p] = PartitionView(
                    pimg.leader, pimg.leader_epoch, pimg.isr, pimg.replicas,
                    pimg.partition_epoch)
            if view.leader == b.node_id:
                if b.serving and (not was_leading or view.leader_epoch != old_epoch):
                    self.checker.on_leader_start(b, p, view.leader_epoch)
                    self.log(f"broker {b.node_id} leads {p} in epoch {view.leader_epoch} "
                             f"isr {view.isr} leo {log.log_end_offset} hw {log.high_watermark}")
                log.assign_leader_epoch(view.leader_epoch)
                if view.isr == (b.node_id,):
                    self._set_leader_hw(b, p, log.log_end_offset)
                leader = b.leaders.get(p)
                if leader is None:
                    leader = b.leaders[p] = PartitionLeader(b.node_id)
                leader.sync_replicas(view.replicas, self.now_ms)
                leader.observe_partition_epoch(view.partition_epoch)
                self._maybe_advance_hw(b, p)
            else:
                b.leaders.pop(p, None)
        self._check_pending(b)

    def _set_leader_hw(self, b: SimBroker, p: int, hw: int) -> None:
        log = b.disk.logs[p]
        hw = min(hw, log.log_end_offset)
        if hw <= log.high_watermark:
            return
        old = log.high_watermark
        log.high_watermark = hw
        if b.serving:  # what consumers may read from this leader now
            self.checker.on_exposed(b, p, b.views[p].leader_epoch, old, hw, self.brokers)

    def _maybe_advance_hw(self, b: SimBroker, p: int) -> None:
        view = b.views.get(p)
        if view is None or view.leader != b.node_id:
            return
        log = b.disk.logs[p]
        leader = b.leaders.get(p)
        hw = log.log_end_offset if leader is None else leader.high_watermark(
            view.isr, log.log_end_offset)
        if hw is not None and hw > log.high_watermark:
            self._set_leader_hw(b, p, hw)
        self._check_pending(b)

    def _check_pending(self, b: SimBroker) -> None:
        keep = []
        for ack in b.pending:
            view = b.views.get(ack.partition)
            if view is None or view.leader != b.node_id:
                code: int | None = NOT_LEADER_OR_FOLLOWER
            else:
                code = acks_all_outcome(b.disk.logs[ack.partition].high_watermark,
                                        ack.required_offset, len(view.isr), MIN_INSYNC_REPLICAS)
                if code is None and self.now_ms >= ack.deadline_ms:
                    code = REQUEST_TIMED_OUT
            if code is None:
                keep.append(ack)
                continue
            self._send(b.node_id, PRODUCER, "produce_answer", {
                "request_id": ack.request_id, "partition": ack.partition, "error": code,
                "base_offset": ack.base_offset, "to": ack.producer_incarnation})
        b.pending = keep

    def _broker_tick(self, b: SimBroker) -> None:
        now = self.now_ms
        timeout = self.s.request_timeout_ms
        # to the controller: register, then heartbeats
        if b.control_in_flight is not None and now - b.control_in_flight[1] > timeout:
            b.control_in_flight = None
        if b.control_in_flight is None and now >= b.next_heartbeat_ms:
            corr = self._next_corr()
            b.control_in_flight = (corr, now)
            b.next_heartbeat_ms = now + self.s.heartbeat_interval_ms
            if b.broker_epoch < 0:
                self._send(b.node_id, CONTROLLER, "register", {
                    "corr": corr, "incarnation": f"{b.node_id}-{b.incarnation}"})
            else:
                self._send(b.node_id, CONTROLLER, "heartbeat", {
                    "corr": corr, "epoch": b.broker_epoch, "metadata_offset": b.image.offset})
        # metadata
        if b.meta_in_flight is not None and now - b.meta_in_flight[1] > timeout:
            b.meta_in_flight = None
        if b.meta_in_flight is None:
            corr = self._next_corr()
            b.meta_in_flight = (corr, now)
            self._send(b.node_id, CONTROLLER, "metadata",
                       {"corr": corr, "from_offset": b.image.offset + 1})
        # follower fetches, one request per leader
        wanted: dict[int, list[int]] = {}
        for p, view in b.views.items():
            if view.leader not in (b.node_id, -1) and b.node_id in view.replicas:
                wanted.setdefault(view.leader, []).append(p)
        for leader_id, parts in wanted.items():
            in_flight = b.fetch_in_flight.get(leader_id)
            if in_flight is not None and now - in_flight[1] > timeout:
                b.fetch_sent.pop(in_flight[0], None)
                del b.fetch_in_flight[leader_id]
                in_flight = None
            if in_flight is None and now >= b.next_fetch_ms.get(leader_id, 0):
                self._send_fetch(b, leader_id, parts)
        # the leader's ISR shrink round
        if now >= b.next_shrink_ms:
            b.next_shrink_ms = now + max(self.s.lag_time_max_ms // 2, 50)
            for p, leader in b.leaders.items():
                view = b.views[p]
                out = leader.lagging(view.isr, now, self.s.lag_time_max_ms)
                if out:
                    self._alter_isr(b, p, [r for r in view.isr if r not in out])
        for p, sent in list(b.alter_in_flight.items()):
            if now - sent > timeout:
                del b.alter_in_flight[p]
        # the high watermark checkpoint
        if now >= b.next_checkpoint_ms:
            b.next_checkpoint_ms = now + self.s.checkpoint_every_ms
            for p, log in b.disk.logs.items():
                b.disk.hw_checkpoint[p] = log.high_watermark
        self._check_pending(b)
        self._push(now + 20, "broker_tick", (b.node_id, b.incarnation))

    def _send_fetch(self, b: SimBroker, leader_id: int, parts: list[int]) -> None:
        corr = self._next_corr()
        sent = {}
        request = []
        for p in parts:
            log = b.disk.logs[p]
            view = b.views[p]
            request.append((p, view.leader_epoch, log.log_end_offset, log.epochs.latest_epoch()))
            sent[p] = (view.leader_epoch, log.log_end_offset)
        b.fetch_in_flight[leader_id] = (corr, self.now_ms)
        b.fetch_sent[corr] = sent
        self._send(b.node_id, leader_id, "fetch", {"corr": corr, "partitions": request})

    def _alter_isr(self, b: SimBroker, p: int, new_isr: list[int]) -> None:
        if p in b.alter_in_flight:
            return
        view = b.views[p]
        b.leaders[p].propose_isr(view.isr, new_isr, view.partition_epoch)
        b.alter_in_flight[p] = self.now_ms
        assert self.topic_id is not None
        self._send(b.node_id, CONTROLLER, "alter", {
            "corr": self._next_corr(), "topic_id": str(self.topic_id), "partition": p,
            "leader_epoch": view.leader_epoch, "partition_epoch": view.partition_epoch,
            "isr": new_isr})

    def _broker_handle(self, b: SimBroker, src: int, kind: str, body: dict[str, Any]) -> None:
        if kind == "register_answer":
            if b.control_in_flight is None or b.control_in_flight[0] != body["corr"]:
                return
            b.control_in_flight = None
            if body["error"] == NONE:
                b.broker_epoch = body["epoch"]
                b.next_heartbeat_ms = self.now_ms
        elif kind == "heartbeat_answer":
            if b.control_in_flight is None or b.control_in_flight[0] != body["corr"]:
                return
            b.control_in_flight = None
            answer: CC.HeartbeatAnswer = body["answer"]
            if answer.error_code in (CC.STALE_BROKER_EPOCH, CC.BROKER_ID_NOT_REGISTERED):
                b.broker_epoch = -1
                b.next_heartbeat_ms = self.now_ms
            elif answer.error_code == NONE and not answer.is_fenced and not b.serving:
                b.serving = True
                self.log(f"broker {b.node_id} unfenced: publishes its image at "
                         f"{b.image.offset} and serves")
                self._on_metadata(b, b.image, first=True)
                for p, view in b.views.items():
                    if view.leader == b.node_id:
                        log = b.disk.logs[p]
                        self.checker.on_leader_start(b, p, view.leader_epoch)
                        self.checker.on_exposed(b, p, view.leader_epoch, 0, log.high_watermark,
                                                self.brokers)
        elif kind == "metadata_answer":
            if b.meta_in_flight is None or b.meta_in_flight[0] != body["corr"]:
                return
            b.meta_in_flight = None
            image = b.image
            for offset, records in body["batches"]:
                if offset <= image.offset:
                    continue
                image = apply(image, records, offset)
                b.disk.metadata.append((offset, records))
            if not b.serving:
                b.image = image  # not published yet
            elif image is not b.image:
                self._on_metadata(b, image)
        elif kind == "alter_answer":
            p = body["partition"]
            b.alter_in_flight.pop(p, None)
            a: CC.AlterPartitionAnswer = body["answer"]
            view = b.views.get(p)
            if view is None:
                return
            if a.error_code == NONE and isr_answer_applies(
                a.leader_epoch, a.partition_epoch, view.leader_epoch, view.partition_epoch
            ):
                view.isr = tuple(a.isr)
                view.partition_epoch = a.partition_epoch
                leader = b.leaders.get(p)
                if leader is not None:
                    leader.observe_partition_epoch(a.partition_epoch)
                self.log(f"broker {b.node_id} partition {p}: ISR now {view.isr}")
                self._maybe_advance_hw(b, p)
        elif kind == "fetch":
            if b.serving:
                self._answer_fetch(b, src, body)
        elif kind == "fetch_answer":
            self._on_fetch_answer(b, src, body)
        elif kind == "produce" and b.serving:
            self._on_produce(b, body)

    # -- the leader's side of a follower fetch (handlers/replica_fetch.py) -------------------------
    def _answer_fetch(self, b: SimBroker, follower: int, body: dict[str, Any]) -> None:
        answers = []
        for p, current_epoch, offset, last_epoch in body["partitions"]:
            view = b.views.get(p)
            log = b.disk.logs.get(p)
            if view is None or log is None or view.leader != b.node_id:
                answers.append({"p": p, "error": NOT_LEADER_OR_FOLLOWER})
                continue
            if current_epoch < view.leader_epoch:
                answers.append({"p": p, "error": FENCED_LEADER_EPOCH})
                continue
            if current_epoch > view.leader_epoch:
                answers.append({"p": p, "error": UNKNOWN_LEADER_EPOCH})
                continue
            diverging = diverging_epoch(log.epochs, 0, log.log_end_offset, offset, last_epoch)
            if diverging is not None:
                answers.append({"p": p, "error": NONE, "diverging": diverging,
                                "hw": log.high_watermark})
                continue
            if offset > log.log_end_offset:
                answers.append({"p": p, "error": OFFSET_OUT_OF_RANGE})
                continue
            leader = b.leaders.get(p)
            if leader is not None and leader.on_follower_fetch(
                follower, offset, log.log_end_offset, self.now_ms
            ):
                if follower not in view.isr and may_join_isr(
                    offset, log.high_watermark, log.epochs.entries, view.leader_epoch,
                    log.log_end_offset,
                ):
                    self._alter_isr(
                        b, p, [r for r in view.replicas if r in view.isr or r == follower])
                self._maybe_advance_hw(b, p)
            answers.append({"p": p, "error": NONE, "hw": log.high_watermark,
                            "batches": log.read(offset, self.s.fetch_max_batches)})
        self._send(b.node_id, follower, "fetch_answer", {"corr": body["corr"],
                                                          "partitions": answers})

    # -- the follower's side (broker/replica_fetcher.py) ------------------------------------------
    def _on_fetch_answer(self, b: SimBroker, leader_id: int, body: dict[str, Any]) -> None:
        in_flight = b.fetch_in_flight.get(leader_id)
        if in_flight is None or in_flight[0] != body["corr"]:
            return
        del b.fetch_in_flight[leader_id]
        sent = b.fetch_sent.pop(body["corr"], {})
        got_data = False
        failed = False
        for answer in body["partitions"]:
            p = answer["p"]
            view = b.views.get(p)
            if view is None or view.leader != leader_id or p not in sent:
                continue
            log = b.disk.logs[p]
            if (view.leader_epoch, log.log_end_offset) != sent[p]:
                continue  # changed while the fetch was out: the next fetch decides
            if answer["error"] != NONE:
                failed = True
                continue
            if "diverging" in answer:
                epoch, end_offset = answer["diverging"]
                target = truncation_offset(log.epochs, log.log_end_offset, epoch, end_offset)
                removed = log.truncate_to(target)
                self.stats["truncations"] += 1
                self.log(f"broker {b.node_id} partition {p}: leader {leader_id} says epoch "
                         f"{epoch} ends at {end_offset}: truncated to {log.log_end_offset}")
                self.checker.on_truncated(b, p, removed)
                got_data = True
                continue
            batches = answer["batches"]
            if batches:
                try:
                    log.append_as_follower(batches)
                except ValueError as e:
                    raise SimulationFailure(
                        f"broker {b.node_id} partition {p}: follower append from leader "
                        f"{leader_id} refused, the fetcher would stall: {e}") from e
                got_data = True
            log.high_watermark = follower_high_watermark(
                answer["hw"], log.log_end_offset, log.high_watermark)
        wait = 0 if got_data and not failed else self.s.fetch_wait_ms
        b.next_fetch_ms[leader_id] = self.now_ms + wait

    # -- produce (handlers/produce.py, acks=all) ----------------------------------------------------
    def _on_produce(self, b: SimBroker, body: dict[str, Any]) -> None:
        p = body["partition"]
        view = b.views.get(p)

        def answer(code: int, base: int = -1) -> None:
            self._send(b.node_id, PRODUCER, "produce_answer", {
                "request_id": body["request_id"], "partition": p, "error": code,
                "base_offset": base, "to": body["from"]})

        if view is None or view.leader != b.node_id:
            answer(NOT_LEADER_OR_FOLLOWER)
            return
        if len(view.isr) < MIN_INSYNC_REPLICAS:
            answer(NOT_ENOUGH_REPLICAS)
            return
        if len(b.pending) >= MAX_PENDING_ACKS:
            answer(REQUEST_TIMED_OUT)
            return
        log = b.disk.logs[p]
        base = log.append_as_leader(body["values"], view.leader_epoch)
        b.pending.append(PendingAck(p, log.log_end_offset, base, body["request_id"],
                                    body["from"], self.now_ms + self.s.request_timeout_ms))
        self._maybe_advance_hw(b, p)

    # -- the producer -------------------------------------------------------------------------------
    def _producer_tick(self) -> None:
        pr = self.producer
        if self.topic_id is None or pr.stopped:
            self._push(self.now_ms + 20, "producer_tick", None)
            return
        for p in range(self.s.partitions):
            flight = pr.in_flight.get(p)
            if flight is not None and self.now_ms - flight.sent_ms > self.s.request_timeout_ms + 50:
                del pr.in_flight[p]  # timed out: retry (it may still be appended)
                pr.retry_at_ms[p] = self.now_ms + 20
                pr.leader_guess.pop(p, None)
                flight = None
            if flight is not None or self.now_ms < pr.retry_at_ms.get(p, 0):
                continue
            if p not in pr.batch:
                count = self.rng.randint(1, 3)
                pr.batch[p] = tuple(range(pr.next_value, pr.next_value + count))
                pr.next_value += count
            target = pr.leader_guess.get(p)
            if target is None:
                target = self._metadata_for_producer(p)
                if target is None:
                    pr.retry_at_ms[p] = self.now_ms + 50
                    continue
                pr.leader_guess[p] = target
            pr.next_request_id += 1
            pr.in_flight[p] = InFlightProduce(pr.next_request_id, pr.batch[p], target,
                                              self.now_ms)
            self._send(PRODUCER, target, "produce", {
                "request_id": pr.next_request_id, "partition": p, "values": pr.batch[p],
                "from": pr.incarnation})
        self._push(self.now_ms + self.rng.choice([5, 20, 60]), "producer_tick", None)

    def _metadata_for_producer(self, p: int) -> int | None:
        """A Metadata request to a random serving broker: its image's leader."""
        serving = [b for b in self.brokers.values() if b.alive and b.serving]
        if not serving:
            return None
        b = self.rng.choice(serving)
        if self.faulty and (PRODUCER, b.node_id) in self.blocked:
            return None
        view = b.views.get(p)
        return view.leader if view is not None and view.leader >= 0 else None

    def _producer_handle(self, body: dict[str, Any]) -> None:
        pr = self.producer
        p = body["partition"]
        flight = pr.in_flight.get(p)
        if flight is None or flight.request_id != body["request_id"]:
            return  # an answer to an attempt this producer gave up on
        del pr.in_flight[p]
        if body["error"] == NONE:
            self.checker.on_ack(p, body["base_offset"], flight.values)
            self.log(f"ack partition {p} {flight.values} at {body['base_offset']}")
            pr.batch.pop(p, None)
            pr.acks += 1
            self.stats["acks"] += 1
        else:
            pr.leader_guess.pop(p, None)
            pr.retry_at_ms[p] = self.now_ms + 20

    # -- events ---------------------------------------------------------------------------------------
    def _step(self) -> None:
        at_ms, _, kind, payload = heapq.heappop(self.queue)
        assert at_ms >= self.now_ms
        self.now_ms = at_ms
        touched: SimBroker | None = None
        if kind == "deliver":
            src, dst, what, body, src_inc, dst_inc = payload
            if not self._alive(dst) or self._incarnation(dst) != dst_inc:
                return
            if not self._alive(src) or self._incarnation(src) != src_inc:
                return  # the sender died: its connection with it
            if self.faulty and (src, dst) in self.blocked:
                return
            if dst == CONTROLLER:
                self._controller_handle(src, what, body)
            elif dst == PRODUCER:
                self._producer_handle(body)
            else:
                touched = self.brokers[dst]
                self._broker_handle(touched, src, what, body)
        elif kind == "broker_tick":
            node_id, incarnation = payload
            b = self.brokers[node_id]
            if not b.alive or b.incarnation != incarnation:
                return
            touched = b
            self._broker_tick(b)
        elif kind == "controller_tick":
            if self.controller.alive and self.controller.incarnation == payload:
                self._controller_tick()
        elif kind == "producer_tick":
            self._producer_tick()
        elif kind == "crash":
            if self.faulty:
                alive = [b for b in self.brokers.values() if b.alive]
                leaders = [b for b in alive if b.leaders]
                if alive:
                    pick = leaders if leaders and self.rng.random() < 0.6 else alive
                    self._crash_broker(self.rng.choice(pick))
                self._push(self.now_ms + self._exp(self.s.crash_every_ms), "crash", None)
        elif kind == "controller_crash":
            if self.faulty and self.controller.alive:
                self.stats["controller_crashes"] += 1
                self.controller.alive = False
                self.controller.incarnation += 1
                self.log("crash controller")
                self._push(self.now_ms + self._exp(400), "controller_restart", None)
            if self.faulty:
                self._push(self.now_ms + self._exp(self.s.controller_crash_every_ms),
                           "controller_crash", None)
        elif kind == "controller_restart":
            if not self.controller.alive:
                self._controller_start()
        elif kind == "restart":
            b = self.brokers[payload]
            if not b.alive:
                self._broker_start(b)
        elif kind == "partition":
            if self.faulty:
                self._partition()
                self._push(self.now_ms + self._exp(self.s.partition_every_ms), "partition", None)
        elif kind == "heal":
            self.blocked = set()
            self.log("heal")
        if touched is not None and touched.alive:
            self.checker.check_broker(touched)

    def _partition(self) -> None:
        self.stats["partitions"] += 1
        nodes = [CONTROLLER, *BROKERS, PRODUCER]
        roll = self.rng.random()
        if roll < 0.4:  # cut one broker off from everyone
            side = {self.rng.choice(BROKERS)}
        elif roll < 0.6:  # the controller alone
            side = {CONTROLLER}
        else:
            side = {n for n in nodes if self.rng.random() < 0.5}
        self.blocked = {(a, b) for a in nodes for b in nodes if (a in side) != (b in side)}
        if roll > 0.9:  # some one-way links instead
            self.blocked = {(a, b) for a in nodes for b in nodes
                            if a != b and self.rng.random() < 0.2}
        self.log(f"partition {sorted(side)}")
        self._push(self.now_ms + self._exp(1200), "heal", None)

    # -- a whole run --------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except Exception as e:
            raise SimulationFailure(
                f"seed {self.seed} failed at step {self.steps_run}, t={self.now_ms} ms: "
                f"{type(e).__name__}: {e}\nsettings: {self.s}\n"
                f"replay: ODRADEK_REPL_SIM_SEED={self.seed} pytest "
                f"tests/simulation/test_replication_simulation.py -k replays -s\n"
                f"--- last {len(self.trace)} events ---\n" + "\n".join(self.trace)
            ) from e

    def _run(self) -> None:
        self._controller_start()
        for b in self.brokers.values():
            self._broker_start(b)
        self._push(1, "producer_tick", None)
        if self.s.crash_every_ms:
            self._push(1000 + self._exp(self.s.crash_every_ms), "crash", None)
        if self.s.controller_crash_every_ms:
            self._push(1000 + self._exp(self.s.controller_crash_every_ms), "controller_crash",
                       None)
        if self.s.partition_every_ms:
            self._push(1000 + self._exp(self.s.partition_every_ms), "partition", None)
        while self.steps_run < self.steps and self.queue:
            self._step()
            self.steps_run += 1
        self._check_liveness()

    def _check_liveness(self) -> None:
        """Heal, restart everything; the producer must get a batch acknowledged
        and then every replica must converge, within LIVENESS_BOUND_MS."""
        self.faulty = False
        self.blocked = set()
        self.log("liveness: heal, restart all")
        if not self.controller.alive:
            self._controller_start()
        for b in self.brokers.values():
            if not b.alive:
                self._broker_start(b)
        self.queue = [e for e in self.queue if e[2] not in (
            "crash", "controller_crash", "partition", "heal", "restart", "controller_restart")]
        heapq.heapify(self.queue)
        deadline_ms = self.now_ms + LIVENESS_BOUND_MS
        acks_before = self.producer.acks
        while self.now_ms < deadline_ms and self.queue:
            if not self.producer.stopped and self.producer.acks > acks_before and all(
                p not in self.producer.in_flight for p in range(self.s.partitions)
            ):
                self.producer.stopped = True
                self.log("liveness: a batch acknowledged after healing; producer stops")
            if self.producer.stopped and self._converged():
                self._check_final()
                return
            self._step()
            self.steps_run += 1
        raise SimulationFailure(
            f"no liveness: {LIVENESS_BOUND_MS} ms after healing: producer acks "
            f"{self.producer.acks - acks_before} since, " + "; ".join(
                f"broker {b.node_id}: serving={b.serving} " + ", ".join(
                    f"p{p} leader={v.leader}@{v.leader_epoch} isr={v.isr} "
                    f"leo={b.disk.logs[p].log_end_offset} hw={b.disk.logs[p].high_watermark}"
                    for p, v in sorted(b.views.items()))
                for b in self.brokers.values()))

    def _converged(self) -> bool:
        image = self.controller.image
        topic = image.topics_by_name.get(TOPIC)
        if topic is None:
            return False
        for p, pimg in topic.partitions.items():
            if pimg.leader < 0 or set(pimg.isr) != set(BROKERS):
                return False
            leader_log = self.brokers[pimg.leader].disk.logs.get(p)
            if leader_log is None:
                return False
            for b in self.brokers.values():
                log = b.disk.logs.get(p)
                view = b.views.get(p)
                if log is None or view is None or (view.leader, view.isr) != (
                    pimg.leader, pimg.isr
                ):
                    return False
                if log.values != leader_log.values or log.epochs_at != leader_log.epochs_at:
                    return False
                if log.high_watermark != log.log_end_offset:
                    return False
        return True

    def _check_final(self) -> None:
        for p in range(self.s.partitions):
            log = self.brokers[BROKERS[0]].disk.logs[p]
            for offset, entry in self.checker.exposed.get(p, {}).items():
                if log.entry(offset) != entry:
                    raise SimulationFailure(
                        f"partition {p}: exposed record {offset}={entry} is {log.entry(offset)} "
                        "after convergence")
            for base, values in self.checker.acked.get(p, []):
                got = tuple(log.values[base:base + len(values)])
                if got != values:
                    raise SimulationFailure(
                        f"partition {p}: acknowledged batch {values} at {base} reads {got}")
            for b in self.brokers.values():
                if b.disk.logs[p].epochs.entries != log.epochs.entries:
                    # the caches may differ only by epochs that wrote nothing
                    mine = _written_epochs(b.disk.logs[p])
                    if mine != _written_epochs(log):
                        raise SimulationFailure(
                            f"partition {p}: epoch caches diverge: {b.node_id} "
                            f"{b.disk.logs[p].epochs.entries} vs {log.epochs.entries}")


def _written_epochs(log: ReplicaLog) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for offset, epoch in enumerate(log.epochs_at):
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return out


def _brief(records: list[R.MetadataRecord]) -> str:
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
