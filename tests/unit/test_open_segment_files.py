"""The LRU of segments' open .log files (storage/open_files.py, issue 15.3)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol.records import Record, assign_offsets, build_batch, validate_produce_records
from odradek.storage.file_records import FileRecords
from odradek.storage.local_log import fsync_and_close
from odradek.storage.open_files import SEGMENT_FILES, OpenSegmentFiles, derived_max_open
from odradek.storage.segment import LogSegment

INTERVAL_BYTES = 100
INDEX_BYTES = 8000


@pytest.fixture
def lru() -> Iterator[OpenSegmentFiles]:
    """The process's LRU, bounded to 2 for the test and unbounded again after."""
    before = SEGMENT_FILES.max_open
    SEGMENT_FILES.configure(2)
    with SEGMENT_FILES.lock:  # files earlier tests left open do not count here
        SEGMENT_FILES.shed_idle_locked()
    try:
        yield SEGMENT_FILES
    finally:
        SEGMENT_FILES.configure(before)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _closed_segment(dir: Path, base: int, n_batches: int = 5,
                    roll: bool = True) -> tuple[LogSegment, bytes]:
    """A segment with ``n_batches`` batches, rolled (closed) unless ``roll`` is
    False; returns it and its bytes."""
    segment = LogSegment.create(dir, base, index_interval_bytes=INTERVAL_BYTES,
                                max_index_bytes=INDEX_BYTES, now_ms=0)
    written = bytearray()
    for i in range(n_batches):
        buf = bytearray(build_batch([Record(-1, 1000 + i, b"k", f"{base}-{i}".encode() * 10)]))
        headers = validate_produce_records(buf, 10**7)
        assign_offsets(buf, headers, segment.next_offset, 0, None)
        segment.append(buf, headers)
        written += buf
    if roll:
        segment.on_become_inactive()
    return segment, bytes(written)


def test_closed_segments_files_are_bounded_and_reopened_on_use(tmp_path: Path,
                                                               lru: OpenSegmentFiles) -> None:
    fds_before = _open_fds()
    segments = [_closed_segment(tmp_path, base * 100) for base in range(12)]
    assert lru.open_count <= 2
    assert sum(s.log.is_open for s, _ in segments) <= 2
    # 12 segments hold at most 2 .log descriptors (their indexes hold none once closed)
    assert _open_fds() - fds_before <= 2
    opened = lru.opened_total
    for _ in range(2):  # every segment answers, whether its file was open or not
        for segment, data in segments:
            assert segment.read(segment.base_offset, 1 << 20) == (0, data)
            assert segment.read_batch(0, 61) == data[:61]
    assert lru.opened_total >= opened + 12
    assert lru.open_count <= 2 and _open_fds() - fds_before <= 2
    for segment, _ in segments:
        segment.close()
    assert lru.open_count == 0 and _open_fds() == fds_before


def _append(segment: LogSegment, value: bytes) -> bytes:
    buf = bytearray(build_batch([Record(-1, 5000, b"k", value)]))
    headers = validate_produce_records(buf, 10**7)
    assign_offsets(buf, headers, segment.next_offset, 0, None)
    segment.append(buf, headers)
    return bytes(buf)


def test_active_segments_hold_no_descriptor_beyond_the_lru(tmp_path: Path,
                                                           lru: OpenSegmentFiles) -> None:
    """Issue 15.3 at 50,000 partitions: an active segment's .log is in the LRU
    (reopened read-write for the next append) and its indexes hold none."""
    fds_before = _open_fds()
    actives = [_closed_segment(tmp_path / str(p), 0, roll=False)
               for p in range(12) if not (tmp_path / str(p)).mkdir()]
    assert _open_fds() - fds_before <= 2 and lru.open_count <= 2
    assert not any(s.log.pinned for s, _ in actives)
    opened = lru.opened_total
    everything = []
    for segment, data in actives:  # every append after the first 2 reopens its file
        everything.append(data + _append(segment, b"after eviction" * 20))
        assert _open_fds() - fds_before <= 2
    assert lru.opened_total >= opened + 10
    for (segment, _), data in zip(actives, everything):
        assert segment.read(0, 1 << 20) == (0, data)
        assert segment.log.size_bytes == len(data) == os.path.getsize(segment.log_path)
    for segment, _ in actives:
        segment.on_become_inactive()
    assert _open_fds() - fds_before <= 2
    for (segment, _), data in zip(actives, everything):
        entries = segment.offset_index.entries
        assert entries > 0
        segment.close()
        # what reached the files equals what was kept in memory
        again = LogSegment.open(segment.dir, 0, index_interval_bytes=INTERVAL_BYTES,
                                max_index_bytes=INDEX_BYTES, now_ms=0, active=False)
        assert again.offset_index.entries == entries
        assert os.path.getsize(again.offset_index.path) == entries * 8
        assert again.read(0, 1 << 20) == (0, data)
        again.close()
    assert _open_fds() == fds_before


