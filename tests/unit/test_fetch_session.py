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


def test_cache_is_bounded_and_evicts_least_recently_used():
    cache = FetchSessionCache(2)
    a, b = cache.open(), cache.open()
    cache.lookup(a.session_id, 1)  # a is now the most recently used
    c = cache.open()
    assert len(cache) == 2
    assert cache.lookup(a.session_id, 1) is a and cache.lookup(c.session_id, 1) is c
    with pytest.raises(SessionError):
        cache.lookup(b.session_id, 1)


def test_zero_slots_means_no_sessions():
    assert FetchSessionCache(0).open() is None
