"""The leader's side of replication: follower fetch offsets, the high watermark, the ISR.

For each partition this node leads it keeps every follower's log end offset
(the offset of its last Fetch) and when it last caught up, as Kafka's
`Partition`/`Replica` do:

* `last_caught_up_ms` is the fetch time when the fetch reached the leader's
  log end offset, or the previous fetch time when the fetch reached the log
  end offset the leader had at that previous fetch.
* The high watermark is the smallest log end offset over the ISR (the
  leader's own included) and never moves back. A follower whose fetch state
  is unknown (a new leader) holds it where it is until it fetches.
* A follower out of the ISR that reaches the high watermark (and the start of
  the leader's epoch) is added; an ISR follower that has not caught up for
  `replica.lag.time.max.ms` is removed. Both go to the controller as
  AlterPartition, one in flight per partition; the answer's ISR applies at
  once (the metadata log says the same a moment later).
* acks=all waits (`wait_for_high_watermark`) until the high watermark passes
  the batch, the leadership goes, or the request timeout ends.

The ISR this node sees is the one in its metadata image (or a newer
AlterPartition answer): a shrink is not counted before the controller has
committed it, so the high watermark never passes what the committed ISR has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .handlers import errors as E
from .kafka_client import stop_tasks
from .purgatory import FetchPurgatory
from .replication_quota import LEADER, ReplicationQuota

if TYPE_CHECKING:
    from .broker import Broker
    from .replica_manager import Partition

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
UNKNOWN_OFFSET = -1
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0


class LeaderReplication:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.followers: dict[TopicPartition, dict[int, FollowerState]] = {}
        self.hw_waiters = FetchPurgatory()
        self._isr_in_flight: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._shrink_task: asyncio.Task[None] | None = None
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
            states = self.followers.setdefault(key, {})
            t = now_ms()
            for r in part.replicas:
                if r != self.node_id and r not in states:
                    states[r] = FollowerState(last_caught_up_ms=t)
            for r in list(states):
                if r not in part.replicas:
                    del states[r]
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
        states = self.followers.get((part.topic, part.partition), {})
        hw = plog.log_end_offset
        for r in part.isr:
            if r == self.node_id:
                continue
            st = states.get(r)
            if st is None or st.log_end_offset == UNKNOWN_OFFSET:
                return False
            hw = min(hw, st.log_end_offset)
        if hw <= plog.high_watermark:
            return False
        plog.set_high_watermark(hw)
        key = (part.topic, part.partition)
        self.hw_waiters.notify(key)
        # consumers parked on this partition may now see records
        self.broker.replica_manager.purgatory.notify(key)
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
            if part.log.high_watermark >= required_offset:
                if len(part.isr) < part.log.config.min_insync_replicas:
                    return NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return E.NONE
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return E.REQUEST_TIMED_OUT
            await self.hw_waiters.wait_for_any([key], remaining)

    # -- follower fetches ------------------------------------------------------------------

    def on_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        key = (part.topic, part.partition)
        states = self.followers.get(key)
        if states is None or replica_id not in states:
            return
        st = states[replica_id]
        t = now_ms()
        leo = part.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = t
        elif st.last_fetch_leader_leo != UNKNOWN_OFFSET and fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = t
        st.log_end_offset = fetch_offset
        if replica_id not in part.isr and self._may_join_isr(part, fetch_offset):
            self._alter_isr(part, [r for r in part.replicas if r in part.isr or r == replica_id])
        self.maybe_advance_high_watermark(part)

    def _may_join_isr(self, part: Partition, fetch_offset: int) -> bool:
        plog = part.log
        # where this leader's epoch starts: a follower below it may still diverge
        epoch_start = next(
            (start for epoch, start in plog.leader_epoch_cache.entries
             if epoch == part.leader_epoch), plog.log_end_offset,
        )
        return fetch_offset >= plog.high_watermark and fetch_offset >= epoch_start

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
        for key, states in list(self.followers.items()):
            part = rm.partitions.get(key)
            if part is None or part.leader != self.node_id:
                continue
            out = [
                r for r in part.isr
                if r != self.node_id and r in states
                and t - states[r].last_caught_up_ms > self.lag_time_max_ms
            ]
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
        self._isr_in_flight.add(key)
        task = asyncio.get_running_loop().create_task(self._send_alter(part, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_alter(self, part: Partition, new_isr: list[int]) -> None:
        key = (part.topic, part.partition)
        try:
            answer = await self.broker.alter_partition(
                str(part.topic_id), part.partition, part.leader_epoch, part.partition_epoch,
                new_isr,
            )
            if answer.error_code == 0 and answer.leader_epoch == part.leader_epoch and (
                answer.partition_epoch >= part.partition_epoch
            ):
                part.isr = tuple(answer.isr)
                part.partition_epoch = answer.partition_epoch
                log.info("%s-%d: ISR now %s", part.topic, part.partition, list(part.isr))
                self.maybe_advance_high_watermark(part)
                self.hw_waiters.notify(key)
            elif answer.error_code:
                log.info("%s-%d: AlterPartition %s answered error %d", part.topic,
                         part.partition, new_isr, answer.error_code)
        except Exception as e:  # noqa: BLE001 - any failure: log, back off, retry later
            log.warning("%s-%d: AlterPartition failed: %s", part.topic, part.partition, e)
            await asyncio.sleep(0.1)
        finally:
            self._isr_in_flight.discard(key)
