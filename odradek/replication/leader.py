"""The leader's view of one partition's followers: fetch offsets, the ISR, the high watermark.

Theory of operation (Kafka's `Partition` and `Replica`)
-------------------------------------------------------
For each follower the leader keeps the offset of its last fetch (its log end
offset as far as the leader knows) and when it last caught up:

* `last_caught_up_ms` is the fetch time when the fetch reached the leader's log
  end offset, or the previous fetch time when the fetch reached the log end
  offset the leader had at that previous fetch.
* The high watermark is the smallest log end offset over the ISR (the leader's
  own included). A follower whose fetch state is unknown (a new leader) holds
  it where it is until it fetches. It never moves back.
* The ISR counted for the high watermark is the *maximal* ISR (Kafka's
  `maximalIsr`): the last one the leader knows committed, plus every follower
  it has asked the controller to add since. Until the leader learns the
  outcome from a newer partition epoch (the answer, or the metadata log) the
  expansion may be committed already, and then a follower the leader does not
  wait for could be elected without the records acknowledged meanwhile (the
  replication simulator found exactly that). A pending shrink needs nothing:
  the committed ISR is the larger one until the shrink is known.
* A follower out of the ISR joins when it reaches the high watermark and the
  start of the leader's epoch (`may_join_isr`); an ISR follower that has not
  caught up for `replica.lag.time.max.ms` leaves (`lagging`). Both go to the
  controller as AlterPartition; the leader's shell sends one at a time per
  partition.
* acks=all is answered once the high watermark passes the batch
  (`acks_all_outcome`), with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR has
  fallen below `min.insync.replicas` meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

UNKNOWN_OFFSET = -1
NONE = 0
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0


@dataclass(slots=True)
class PartitionLeader:
    """The follower states of one partition this node leads."""

    node_id: int
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # followers proposed for the ISR (AlterPartition) since `pending_partition_epoch`
    pending_additions: frozenset[int] = frozenset()
    pending_partition_epoch: int = -1

    def propose_isr(self, isr: Iterable[int], new_isr: Iterable[int],
                    partition_epoch: int) -> None:
        """An AlterPartition from `isr` to `new_isr`, based on `partition_epoch`,
        goes to the controller: its additions count until the outcome is known."""
        added = frozenset(new_isr) - frozenset(isr)
        if partition_epoch != self.pending_partition_epoch:
            self.pending_additions = frozenset()
            self.pending_partition_epoch = partition_epoch
        self.pending_additions |= added

    def observe_partition_epoch(self, partition_epoch: int) -> None:
        """The leader now knows the ISR committed at `partition_epoch`: proposals
        based on an older epoch are settled (committed or refused)."""
        if partition_epoch > self.pending_partition_epoch:
            self.pending_additions = frozenset()
            self.pending_partition_epoch = partition_epoch

    def refused(self, partition_epoch: int) -> None:
        """The controller refused, at `partition_epoch`, the proposal based on it
        (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED): nothing was committed, so
        its additions stop counting. Without this a follower refused because it
        was fenced (its log dir failed) would hold the high watermark forever:
        it fetches no more, and no newer partition epoch comes to settle it."""
        if partition_epoch == self.pending_partition_epoch:
            self.pending_additions = frozenset()

    def maximal_isr(self, isr: Iterable[int]) -> set[int]:
        return set(isr) | self.pending_additions

    def sync_replicas(self, replicas: Iterable[int], now_ms: int) -> None:
        """The replica set changed (or leadership began): new followers start
        caught up as of now, removed ones go."""
        wanted = [r for r in replicas if r != self.node_id]
        for r in wanted:
            if r not in self.followers:
                self.followers[r] = FollowerState(last_caught_up_ms=now_ms)
        for r in list(self.followers):
            if r not in wanted:
                del self.followers[r]

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """A follower fetched at `fetch_offset`; False if it is not a replica here."""
        st = self.followers.get(replica_id)
        if st is None:
            return False
        leo = leader_log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = now_ms
        elif st.last_fetch_leader_leo != UNKNOWN_OFFSET and fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = now_ms
        st.log_end_offset = fetch_offset
        return True

    def high_watermark(self, isr: Iterable[int], leader_log_end_offset: int) -> int | None:
        """The smallest log end offset over the maximal ISR, or None while the
        offset of a follower in it is unknown (the high watermark then stays)."""
        hw = leader_log_end_offset
        for r in self.maximal_isr(isr) if self.pending_additions else isr:
            if r == self.node_id:
                continue
            st = self.followers.get(r)
            if st is None or st.log_end_offset == UNKNOWN_OFFSET:
                return None
            hw = min(hw, st.log_end_offset)
        return hw

    def lagging(self, isr: Iterable[int], now_ms: int, lag_time_max_ms: int) -> list[int]:
        """ISR followers that have not caught up for `replica.lag.time.max.ms`."""
        return [
            r for r in isr
            if r != self.node_id and r in self.followers
            and now_ms - self.followers[r].last_caught_up_ms > lag_time_max_ms
        ]


def may_join_isr(
    fetch_offset: int, high_watermark: int, epoch_entries: Sequence[tuple[int, int]],
    leader_epoch: int, leader_log_end_offset: int,
) -> bool:
    """A follower out of the ISR may join once it has the high watermark and
    the start of this leader's epoch (below it the logs may still diverge)."""
    epoch_start = next(
        (start for epoch, start in epoch_entries if epoch == leader_epoch),
        leader_log_end_offset,
    )
    return fetch_offset >= high_watermark and fetch_offset >= epoch_start


def isr_answer_applies(
    answer_leader_epoch: int, answer_partition_epoch: int, leader_epoch: int,
    partition_epoch: int,
) -> bool:
    """An AlterPartition answer without error sets the leader's ISR only in its
    current leader epoch and when it is not older than what the leader knows."""
    return answer_leader_epoch == leader_epoch and answer_partition_epoch >= partition_epoch


def acks_all_outcome(
    high_watermark: int, required_offset: int, isr_size: int, min_insync_replicas: int
) -> int | None:
    """acks=all for a batch ending before `required_offset`: None while it waits
    for the high watermark, else the answer's error code."""
    if high_watermark < required_offset:
        return None
    if isr_size < min_insync_replicas:
        return NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return NONE
