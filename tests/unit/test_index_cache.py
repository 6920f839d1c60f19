"""The byte budget for closed segments' index entries (storage/index_cache.py).

Closed indexes' entries are dropped when idle and over the budget and read
again on the next use, with the same answers; an index under a lease is
never dropped; an active index never joins the cache; many reader threads
over few cached indexes see correct lookups throughout."""

from __future__ import annotations

import random
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol.records import (
    Record,
    build_batch,
    decode_batch_records,
    iter_batch_headers,
    validate_produce_records,
)
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.index_cache import ENTRY_ARRAYS_OVERHEAD_BYTES, INDEX_CACHE, IndexCache
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

ENTRIES = 200
OFFSET_INDEX_BYTES = ENTRIES * 8 + ENTRY_ARRAYS_OVERHEAD_BYTES
TIME_INDEX_BYTES = ENTRIES * 12 + ENTRY_ARRAYS_OVERHEAD_BYTES


def _closed_indexes(dir: Path, n: int, cache: IndexCache) -> list[tuple[OffsetIndex, TimeIndex]]:
    """n closed segments' indexes (written, then trimmed as on roll), ENTRIES each."""
    out = []
    for s in range(n):
        base = s * 100_000
        offsets = OffsetIndex(dir / f"{base:020d}.index", base, 1 << 20, writable=True,
                              cache=cache)
        times = TimeIndex(dir / f"{base:020d}.timeindex", base, 1 << 20, writable=True,
                          cache=cache)
        for i in range(ENTRIES):
            offsets.append(base + 10 * i + 9, 4096 * i + 17)
            times.maybe_append(1_000_000 + 7 * i + s, base + 10 * i + 9)
        offsets.close()
        times.close()
        out.append((offsets, times))
    return out


def _lookups(pair: tuple[OffsetIndex, TimeIndex]) -> list[tuple[int, int]]:
    offsets, times = pair
    base = offsets.base_offset
    answers = [offsets.lookup(base + t) for t in range(-5, 10 * ENTRIES + 20, 7)]
    answers += [times.lookup(t) for t in range(999_990, 1_000_000 + 7 * ENTRIES + 50, 5)]
    answers += [offsets.last_entry(), times.last_entry(), (offsets.entries, times.entries)]
    return answers


def test_closed_indexes_past_the_budget_are_dropped_and_reload_the_same(tmp_path: Path) -> None:
    unbounded = IndexCache()
    (tmp_path / "a").mkdir()
    expected = [_lookups(p) for p in _closed_indexes(tmp_path / "a", 12, unbounded)]
    assert unbounded.bytes == 12 * (OFFSET_INDEX_BYTES + TIME_INDEX_BYTES)
    assert unbounded.evictions_total == 0

    (tmp_path / "b").mkdir()
    budget = 3 * (OFFSET_INDEX_BYTES + TIME_INDEX_BYTES)
    cache = IndexCache(max_bytes=budget)
    pairs = _closed_indexes(tmp_path / "b", 12, cache)
    assert cache.bytes <= budget and cache.evictions_total >= 18  # rolled in, pushed out
    for _ in range(2):  # every pair read again after being dropped: same answers
        for pair, want in zip(pairs, expected):
            assert _lookups(pair) == want
            assert cache.bytes <= budget
    assert cache.loads_total >= 2 * 24 - 6
    assert cache.entries <= 6
    dropped = [p for p in pairs if not p[0]._loaded]
    assert len(dropped) >= 9


def test_an_index_under_a_lease_is_not_dropped(tmp_path: Path) -> None:
    budget = 2 * OFFSET_INDEX_BYTES
    cache = IndexCache(max_bytes=budget)
    pairs = _closed_indexes(tmp_path, 6, cache)
    held = pairs[0][0]
    held._acquire()  # as a reader on another thread holds it mid-lookup
    try:
        for offsets, times in pairs[1:]:
            offsets.lookup(offsets.base_offset + 55)
            times.lookup(1_000_100)
            assert held._loaded and held._count() == ENTRIES
        # the bound holds for everything but the leased index
        assert cache.bytes <= budget + OFFSET_INDEX_BYTES
    finally:
        held._release()
    assert cache.bytes <= budget  # dropped at the end of the lease if need be
    assert held.lookup(held.base_offset + 55) == (held.base_offset + 49, 4096 * 4 + 17)