def test_an_active_index_reaches_its_file_on_flush_without_a_descriptor(
        tmp_path: Path, lru: OpenSegmentFiles) -> None:
    """Entries gather in memory and are written by path when a flush asks for
    what to fsync (so a kill -9 after the flush finds them); the file stays
    preallocated (its zero tail ends the valid entries at the next load)."""
    segment, _ = _closed_segment(tmp_path, 0, n_batches=8, roll=False)
    index_path = segment.offset_index.path
    assert os.path.getsize(index_path) == INDEX_BYTES  # preallocated
    entries = segment.offset_index.entries
    assert entries > 0
    assert index_path.read_bytes()[:8 * entries] == bytes(8 * entries)  # not yet written
    targets = segment.sync_targets()
    assert targets == [segment.log_path]  # by path: no descriptor held for the fsync
    fsync_and_close(targets)
    on_disk = index_path.read_bytes()[:8 * (entries + 1)]
    assert on_disk[-8:] == bytes(8) and bytes(8) not in on_disk[:8 * entries][8:]
    # a kill -9 now: the clean load of the active segment finds every entry
    again = LogSegment.open(tmp_path, 0, index_interval_bytes=INTERVAL_BYTES,
                            max_index_bytes=INDEX_BYTES, now_ms=0, active=True)
    assert again.offset_index.entries == entries
    assert again.next_offset == segment.next_offset
    again.close_files()
    segment.close()


def test_eviction_passes_over_an_active_file_leased_on_another_thread(
        tmp_path: Path, lru: OpenSegmentFiles) -> None:
    """A write or fsync in flight holds a lease: newer uses of other files do
    not close its descriptor under it."""
    active, data = _closed_segment(tmp_path / "a", 0, roll=False) if not (
        tmp_path / "a").mkdir() else (None, b"")
    assert active is not None
    others = [_closed_segment(tmp_path, base * 100)[0] for base in range(1, 6)]
    leased = threading.Event()
    done = threading.Event()
    seen: list[bytes] = []

    def reader() -> None:
        with active.log.leased_fd() as fd:
            leased.set()
            done.wait(30)
            seen.append(os.pread(fd, len(data), 0))
            os.fsync(fd)

    t = threading.Thread(target=reader)
    t.start()
    assert leased.wait(30)
    for segment in others:
        segment.read(segment.base_offset, 100)
    assert active.log.is_open  # passed over while leased
    done.set()
    t.join(30)
    assert seen == [data]
    for segment in others:
        segment.read(segment.base_offset, 100)
    assert not active.log.is_open  # idle again: evicted
    extra = _append(active, b"x")
    assert active.read(0, 1 << 20) == (0, data + extra)
    for segment in [active, *others]:
        segment.close()


def test_a_leased_file_is_never_closed_under_its_reader(tmp_path: Path,
                                                        lru: OpenSegmentFiles) -> None:
    first, data = _closed_segment(tmp_path, 0)
    others = [_closed_segment(tmp_path, base * 100)[0] for base in range(1, 6)]
    with first.log.leased_fd() as fd:
        for segment in others:
            segment.read(segment.base_offset, 100)
        assert first.log.is_open  # passed over while leased
        assert os.pread(fd, len(data), 0) == data
        first.close()  # closed for good while leased: the descriptor waits for the reader
        assert os.pread(fd, 61, 0) == data[:61]
    assert not first.log.is_open and first.log.closed
    with pytest.raises(OSError):
        first.read_batch(0, 61)
    for segment in others:
        segment.close()


def test_an_evicted_file_can_still_be_synced_truncated_and_recovered(
        tmp_path: Path, lru: OpenSegmentFiles) -> None:
    segment, data = _closed_segment(tmp_path, 0)
    others = [_closed_segment(tmp_path, base * 100)[0] for base in range(1, 4)]
    assert not segment.log.is_open
    targets = segment.sync_targets()
    assert targets == [segment.log_path, segment.offset_index.path, segment.time_index.path]
    fsync_and_close(targets)
    assert not segment.log.is_open  # synced by path, not through the LRU
    segment.flush()
    for other in others:
        other.read(other.base_offset, 100)
    assert segment.recover() == 0
    assert segment.next_offset == 5
    for other in others:
        other.read(other.base_offset, 100)
    removed = segment.truncate_to(3)
    assert removed > 0 and segment.next_offset == 3
    assert segment.read(0, 1 << 20) == (0, data[: segment.size_bytes])
    for s in [segment, *others]:
        s.close()


def test_readers_on_many_threads_always_get_their_own_segments_bytes(
        tmp_path: Path, lru: OpenSegmentFiles) -> None:
    segments = [_closed_segment(tmp_path, base * 100, n_batches=3) for base in range(10)]
    errors: list[str] = []

    def reader(seed: int) -> None:
        for i in range(300):
            segment, data = segments[(seed * 7 + i * 3) % len(segments)]
            got = segment.read(segment.base_offset, 1 << 20)
            if got != (0, data):
                errors.append(f"segment {segment.base_offset}: wrong bytes")
                return

    threads = [threading.Thread(target=reader, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert lru.open_count <= 2 + 6  # leased files may be passed over for a moment
    for segment, _ in segments:
        segment.close()
    assert lru.open_count == 0


def test_a_standalone_lru_closes_the_least_recently_used_idle_file(tmp_path: Path) -> None:
    own = OpenSegmentFiles(max_open=2)
    files = []
    for n in range(3):
        path = tmp_path / f"{n}.log"
        path.write_bytes(b"x" * (n + 1))
        files.append(FileRecords(path, pinned=False, lru=own))
    assert [f.is_open for f in files] == [False, True, True]
    files[1].pread(1, 0)  # 1 is now the most recently used
    assert files[0].pread(1, 0) == b"x"  # reopened: 2, the least recently used, goes
    assert [f.is_open for f in files] == [True, True, False]
    assert own.opened_total == 1 and own.evicted_total == 2
    own.configure(0)  # unbounded from now on
    files[2].pread(1, 0)
    assert all(f.is_open for f in files)
    for f in files:
        f.close()


def test_the_derived_bound_is_a_share_of_the_limit_left_after_the_reserve() -> None:
    assert derived_max_open(256, 128) == 64
    assert derived_max_open(20000, 128) == 9936
    assert derived_max_open(100, 128) == 16
