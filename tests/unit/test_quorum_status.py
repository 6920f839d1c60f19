"""DescribeQuorum's numbers: Kafka's caught-up rule, the observer table's bounds."""

from __future__ import annotations

from odradek.metadata import quorum_status as Q
from odradek.raft.leader_state import LeaderState, ReplicaState


def test_caught_up_is_now_at_the_end_or_the_previous_fetch_when_it_reached_that_end():
    r = ReplicaState(2)
    r.record_fetch(5, 10, 1000)  # behind, no previous fetch: never caught up
    assert r.last_caught_up_ms == -1 and r.end_offset == 5 and r.last_fetch_ms == 1000
    r.record_fetch(10, 12, 2000)  # reached the leader's end of the previous fetch (10)
    assert r.last_caught_up_ms == 1000
    r.record_fetch(12, 12, 3000)  # at the end now
    assert r.last_caught_up_ms == 3000


def test_describe_lists_voters_with_the_leader_caught_up_now_and_observers_per_epoch():
    leader = LeaderState(1, 4, 0, frozenset({1, 2, 3}), now_ms=100)
    leader.update_replica(2, 7, 150, 7)
    observers = Q.ObserverTable()
    observers.fetched(4, 9, 6, 7, 160)
    observers.fetched(3, 8, 6, 7, 160)  # an older epoch's fetch resets the table
    observers.fetched(4, 9, 7, 7, 170)
    s = Q.describe(leader, frozenset({1, 2, 3}), 7, observers, 200, wall_offset_ms=1000)
    assert [(v.replica_id, v.log_end_offset) for v in s.voters] == [(1, 7), (2, 7), (3, -1)]
    assert s.voters[0].last_caught_up_ms == 1200 and s.voters[1].last_fetch_ms == 1150
    assert [(o.replica_id, o.log_end_offset, o.last_caught_up_ms) for o in s.observers] == [
        (9, 7, 1170)]
    assert Q.describe(leader, frozenset({1, 2, 3}), 7, observers,
                      170 + Q.OBSERVER_TIMEOUT_MS + 1).observers == ()