def test_an_active_index_never_joins_the_cache_until_it_rolls(tmp_path: Path) -> None:
    cache = IndexCache(max_bytes=1)  # smaller than any index
    active = OffsetIndex(tmp_path / "0.index", 0, 1 << 20, writable=True, cache=cache)
    for i in range(50):
        active.append(i * 2 + 1, i * 100 + 5)
    assert cache.entries == 0 and cache.bytes == 0 and cache.loads_total == 0
    assert active.lookup(41) == (41, 2005) and active._loaded
    active.close()  # rolled: it joins, and alone over the budget it is dropped when idle
    assert not active._loaded and cache.evictions_total == 1
    assert active.lookup(41) == (41, 2005)  # read again from the trimmed file
    active.make_writable(1 << 20)  # a truncation made it active again: out of the cache
    assert cache.entries == 0 and active._loaded
    active.append(1001, 99_999)
    assert active.lookup(2000) == (1001, 99_999)


def test_a_released_index_is_never_read_again(tmp_path: Path) -> None:
    cache = IndexCache(max_bytes=10 * OFFSET_INDEX_BYTES)
    (offsets, _), = _closed_indexes(tmp_path, 1, cache)
    offsets.release()  # its segment is being renamed .deleted (or swapped by the cleaner)
    assert cache.entries == 1 and cache.bytes == TIME_INDEX_BYTES  # only the time index left
    offsets.path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x07")  # another segment's file
    # answers the segment's start: a scan from there is correct for any log
    assert offsets.lookup(offsets.base_offset + 500) == (offsets.base_offset, 0)


def test_reader_threads_over_a_small_budget_always_see_whole_indexes(tmp_path: Path) -> None:
    budget = 4 * (OFFSET_INDEX_BYTES + TIME_INDEX_BYTES)
    cache = IndexCache(max_bytes=budget)
    pairs = _closed_indexes(tmp_path, 30, cache)
    errors: list[BaseException] = []
    stop = threading.Event()

    def read(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(1000):
                offsets, times = rng.choice(pairs)
                base = offsets.base_offset
                i = rng.randrange(ENTRIES)
                assert offsets.lookup(base + 10 * i + 9 + rng.randrange(10)) == (
                    base + 10 * i + 9, 4096 * i + 17)
                s = base // 100_000
                assert times.lookup(1_000_000 + 7 * i + s) == (1_000_000 + 7 * i + s,
                                                               base + 10 * i + 9)
                assert offsets.entries == ENTRIES and times.last_entry()[1] == base + 1999
                if stop.is_set():
                    return
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(8)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch mid-lookup as often as they can
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(switch)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[0]
    assert cache.evictions_total > 100 and cache.loads_total > 100
    assert cache.bytes <= budget
    assert all(o._users == 0 and t._users == 0 for o, t in pairs)
    assert cache.bytes == sum(o._memory_bytes() for o, _ in pairs if o._loaded) + sum(
        t._memory_bytes() for _, t in pairs if t._loaded)


# -- a partition log over the process's cache -------------------------------------------------

TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=64)


@pytest.fixture
def small_process_cache() -> Iterator[IndexCache]:
    saved = INDEX_CACHE.max_bytes
    INDEX_CACHE.configure(1500)  # a few closed segments' indexes
    with INDEX_CACHE.lock:
        INDEX_CACHE.clear_idle_locked()  # what earlier tests' logs left in it
    try:
        yield INDEX_CACHE
    finally:
        INDEX_CACHE.configure(saved)


def _read_everything(log: PartitionLog) -> list[tuple[int, int, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 500).records
        headers = list(iter_batch_headers(data))
        assert headers
        for header in headers:
            out += [(r.offset, r.timestamp, r.value) for r in decode_batch_records(data, header)]
        offset = headers[-1].next_offset
    return out


def test_a_log_read_from_offset_zero_under_a_small_budget(
        tmp_path: Path, small_process_cache: IndexCache) -> None:
    assert small_process_cache.bytes == 0
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, CONFIG, TOPIC_ID, clock_ms=lambda: 5)
    for b in range(300):
        buf = bytearray(build_batch([Record(-1, 10_000 + 3 * b + i, b"k", b"%d" % b * 10)
                                     for i in range(3)]))
        log.append_as_leader(buf, validate_produce_records(buf, 10**7), leader_epoch=0)
    assert len(log.segments) > 20
    cache = small_process_cache
    loads, evictions = cache.loads_total, cache.evictions_total
    records = _read_everything(log)
    assert [r[0] for r in records] == list(range(900))
    assert [r[2] for r in records[::3]] == [b"%d" % b * 10 for b in range(300)]
    assert cache.bytes <= cache.max_bytes
    assert cache.loads_total > loads and cache.evictions_total > evictions
    # ListOffsets by time, through the time indexes, reloaded as needed
    for target in (10_000, 10_001, 10_450, 10_899):
        assert log.offset_for_timestamp(target) is not None
        assert log.offset_for_timestamp(target)[0] == target - 10_000  # type: ignore[index]
    assert cache.bytes <= cache.max_bytes
    log.close()  # closed for good: its entries leave the cache
    assert cache.bytes == 0
