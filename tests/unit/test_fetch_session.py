import pytest

from odradek.broker.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    FetchSessionCache,
    SessionError,
)


def test_open_lookup_and_epoch_rules():
    cache = FetchSessionCache(10)
    s = cache.open()
    assert s is not None and s.session_id > 0 and s.epoch == 1
    assert cache.lookup(s.session_id, 1) is s
    with pytest.raises(SessionError) as e:
        cache.lookup(s.session_id, 2)
    assert e.value.error_code == INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(SessionError) as e:
        cache.lookup(s.session_id + 1, 1)
    assert e.value.error_code == FETCH_SESSION_ID_NOT_FOUND


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def _cache(slots: int) -> tuple[FetchSessionCache, Clock]:
    clock = Clock()
    return FetchSessionCache(slots, eviction_ms=120_000, clock_ms=clock), clock


def _open(cache: FetchSessionCache, partitions: int, privileged: bool = False):
    s = cache.open(partitions, privileged)
    if s is not None:
        s.partitions = {("t", i): None for i in range(partitions)}  # type: ignore[misc]
    return s


def test_a_flood_of_new_sessions_neither_grows_the_cache_nor_evicts_recent_ones():
    cache, clock = _cache(2)
    a, b = _open(cache, 3), _open(cache, 3)
    for _ in range(1000):
        clock.now_ms += 10
        assert _open(cache, 50) is None  # even a bigger newcomer: a and b are recent
    assert len(cache) == 2 and cache.evictions == 0
    assert cache.lookup(a.session_id, 1) is a and cache.lookup(b.session_id, 1) is b


def test_a_session_unused_for_the_eviction_time_is_evicted_first():
    cache, clock = _cache(2)
    a, b = _open(cache, 10), _open(cache, 10)
    clock.now_ms += 60_000
    cache.lookup(b.session_id, 1)
    clock.now_ms += 60_001  # a unused for 120.001 s, b for 60.001 s
    c = _open(cache, 1)
    assert c is not None and len(cache) == 2 and cache.evictions == 1
    with pytest.raises(SessionError):
        cache.lookup(a.session_id, 1)
    assert cache.lookup(b.session_id, 1) is b


def test_an_old_smaller_session_is_evicted_by_a_bigger_newcomer_only():
    cache, clock = _cache(2)
    small, big = _open(cache, 2), _open(cache, 8)
    clock.now_ms += 120_001
    cache.lookup(small.session_id, 1)
    cache.lookup(big.session_id, 1)  # both in use, both older than the eviction time
    assert _open(cache, 2) is None  # same size: not more valuable
    newcomer = _open(cache, 3)
    assert newcomer is not None
    with pytest.raises(SessionError):
        cache.lookup(small.session_id, 1)
    assert cache.lookup(big.session_id, 1) is big


def test_a_follower_may_evict_a_recent_consumer_session_but_not_the_reverse():
    cache, clock = _cache(1)
    consumer = _open(cache, 100)
    follower = _open(cache, 1, privileged=True)
    assert follower is not None and follower.privileged
    with pytest.raises(SessionError):
        cache.lookup(consumer.session_id, 1)
    clock.now_ms += 120_001
    cache.lookup(follower.session_id, 1)
    assert _open(cache, 1000) is None  # privileged sessions outrank any consumer's


def test_zero_slots_means_no_sessions():
    assert FetchSessionCache(0).open() is None
