"""The leader's rules (replication/leader.py) on their own: follower catch-up
times, the maximal ISR, the high watermark, ISR joins and shrinks, acks=all."""

from __future__ import annotations

from odradek.replication.leader import (
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    PartitionLeader,
    acks_all_outcome,
    may_join_isr,
)


def _leader() -> PartitionLeader:
    leader = PartitionLeader(node_id=1)
    leader.sync_replicas([1, 2, 3], now_ms=0)
    return leader


def test_high_watermark_is_the_smallest_log_end_over_the_isr() -> None:
    leader = _leader()
    assert leader.high_watermark((1, 2), 10) is None  # 2 has not fetched yet
    leader.on_follower_fetch(2, 7, 10, now_ms=5)
    assert leader.high_watermark((1, 2), 10) == 7
    # 3 is out of the ISR: it does not hold the high watermark back
    assert leader.high_watermark((1, 2), 10) == 7


def test_a_follower_asked_for_the_isr_counts_until_the_outcome_is_known() -> None:
    # Found by the replication simulator: the controller commits an ISR
    # expansion whose answer the leader never gets; if the leader kept counting
    # only the old ISR, it would acknowledge records the new member lacks, and
    # that member may then be elected.
    leader = _leader()
    leader.on_follower_fetch(2, 10, 10, now_ms=5)
    leader.on_follower_fetch(3, 6, 10, now_ms=5)
    assert leader.high_watermark((1, 2), 10) == 10
    leader.propose_isr((1, 2), (1, 2, 3), partition_epoch=4)
    assert leader.maximal_isr((1, 2)) == {1, 2, 3}
    assert leader.high_watermark((1, 2), 10) == 6
    # an answer or image at the same partition epoch settles nothing
    leader.observe_partition_epoch(4)
    assert leader.high_watermark((1, 2), 10) == 6
    # the image at a newer partition epoch says what was committed
    leader.observe_partition_epoch(5)
    assert leader.maximal_isr((1, 2)) == {1, 2}
    assert leader.high_watermark((1, 2), 10) == 10


def test_proposals_on_the_same_partition_epoch_accumulate() -> None:
    leader = _leader()
    leader.propose_isr((1,), (1, 2), partition_epoch=2)
    leader.propose_isr((1,), (1, 3), partition_epoch=2)
    assert leader.maximal_isr((1,)) == {1, 2, 3}
    leader.propose_isr((1, 2), (1, 2), partition_epoch=3)  # based on a newer epoch
    assert leader.maximal_isr((1, 2)) == {1, 2}


def test_a_shrink_is_not_counted_before_it_is_committed() -> None:
    leader = _leader()
    leader.on_follower_fetch(2, 10, 10, now_ms=5)
    leader.on_follower_fetch(3, 4, 10, now_ms=5)
    leader.propose_isr((1, 2, 3), (1, 2), partition_epoch=1)
    assert leader.high_watermark((1, 2, 3), 10) == 4


def test_lagging_followers_are_those_not_caught_up_for_the_lag_time() -> None:
    leader = _leader()  # followers start caught up as of 0
    leader.on_follower_fetch(2, 10, 10, now_ms=100)  # at the log end: caught up at 100
    leader.on_follower_fetch(3, 5, 10, now_ms=100)   # behind: still caught up as of 0
    assert leader.lagging((1, 2, 3), now_ms=300, lag_time_max_ms=350) == []
    assert leader.lagging((1, 2, 3), now_ms=400, lag_time_max_ms=350) == [3]
    # reaching the log end the leader had at its previous fetch (10) counts as
    # caught up as of that previous fetch (100), as Kafka's Replica does
    leader.on_follower_fetch(3, 10, 12, now_ms=420)
    assert leader.lagging((1, 2, 3), now_ms=440, lag_time_max_ms=350) == []
    assert leader.lagging((1, 2, 3), now_ms=460, lag_time_max_ms=350) == [2, 3]


def test_a_follower_joins_at_the_high_watermark_and_the_epoch_start() -> None:
    entries = [(0, 0), (4, 20)]
    assert not may_join_isr(15, 15, entries, 4, 30)  # below this leader's epoch start
    assert not may_join_isr(21, 25, entries, 4, 30)  # below the high watermark
    assert may_join_isr(25, 25, entries, 4, 30)


def test_acks_all_waits_for_the_high_watermark_and_checks_min_insync() -> None:
    assert acks_all_outcome(9, 10, 3, 2) is None
    assert acks_all_outcome(10, 10, 3, 2) == 0
    assert acks_all_outcome(10, 10, 1, 2) == NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_refused_expansion_stops_counting_its_additions() -> None:
    # Seen on a 3-node cluster: a follower whose only log dir filled was fenced
    # and left the ISR; its last fetch, already at the high watermark, made the
    # leader ask to add it back; the controller refused (INELIGIBLE_REPLICA) at
    # that partition epoch. Counting it on would hold the high watermark (and
    # every acks=all produce) until some later epoch change, which never came.
    leader = _leader()
    leader.on_follower_fetch(2, 10, 10, now_ms=5)
    leader.on_follower_fetch(3, 8, 10, now_ms=5)
    leader.propose_isr((1, 2), (1, 2, 3), partition_epoch=4)
    assert leader.high_watermark((1, 2), 12) == 8
    leader.refused(3)  # an answer about an older proposal settles nothing
    assert leader.high_watermark((1, 2), 12) == 8
    leader.refused(4)
    assert leader.maximal_isr((1, 2)) == {1, 2}
    assert leader.high_watermark((1, 2), 12) == 10
