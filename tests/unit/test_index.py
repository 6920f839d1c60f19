"""Offset and time indexes: file format, lookups, preallocation, reload."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.storage.index import (
    CorruptIndex,
    IndexFull,
    OffsetIndex,
    TimeIndex,
)


def test_offset_index_file_is_big_endian_relative_offset_and_position(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 80, writable=True)
    index.append(105, 4000)
    index.append(110, 9000)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 5, 4000, 10, 9000)


def test_offset_index_is_preallocated_while_active_and_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    index = OffsetIndex(path, 0, 83, writable=True)  # rounded down to 10 entries
    assert path.stat().st_size == 80
    assert index.max_entries == 10
    index.append(3, 100)
    assert path.stat().st_size == 80
    index.trim_to_valid_size()
    assert path.stat().st_size == 8
    index.close()


def test_offset_index_lookup_finds_largest_entry_at_or_below_target(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "i", 1000, 8000, writable=True)
    for rel, pos in [(10, 100), (20, 200), (30, 300)]:
        index.append(1000 + rel, pos)
    assert index.lookup(999) == (1000, 0)
    assert index.lookup(1005) == (1000, 0)
    assert index.lookup(1010) == (1010, 100)
    assert index.lookup(1029) == (1020, 200)
    assert index.lookup(10**12) == (1030, 300)


def test_offset_index_rejects_out_of_order_entries_and_reports_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "i", 0, 16, writable=True)
    index.append(5, 50)
    with pytest.raises(ValueError):
        index.append(5, 60)
    with pytest.raises(ValueError):
        index.append(6, 50)
    assert not index.is_full()
    index.append(6, 60)
    assert index.is_full()
    with pytest.raises(IndexFull):
        index.append(7, 70)


def test_offset_index_reload_ignores_preallocated_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "i"
    index = OffsetIndex(path, 0, 800, writable=True)
    index.append(0, 0)  # (0, 0) is a legal first entry
    index.append(7, 300)
    index.flush()
    # Simulate a crash: the file keeps its preallocated size.
    assert path.stat().st_size == 800
    reloaded = OffsetIndex(path, 0, 800, writable=False)
    assert reloaded.entries == 2
    assert reloaded.last_entry() == (7, 300)


def test_offset_index_loads_lazily_when_inactive(tmp_path: Path) -> None:
    path = tmp_path / "i"
    index = OffsetIndex(path, 0, 800, writable=True)
    index.append(4, 40)
    index.close()
    reloaded = OffsetIndex(path, 0, 800)
    assert reloaded._loaded is False
    assert reloaded.lookup(5) == (4, 40)
    with pytest.raises(IndexFull):
        reloaded.append(9, 90)


def test_offset_index_sanity_check_detects_entries_past_the_log(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "i", 0, 800, writable=True)
    index.append(10, 500)
    index.sanity_check(log_size_bytes=600, next_offset=11)
    with pytest.raises(CorruptIndex):
        index.sanity_check(log_size_bytes=500, next_offset=11)
    with pytest.raises(CorruptIndex):
        index.sanity_check(log_size_bytes=600, next_offset=10)


def test_offset_index_truncate_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "i"
    index = OffsetIndex(path, 0, 800, writable=True)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.truncate_to_position(300)
    assert index.entries == 2 and index.last_entry() == (20, 200)
    index.replace_entries([(3, 30), (4, 40)])
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 3, 30, 4, 40)


def test_relative_offset_must_fit_int32(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "i", 0, 800, writable=True)
    with pytest.raises(ValueError):
        index.append(2**31, 10)


def test_time_index_file_format_and_lookup(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 120, writable=True)
    assert index.maybe_append(1000, 52)
    assert not index.maybe_append(1000, 53)  # timestamp did not grow
    assert not index.maybe_append(900, 54)
    assert index.maybe_append(2000, 60)
    assert index.lookup(999) == (-1, 50)
    assert index.lookup(1500) == (1000, 52)
    assert index.lookup(5000) == (2000, 60)
    index.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t", 0, 36, writable=True)  # 3 entries
    index.maybe_append(1, 1)
    assert not index.is_full()
    index.maybe_append(2, 2)
    assert index.is_full()
    with pytest.raises(IndexFull):
        index.maybe_append(3, 3)
    assert index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3


def test_time_index_reload_stops_at_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "t"
    index = TimeIndex(path, 0, 1200, writable=True)
    index.maybe_append(0, 0)
    index.maybe_append(10, 4)
    index.flush()
    reloaded = TimeIndex(path, 0, 1200)
    assert reloaded.entries == 2
    assert reloaded.last_entry() == (10, 4)


def test_time_index_truncate_to_offset(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "t", 0, 1200, writable=True)
    for i in range(1, 5):
        index.maybe_append(i * 100, i * 10)
    index.truncate_to_offset(30)
    assert index.last_entry() == (200, 20)
    with pytest.raises(CorruptIndex):
        index.sanity_check(next_offset=20)


def test_delete_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    index = TimeIndex(path, 0, 120, writable=True)
    index.delete()
    assert not path.exists()
