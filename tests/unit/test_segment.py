"""LogSegment: byte-exact appends, sparse indexes, reads, recovery, truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.protocol.records import (
    BatchHeader,
    Record,
    assign_offsets,
    build_batch,
    iter_batch_headers,
    validate_produce_records,
)
from odradek.storage.segment import LogSegment

INTERVAL_BYTES = 100
INDEX_BYTES = 8000


def _batch(n_records: int, ts: int, value_bytes: int = 40) -> bytes:
    return build_batch([Record(-1, ts + i, b"k", b"v" * value_bytes) for i in range(n_records)])


def _prepared(batches: list[bytes], first_offset: int) -> tuple[bytearray, list[BatchHeader]]:
    buf = bytearray(b"".join(batches))
    headers = validate_produce_records(buf, 10**7)
    assign_offsets(buf, headers, first_offset, 0, None)
    return buf, headers


def _new_segment(dir: Path, base: int = 0) -> LogSegment:
    return LogSegment.create(
        dir, base, index_interval_bytes=INTERVAL_BYTES, max_index_bytes=INDEX_BYTES, now_ms=0
    )


def _open_segment(dir: Path, base: int = 0, *, active: bool, recover: bool) -> LogSegment:
    return LogSegment.open(
        dir,
        base,
        index_interval_bytes=INTERVAL_BYTES,
        max_index_bytes=INDEX_BYTES,
        now_ms=0,
        active=active,
        recover=recover,
    )


def _fill(segment: LogSegment, n_batches: int, records_per_batch: int = 2) -> bytes:
    """Append n batches one append each; return the bytes written."""
    written = bytearray()
    for i in range(n_batches):
        buf, headers = _prepared([_batch(records_per_batch, 1000 + 10 * i)], segment.next_offset)
        segment.append(buf, headers)
        written += buf
    return bytes(written)


def test_files_are_named_by_20_digit_base_offset_and_log_is_wire_bytes(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path, 1234)
    written = _fill(segment, 3)
    segment.close()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]
    assert (tmp_path / "00000000000000001234.log").read_bytes() == written
    assert [h.base_offset for h in iter_batch_headers(written)] == [1234, 1236, 1238]


def test_index_entry_added_per_batch_once_interval_bytes_passed(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 5)
    positions = [h.position for h in iter_batch_headers(written)]
    # Batches are ~120 bytes > INTERVAL_BYTES: every batch after the first is indexed,
    # keyed by its last offset.
    index = segment.offset_index
    assert [index.entry(i) for i in range(index.entries)] == [
        (3, positions[1]),
        (5, positions[2]),
        (7, positions[3]),
        (9, positions[4]),
    ]
    assert segment.time_index.last_entry() == (1000 + 40 + 1, 9)


def test_multi_batch_append_is_one_write_and_indexes_each_batch(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    buf, headers = _prepared([_batch(1, 1000), _batch(1, 1001), _batch(1, 1002)], 0)
    segment.append(buf, headers)
    assert segment.next_offset == 3
    assert segment.offset_index.entries == 2
    assert segment.size_bytes == len(buf)


def test_read_returns_whole_batches_from_the_one_holding_the_offset(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 10, records_per_batch=3)
    sizes = [h.size for h in iter_batch_headers(written)]
    # offset 4 is inside batch 1 (offsets 3..5)
    assert segment.read(4, max_bytes=10**6) == (sizes[0], written[sizes[0] :])
    # max_bytes cuts at a batch boundary
    assert segment.read(4, max_bytes=sizes[1] + sizes[2] + 5) == (
        sizes[0],
        written[sizes[0] : sizes[0] + sizes[1] + sizes[2]],
    )
    # nothing at or after offset 30
    assert segment.read(30, max_bytes=10**6) is None


def test_read_min_one_batch_and_max_offset(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 4, records_per_batch=3)
    first_size = next(iter_batch_headers(written)).size
    assert segment.read(0, max_bytes=10) == (0, b"")
    assert segment.read(0, max_bytes=10, min_one_batch=True) == (0, written[:first_size])
    # max_offset 4 lies in the second batch (3..5): only the first batch is visible
    assert segment.read(0, 10**6, max_offset=4) == (0, written[:first_size])
    assert segment.read(0, 10**6, max_offset=3) == (0, written[:first_size])
    assert segment.read(0, 10**6, max_offset=2) == (0, b"")


def test_find_offset_by_timestamp_is_exact_per_record(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    _fill(segment, 6, records_per_batch=3)  # batch i holds timestamps 1000+10i .. +2
    assert segment.find_offset_by_timestamp(1021, 0) == (7, 1021)
    assert segment.find_offset_by_timestamp(1023, 0) == (9, 1030)
    assert segment.find_offset_by_timestamp(0, 0) == (0, 1000)
    assert segment.find_offset_by_timestamp(0, 5) == (5, 1012)
    assert segment.find_offset_by_timestamp(2000, 0) is None


def test_max_timestamp_record(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    assert segment.max_timestamp_record() == (-1, -1)
    buf, headers = _prepared(
        [build_batch([Record(-1, 5, None, b"a"), Record(-1, 99, None, b"b"), Record(-1, 7)])], 0
    )
    segment.append(buf, headers)
    _fill(segment, 2)  # timestamps 1000.., larger
    segment.append(*_prepared([build_batch([Record(-1, 5000), Record(-1, 5000)])], 7))
    assert segment.max_timestamp_record() == (7, 5000)


def test_recover_truncates_a_torn_tail(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 5)
    segment.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(_batch(3, 5000)[:50])  # half a header
    reopened = _open_segment(tmp_path, active=True, recover=True)
    assert reopened.recovery_truncated_bytes == 50
    assert reopened.size_bytes == len(written)
    assert reopened.next_offset == 10
    assert (tmp_path / "00000000000000000000.log").read_bytes() == written


def test_recover_cuts_at_a_batch_with_a_bad_crc(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 5)
    segment.close()
    headers = list(iter_batch_headers(written))
    corrupt = bytearray(written)
    corrupt[headers[3].position + 70] ^= 0xFF
    (tmp_path / "00000000000000000000.log").write_bytes(bytes(corrupt))
    reopened = _open_segment(tmp_path, active=True, recover=True)
    assert reopened.size_bytes == headers[3].position
    assert reopened.next_offset == headers[3].base_offset
    assert reopened.offset_index.last_entry()[1] < headers[3].position


def test_missing_index_is_rebuilt_identically(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    _fill(segment, 20)
    segment.on_become_inactive()
    segment.close()
    index_path = tmp_path / "00000000000000000000.index"
    time_path = tmp_path / "00000000000000000000.timeindex"
    expected_index, expected_time = index_path.read_bytes(), time_path.read_bytes()
    assert expected_index and expected_time
    index_path.unlink()
    time_path.unlink()
    reopened = _open_segment(tmp_path, active=False, recover=False)
    assert index_path.read_bytes() == expected_index
    assert time_path.read_bytes() == expected_time
    assert reopened.next_offset == 40


def test_index_pointing_past_the_log_is_rebuilt(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 6)
    segment.on_become_inactive()
    segment.close()
    log_path = tmp_path / "00000000000000000000.log"
    headers = list(iter_batch_headers(written))
    os.truncate(log_path, headers[2].position)  # the index still names later batches
    reopened = _open_segment(tmp_path, active=False, recover=False)
    assert reopened.next_offset == headers[2].base_offset
    assert reopened.offset_index.last_entry()[1] < headers[2].position


def test_reopen_inactive_segment_restores_facts(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    _fill(segment, 7)
    max_ts, next_offset = segment.max_timestamp, segment.next_offset
    segment.on_become_inactive()
    segment.close()
    reopened = _open_segment(tmp_path, active=False, recover=False)
    assert (reopened.max_timestamp, reopened.next_offset) == (max_ts, next_offset)
    assert reopened.rolling_based_timestamp_ms == 1001


def test_truncate_to_cuts_at_batch_boundary(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    written = _fill(segment, 5, records_per_batch=2)
    headers = list(iter_batch_headers(written))
    removed = segment.truncate_to(5)  # inside batch 2 (4..5): the whole batch goes
    assert removed == len(written) - headers[2].position
    assert segment.next_offset == 4
    assert segment.max_timestamp == 1011
    assert segment.read(4, 10**6) is None
    segment.append(*_prepared([_batch(1, 2000)], 4))
    assert segment.next_offset == 5


def test_append_rejects_offsets_outside_the_segment(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path, 100)
    with pytest.raises(ValueError):
        segment.append(*_prepared([_batch(1, 0)], 100 + 2**31))


def test_delete_removes_all_files(tmp_path: Path) -> None:
    segment = _new_segment(tmp_path)
    _fill(segment, 2)
    segment.delete()
    assert os.listdir(tmp_path) == []
