"""The brokers of the replication simulator, as the asyncio shells in `broker/` run them.

Start, crash and restart, the metadata image each publishes, ISR changes through
AlterPartition, the leader's side of a follower fetch (`handlers/replica_fetch.py`),
the follower's side (`broker/replica_fetcher.py`) and acks=all produce
(`handlers/produce.py`), all through odradek's pure `replication/` functions. A part
of `ReplicationSimulation` (replication.py) over `SimulationBase`.
"""

from __future__ import annotations

from typing import Any

from odradek.metadata import cluster_control as CC
from odradek.metadata.image import MetadataImage, apply
from odradek.protocol.errors import OPERATION_NOT_ATTEMPTED
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
from tests.simulation.replication_nodes import (
    CONTROLLER,
    FENCED_LEADER_EPOCH,
    MAX_PENDING_ACKS,
    MIN_INSYNC_REPLICAS,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    PRODUCER,
    REQUEST_TIMED_OUT,
    TOPIC,
    UNKNOWN_LEADER_EPOCH,
    PartitionView,
    PendingAck,
    SimBroker,
    SimulationBase,
)
from tests.simulation.scheduling import SimulationFailure


class BrokerSide(SimulationBase):
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
                if view.isr == (b.node_id,) and not (self.elr and MIN_INSYNC_REPLICAS > 1):
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
        strict = self.elr and len(view.isr) < MIN_INSYNC_REPLICAS  # KIP-966's strict min ISR
        if hw is not None and hw > log.high_watermark and not strict:
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
            elif a.error_code in (CC.INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED):
                # refused at the proposal's partition epoch: nothing committed
                leader = b.leaders.get(p)
                if leader is not None:
                    leader.refused(body["partition_epoch"])
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
