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

The simulator is in three modules: `replication_nodes.py` (settings, the
simulated nodes, the network), `replication_brokers.py` (the broker
processes) and this one (the controller, the producer, the events and the
checks of a whole run).

A failing schedule raises `SimulationFailure` with its seed and the tail of
its trace; ``ODRADEK_REPL_SIM_SEED=<seed>`` replays exactly that schedule.
"""

from __future__ import annotations

import heapq
import random
from typing import Any

from odradek.metadata import cluster_control as CC
from odradek.metadata import elr as ELR
from odradek.metadata import features as F
from odradek.metadata import records as R
from odradek.metadata.controller import Controller, NewTopic
from odradek.metadata.image import apply
from tests.simulation.replication_brokers import BrokerSide
from tests.simulation.replication_nodes import (
    BROKERS,
    CONTROLLER,
    LIVENESS_BOUND_MS,
    MIN_INSYNC_REPLICAS,
    NONE,
    PRODUCER,
    TOPIC,
    InFlightProduce,
    SimBroker,
    brief,
    written_epochs,
)
from tests.simulation.scheduling import SimulationFailure


class ReplicationSimulation(BrokerSide):
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
                if "eligible_leader_replicas" in r:
                    self.stats["elr_changes"] += 1
        self.log(f"controller commits {offset}: {brief(records)}")

    def _controller_tick(self) -> None:
        c = self.controller
        assert c.control is not None
        image = c.image
        if TOPIC not in image.topics_by_name and sum(
            1 for b in image.brokers.values() if not b.fenced
        ) >= len(BROKERS):
            if self.elr and not ELR.enabled(image):
                self._commit([R.feature_level_record(F.ELIGIBLE_LEADER_REPLICAS_VERSION, 1)])
                image = c.image
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
                "corr": body["corr"], "partition": body["partition"], "answer": answer,
                "partition_epoch": body["partition_epoch"]})
        elif kind == "metadata":
            after = [(o, recs) for o, recs in c.log if o >= body["from_offset"]][:20]
            self._send(CONTROLLER, src, "metadata_answer", {"corr": body["corr"],
                                                             "batches": after})

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
                    mine = written_epochs(b.disk.logs[p])
                    if mine != written_epochs(log):
                        raise SimulationFailure(
                            f"partition {p}: epoch caches diverge: {b.node_id} "
                            f"{b.disk.logs[p].epochs.entries} vs {log.epochs.entries}")
