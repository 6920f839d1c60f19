"""The share-partition state machine (coordinator/share_partition.py): acquisition
locks, delivery counts, acknowledgements, the SPSO/SPEO window and its durable form."""

from __future__ import annotations

import uuid

from odradek.coordinator.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    NONE,
    REJECT,
    RELEASE,
    ShareLimits,
    SharePartition,
)
from odradek.coordinator.share_partitions import SharePartitionManager
from odradek.coordinator.share_state_store import ShareStateStore

LIMITS = ShareLimits(lock_duration_ms=1000, delivery_count_limit=3, max_in_flight=100)


def batches(*spans: tuple[int, int]) -> list[tuple[int, int, bool]]:
    return [(a, b, False) for a, b in spans]


def test_two_members_never_hold_the_same_record() -> None:
    sp = SharePartition(start_offset=0, limits=LIMITS)
    singles = batches(*((o, o) for o in range(10)))  # one record a batch
    a = sp.acquire("a", singles, 4, now_ms=0)
    b = sp.acquire("b", singles, 100, now_ms=0)
    assert a == [(0, 3, 1)]
    assert b == [(4, 9, 1)]
    assert sp.acquire("c", singles, 100, now_ms=0) == []
    sp.check()


def test_batches_are_acquired_whole_past_max_records() -> None:
    sp = SharePartition(start_offset=0, limits=LIMITS)
    assert sp.acquire("a", batches((0, 9), (10, 19)), 4, now_ms=0) == [(0, 9, 1)]
    assert sp.acquire("b", batches((0, 9), (10, 19)), 4, now_ms=0) == [(10, 19, 1)]


def test_accept_moves_the_start_offset_and_release_redelivers_with_a_higher_count() -> None:
    sp = SharePartition(start_offset=0, limits=LIMITS)
    sp.acquire("a", batches((0, 4)), 100, now_ms=0)
    assert sp.acknowledge("a", [(0, 1, (ACCEPT,)), (2, 2, (RELEASE,)), (3, 4, (REJECT,))]) == NONE
    assert sp.start_offset == 2 and sp.end_offset == 5
    assert sp.records[2].state == AVAILABLE and sp.records[3].state == ARCHIVED
    assert sp.acquire("b", batches((2, 4)), 100, now_ms=0) == [(2, 2, 2)]
    sp.check()


def test_lock_expiry_releases_and_the_limit_archives() -> None:
    sp = SharePartition(start_offset=10, limits=LIMITS)
    for delivery in (1, 2, 3):
        assert sp.acquire("a", batches((10, 10)), 1, now_ms=delivery * 5000) == [
            (10, 10, delivery)]
        assert sp.expire_locks(delivery * 5000 + 999) == 0
        assert sp.expire_locks(delivery * 5000 + 1000) == 1
    # delivered delivery_count_limit times: archived, and the window moves past it
    assert sp.start_offset == 11 and not sp.records


def test_acknowledgement_errors() -> None:
    sp = SharePartition(start_offset=0, limits=LIMITS)
    sp.acquire("a", batches(*((o, o) for o in range(10))), 5, now_ms=0)
    assert sp.acknowledge("b", [(0, 0, (ACCEPT,))]) == INVALID_RECORD_STATE  # not b's
    assert sp.acknowledge("a", [(5, 5, (ACCEPT,))]) == INVALID_RECORD_STATE  # not acquired
    assert sp.acknowledge("a", [(3, 1, (ACCEPT,))]) == INVALID_REQUEST  # first > last
    assert sp.acknowledge("a", [(0, 2, (ACCEPT, ACCEPT))]) == INVALID_REQUEST  # types count
    assert sp.acknowledge("a", [(0, 0, (9,))]) == INVALID_REQUEST  # unknown type
    assert sp.acknowledge("a", [(2, 3, (ACCEPT,)), (1, 1, (ACCEPT,))]) == INVALID_REQUEST
    # all or nothing: nothing above changed a record
    assert all(sp.records[o].member_id == "a" for o in range(5))
    assert sp.acknowledge("a", [(0, 4, (ACCEPT, GAP, RELEASE, REJECT, ACCEPT))]) == NONE
    assert [sp.records[o].state for o in (2, 3, 4)] == [AVAILABLE, ARCHIVED, ACKNOWLEDGED]


def test_window_is_bounded_and_control_batches_are_never_delivered() -> None:
    sp = SharePartition(start_offset=0, limits=ShareLimits(1000, 5, 10))
    got = sp.acquire("a", [(0, 0, True), (1, 50, False)], 1000, now_ms=0)
    assert got == [(1, 9, 1)]
    assert (sp.start_offset, sp.end_offset) == (1, 10)  # the marker: archived, passed
    sp.check()


def test_release_member_and_durable_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = ShareStateStore(tmp_path / "share_group_state")
    mgr = SharePartitionManager(store, lambda group: LIMITS)
    key = ("g", uuid.uuid4(), 0)
    sp = mgr.get(key, lambda: 5)
    assert sp is not None and sp.start_offset == 5
    sp.acquire("a", batches((5, 14)), 100, now_ms=0)
    sp.acknowledge("a", [(5, 6, (ACCEPT,)), (8, 8, (ACCEPT,))])
    mgr.persist(key, sp)
    assert mgr.release_member("g", "a") == 7
    # a new manager (a restarted broker) reads what was written
    again = SharePartitionManager(store, lambda group: LIMITS).get(key, lambda: 0)
    assert again is not None and again.start_offset == 7 and again.end_offset == 15
    assert again.records[8].state == ACKNOWLEDGED
    assert again.records[7].state == AVAILABLE and again.records[7].delivery_count == 1
    assert again.acquire("b", batches((5, 14)), 100, now_ms=0) == [(7, 7, 2), (9, 14, 2)]
    assert store.stored() == [key]


def test_a_deleted_topic_takes_its_share_state(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = ShareStateStore(tmp_path / "share_group_state")
    gone, kept = uuid.uuid4(), uuid.uuid4()
    writer = SharePartitionManager(store, lambda group: LIMITS)
    for key in [("g", gone, 0), ("h", gone, 1), ("g", kept, 0)]:
        sp = writer.get(key, lambda: 3)
        assert sp is not None
        writer.persist(key, sp)
    # a restarted broker, holding none of them in memory, hears of the deletion
    SharePartitionManager(store, lambda group: LIMITS).topic_deleted(gone)
    assert store.stored() == [("g", kept, 0)]
