"""The leader's side of replication: the asyncio shell around `replication/leader.py`.

For each partition this node leads it keeps a `PartitionLeader` (follower
fetch offsets and catch-up times; the rules are there) and acts on it: the
high watermark moves when the smallest log end offset over the ISR does,
ISR expansion and shrink go to the controller as AlterPartition (one in
flight per partition; the answer's ISR applies at once, the metadata log
says the same a moment later), and acks=all waits
(`wait_for_high_watermark`) until the high watermark passes the batch, the
leadership goes, or the request timeout ends.

The ISR counted for the high watermark is the maximal ISR
(`PartitionLeader.maximal_isr`): the one in the metadata image or a newer
AlterPartition answer (the replica manager never lets an older image take it
back), plus the followers asked for since. A shrink is not counted before the
controller has committed it, an expansion from the moment it is asked, so the
high watermark never passes what any ISR the controller may have committed has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from ..metadata.elr import enabled as elr_enabled
from ..protocol import errors as E
from ..protocol.client import stop_tasks
from .leader import (
    PartitionLeader,
    acks_all_outcome,
    isr_answer_applies,
    may_join_isr,
)
from .node import ReplicaHost
from .purgatory import FetchPurgatory
from .quota import LEADER, ReplicationQuota

if TYPE_CHECKING:
    from .replica_manager import Partition


class ReplicationHost(ReplicaHost, Protocol):
    """What leader-side replication needs of its node (the Broker wires it)."""

    async def alter_partition(self, topic_id: str, partition: int, leader_epoch: int,
                              partition_epoch: int, new_isr: list[int]) -> Any: ...

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


# AlterPartition errors that say the controller looked at the proposal at its
# partition epoch and did not commit it (Kafka's leader resets to its committed
# ISR on these; on the others the metadata log settles the outcome).
_REFUSED = frozenset({E.OPERATION_NOT_ATTEMPTED, E.INELIGIBLE_REPLICA})


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class LeaderReplication:
    def __init__(self, broker: ReplicationHost) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.followers: dict[TopicPartition, PartitionLeader] = {}
        self.hw_waiters = FetchPurgatory()
        self._isr_in_flight: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._shrink_task: asyncio.Task[None] | None = None
        # ISR changes this leader made (Kafka's IsrShrinksPerSec / IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.lag_time_max_ms: int = broker.config.get("replica.lag.time.max.ms")
        # bytes answered to throttled out-of-sync followers (handlers/replica_fetch.py)
        self.quota = ReplicationQuota(
            LEADER, self.node_id, broker.config.get("leader.replication.throttled.rate"))

    # -- following leadership ---------------------------------------------------------

    def sync(self, part: Partition) -> None:
        """The partition's metadata changed: start, keep or drop its follower states."""
        key = (part.topic, part.partition)
        if part.leader != self.node_id:
            self.followers.pop(key, None)
        else:
            leader = self.followers.get(key)
            if leader is None:
                leader = self.followers[key] = PartitionLeader(self.node_id)
            leader.sync_replicas(part.replicas, now_ms())
            leader.observe_partition_epoch(part.partition_epoch)
            self.maybe_advance_high_watermark(part)
        # waiters re-check leadership and the ISR
        self.hw_waiters.notify(key)

    def forget(self, key: TopicPartition) -> None:
        self.followers.pop(key, None)
        self.hw_waiters.notify(key)

    # -- the high watermark ---------------------------------------------------------------

    def maybe_advance_high_watermark(self, part: Partition) -> bool:
        if part.leader != self.node_id or part.log.offline:
            return False
        plog = part.log
        if len(part.isr) < plog.config.min_insync_replicas and elr_enabled(self.broker.image):
            # KIP-966's strict min ISR: what the high watermark covers is on
            # min.insync.replicas replicas, so a replica that leaves a short ISR
            # still has it all (an eligible leader replica, metadata/elr.py)
            return False
        leader = self.followers.get((part.topic, part.partition))
        hw = (plog.log_end_offset if leader is None
              else leader.high_watermark(part.isr, plog.log_end_offset))
        if hw is None or hw <= plog.high_watermark:
            return False
        plog.set_high_watermark(hw)
        key = (part.topic, part.partition)
        self.hw_waiters.notify(key)
        # consumers parked on this partition may now see records (followers
        # parked on it read to the log end: the HW alone gives them nothing)
        self.broker.replica_manager.purgatory.notify_consumers(key)
        return True

    def on_leader_append(self, part: Partition) -> None:
        self.maybe_advance_high_watermark(part)

    async def wait_for_high_watermark(
        self, part: Partition, required_offset: int, deadline: float
    ) -> int:
        """acks=all: 0 once the high watermark reaches `required_offset` with
        enough replicas in the ISR, else the Kafka error code."""
        key = (part.topic, part.partition)
        rm = self.broker.replica_manager
        while True:
            if rm.partitions.get(key) is not part or part.leader != self.node_id:
                return E.NOT_LEADER_OR_FOLLOWER
            outcome = acks_all_outcome(part.log.high_watermark, required_offset,
                                       len(part.isr), part.log.config.min_insync_replicas)
            if outcome is not None:
                return outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return E.REQUEST_TIMED_OUT
            await self.hw_waiters.wait_for_any([key], remaining)

    # -- follower fetches ------------------------------------------------------------------

    def on_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        leader = self.followers.get((part.topic, part.partition))
        plog = part.log
        if leader is None or not leader.on_follower_fetch(
            replica_id, fetch_offset, plog.log_end_offset, now_ms()
        ):
            return
        if replica_id not in part.isr and self._isr_eligible(replica_id) and may_join_isr(
            fetch_offset, plog.high_watermark, plog.leader_epoch_cache.entries,
            part.leader_epoch, plog.log_end_offset,
        ):
            self._alter_isr(part, [r for r in part.replicas if r in part.isr or r == replica_id])
        self.maybe_advance_high_watermark(part)

    def under_replicated(self) -> int:
        """Partitions this broker leads whose ISR lacks a replica."""
        rm = self.broker.replica_manager
        return sum(1 for key in list(self.followers)
                   if (p := rm.partitions.get(key)) is not None and len(p.isr) < len(p.replicas))

    def _isr_eligible(self, replica_id: int) -> bool:
        """Kafka's leader proposes no follower the controller would refuse: a
        broker fenced or in controlled shutdown (its dir may have failed)."""
        b = self.broker.image.brokers.get(replica_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    # -- ISR shrink ------------------------------------------------------------------------------

    def start(self) -> None:
        self._shrink_task = asyncio.get_running_loop().create_task(self._shrink_loop())

    async def stop(self) -> None:
        await stop_tasks([self._shrink_task, *self._tasks])

    async def _shrink_loop(self) -> None:
        interval_s = max(self.lag_time_max_ms / 2, 50) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.shrink_lagging(now_ms())
            except Exception:
                log.exception("ISR shrink round failed")

    def shrink_lagging(self, t: int) -> None:
        rm = self.broker.replica_manager
        for key, leader in list(self.followers.items()):
            part = rm.partitions.get(key)
            if part is None or part.leader != self.node_id:
                continue
            out = leader.lagging(part.isr, t, self.lag_time_max_ms)
            if out:
                log.info("%s-%d: shrinking ISR %s: %s lagging for more than "
                         "replica.lag.time.max.ms=%d", part.topic, part.partition,
                         list(part.isr), out, self.lag_time_max_ms)
                self._alter_isr(part, [r for r in part.isr if r not in out])

    # -- AlterPartition ----------------------------------------------------------------------

    def _alter_isr(self, part: Partition, new_isr: list[int]) -> None:
        key = (part.topic, part.partition)
        if key in self._isr_in_flight:
            return
        leader = self.followers.get(key)
        if leader is None:
            return
        # its additions count for the high watermark until the outcome is known
        leader.propose_isr(part.isr, new_isr, part.partition_epoch)
        self._isr_in_flight.add(key)
        task = asyncio.get_running_loop().create_task(self._send_alter(part, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_alter(self, part: Partition, new_isr: list[int]) -> None:
        key = (part.topic, part.partition)
        proposed_epoch = part.partition_epoch
        try:
            answer = await self.broker.alter_partition(
                str(part.topic_id), part.partition, part.leader_epoch, part.partition_epoch,
                new_isr,
            )
            if answer.error_code == 0 and isr_answer_applies(
                answer.leader_epoch, answer.partition_epoch, part.leader_epoch,
                part.partition_epoch,
            ):
                before = set(part.isr)
                part.isr = tuple(answer.isr)
                self.isr_shrinks += bool(before - set(part.isr))
                self.isr_expands += bool(set(part.isr) - before)
                part.partition_epoch = answer.partition_epoch
                leader = self.followers.get(key)
                if leader is not None:
                    leader.observe_partition_epoch(answer.partition_epoch)
                log.info("%s-%d: ISR now %s", part.topic, part.partition, list(part.isr))
                self.maybe_advance_high_watermark(part)
                self.hw_waiters.notify(key)
            elif answer.error_code:
                log.info("%s-%d: AlterPartition %s answered error %d", part.topic,
                         part.partition, new_isr, answer.error_code)
                leader = self.followers.get(key)
                if leader is not None and answer.error_code in _REFUSED:
                    # a definite no at this partition epoch: back to the committed ISR
                    leader.refused(proposed_epoch)
                    self.maybe_advance_high_watermark(part)
                    self.hw_waiters.notify(key)
        except Exception as e:  # noqa: BLE001 - any failure: log, back off, retry later
            log.warning("%s-%d: AlterPartition failed: %s", part.topic, part.partition, e)
            await asyncio.sleep(0.1)
        finally:
            self._isr_in_flight.discard(key)
