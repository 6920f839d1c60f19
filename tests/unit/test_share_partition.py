"""The share-partition state machine (coordinator/share_partition.py): acquisition
locks, delivery counts, acknowledgements, the SPSO/SPEO window (its durable form:
test_share_coordinator.py)."""

from __future__ import annotations

from odradek.coordinator.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    NONE,
    REJECT,
    RELEASE,
    RENEW,
    ShareLimits,
    SharePartition,
)

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


# -- KIP-1222 renew and KIP-1206 record_limit (ShareFetch/ShareAcknowledge v2) -------------


def test_renew_extends_the_lock_and_keeps_the_delivery_count() -> None:
    sp = SharePartition(0, LIMITS)
    assert sp.acquire("m", batches((0, 4)), 10, now_ms=0) == [(0, 4, 1)]
    assert sp.acknowledge("m", [(0, 4, (RENEW,))], now_ms=800, renew=True) == NONE
    assert sp.expire_locks(1000) == 0  # the original deadline passed: still locked
    assert all(r.state == ACQUIRED and r.member_id == "m" and r.delivery_count == 1
               and r.deadline_ms == 1800 for r in sp.records.values())
    assert sp.acquire("other", batches((0, 4)), 10, now_ms=1500) == []
    assert sp.expire_locks(1800) == 5  # the renewed deadline
    assert sp.acquire("other", batches((0, 4)), 10, now_ms=1800) == [(0, 4, 2)]
    sp.check()


def test_renew_of_a_record_not_acquired_by_the_member_is_invalid_record_state() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("m", batches((0, 2)), 10, now_ms=0)
    assert sp.acknowledge("other", [(0, 0, (RENEW,))], 100, renew=True) == INVALID_RECORD_STATE
    assert sp.acknowledge("m", [(0, 0, (ACCEPT,))]) == NONE
    assert sp.acknowledge("m", [(0, 0, (RENEW,))], 100, renew=True) == INVALID_RECORD_STATE
    assert sp.records[1].deadline_ms == 1000  # all or nothing: untouched


def test_renew_below_version_2_is_invalid_request() -> None:
    sp = SharePartition(0, LIMITS)
    sp.acquire("m", batches((0, 2)), 10, now_ms=0)
    assert sp.acknowledge("m", [(0, 2, (RENEW,))], 100, renew=False) == INVALID_REQUEST
    assert sp.records[0].deadline_ms == 1000


def test_record_limit_acquires_at_most_max_records() -> None:
    sp = SharePartition(0, LIMITS)
    assert sp.acquire("m", batches((0, 9)), 3, now_ms=0, record_limit=True) == [(0, 2, 1)]
    assert sp.in_flight() == 3 and sp.end_offset == 3  # the rest never acquired
    assert sp.acquire("n", batches((0, 9)), 4, now_ms=0, record_limit=True) == [(3, 6, 1)]
    # batch_optimized (v1 behaviour): the whole batch
    assert sp.acquire("o", batches((0, 9)), 1, now_ms=0) == [(7, 9, 1)]
    sp.check()
