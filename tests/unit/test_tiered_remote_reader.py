import struct

from odradek.tiered.remote_reader import index_position


def _index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def test_index_position_is_the_last_entry_at_or_below() -> None:
    index = _index([(10, 4000), (25, 9000), (40, 15000)])
    assert index_position(index, 0) == 0
    assert index_position(index, 9) == 0
    assert index_position(index, 10) == 4000
    assert index_position(index, 24) == 4000
    assert index_position(index, 39) == 9000
    assert index_position(index, 1000) == 15000
    assert index_position(b"", 5) == 0


def test_a_remote_read_is_bounded_by_remote_fetch_max_wait_ms(tmp_path) -> None:
    """A read slower than remote.fetch.max.wait.ms (here throttled to 1 kB/s by
    remote.log.manager.fetch.max.bytes.per.second) raises TimeoutError at the bound,
    counted as a read error; the fetch answers no records and the client asks again."""
    import asyncio
    import time
    import uuid

    from odradek.tiered.metadata_records import (
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentState,
        TopicIdPartition,
    )
    from odradek.tiered.remote_log_manager import PartitionTier, RemoteLogManager
    from odradek.tiered.remote_reader import RemoteReader
    from odradek.tiered.settings import RemoteTierSettings
    from odradek.tiered.storage_manager import LocalSegmentFiles

    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    (tmp_path / "a.log").write_bytes(b"L" * 1500)
    (tmp_path / "a.index").write_bytes(_index([(0, 0)]))
    (tmp_path / "a.timeindex").write_bytes(b"")
    settings = RemoteTierSettings(enabled=True, url=(tmp_path / "remote").as_uri(),
                                  fetch_max_wait_ms=300, fetch_max_bytes_per_second=1000)
    rlm = RemoteLogManager(settings, 1, list, lambda _: True)
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, uuid.uuid4()), 0, 99, 1, 5, 6,
                                    {0: 0}, 1500, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rlm.rsm.copy_segment(meta, LocalSegmentFiles(
        str(tmp_path / "a.log"), str(tmp_path / "a.index"), str(tmp_path / "a.timeindex"),
        str(tmp_path / "none.txnindex"), None, b"0\n1\n0 0\n"))
    rlm.tiers[("t", 0)] = PartitionTier(tip, [meta], loaded=True)
    reader = RemoteReader(rlm)

    async def go() -> float:
        started = time.monotonic()
        try:
            await reader.read("t", 0, 10, 1500)
        except TimeoutError:
            return time.monotonic() - started
        finally:
            await rlm.stop()
        raise AssertionError("the read was not bounded")

    took = asyncio.run(go())
    assert 0.25 <= took < 2.0, took
    assert reader.errors == 1 and reader.pending == 0
    assert asyncio.run(RemoteReader(rlm).read("t", 0, 100, 10)) is None  # no segment holds it


def test_the_remote_index_cache_is_bounded_lru() -> None:
    """remote.log.index.file.cache.total.size.bytes: the least recently used indexes go
    first once the bytes held pass the bound; a hit loads nothing."""
    from odradek.tiered.remote_reader import _IndexCache

    cache = _IndexCache(100)
    loads: list[str] = []

    def get(key: str) -> bytes:
        return cache.get((key, "index"), lambda: loads.append(key) or b"x" * 40)

    get("a"), get("b"), get("a")  # a is the most recently used
    assert loads == ["a", "b"]
    get("c")  # 120 bytes: b goes
    get("a")
    assert loads == ["a", "b", "c"]
    get("b")
    assert loads == ["a", "b", "c", "b"]


def test_a_corrupt_remote_segment_is_an_error_not_an_endless_read(tmp_path) -> None:
    """Bytes that are not record batches where the index points (a length claiming more
    than the segment holds) fail the read at once with RemoteSegmentCorrupt (the fetch
    answers KAFKA_STORAGE_ERROR for the partition); the reader used to ask for the same
    bytes again forever, and a stopping broker's exit waited on that thread."""
    import asyncio
    import time
    import uuid

    import pytest

    from odradek.tiered.metadata_records import (
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentState,
        TopicIdPartition,
    )
    from odradek.tiered.remote_log_manager import PartitionTier, RemoteLogManager
    from odradek.tiered.remote_reader import RemoteReader, RemoteSegmentCorrupt
    from odradek.tiered.settings import RemoteTierSettings
    from odradek.tiered.storage_manager import LocalSegmentFiles

    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    (tmp_path / "a.log").write_bytes(b"L" * 1500)  # batch length 0x4C4C4C4C at byte 8
    (tmp_path / "a.index").write_bytes(_index([(0, 0)]))
    (tmp_path / "a.timeindex").write_bytes(b"")
    settings = RemoteTierSettings(enabled=True, url=(tmp_path / "remote").as_uri(),
                                  fetch_max_wait_ms=5000)
    rlm = RemoteLogManager(settings, 1, list, lambda _: True)
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, uuid.uuid4()), 0, 99, 1, 5, 6,
                                    {0: 0}, 1500, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rlm.rsm.copy_segment(meta, LocalSegmentFiles(
        str(tmp_path / "a.log"), str(tmp_path / "a.index"), str(tmp_path / "a.timeindex"),
        str(tmp_path / "none.txnindex"), None, b"0\n1\n0 0\n"))
    rlm.tiers[("t", 0)] = PartitionTier(tip, [meta], loaded=True)
    reader = RemoteReader(rlm)

    async def go() -> None:
        try:
            await reader.read("t", 0, 10, 1500)
        finally:
            await rlm.stop()

    started = time.monotonic()
    with pytest.raises(RemoteSegmentCorrupt, match="no valid batch at byte 0 of 1500"):
        asyncio.run(go())
    assert time.monotonic() - started < 4.0
    assert reader.errors == 1 and reader.pending == 0


def test_remote_index_cache_stays_within_its_bytes_and_counts_evictions() -> None:
    from odradek.tiered.remote_reader import _IndexCache

    cache = _IndexCache(max_bytes=3000)
    loads: list[int] = []

    def load(n: int) -> bytes:
        loads.append(n)
        return bytes(1000)

    for n in range(10):  # ten 1000-byte index files through a 3000-byte cache
        cache.get((n, "index"), lambda n=n: load(n))
        assert cache.size_bytes <= 3000
    assert (len(cache), cache.evictions, cache.misses, cache.hits) == (3, 7, 10, 0)
    cache.get((9, "index"), lambda: load(-1))  # the most recent stays: a hit
    cache.get((0, "index"), lambda: load(0))  # evicted: fetched again
    assert (cache.hits, cache.misses, loads.count(0)) == (1, 11, 2)
    big = _IndexCache(max_bytes=10)  # one file larger than the bound is still served
    assert big.get(("x", "index"), lambda: bytes(50)) == bytes(50) and len(big) == 1
