"""PartitionLog: rolling, reads across segments, timestamps, reopen and recovery."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.records import (
    Record,
    TimestampType,
    build_batch,
    decode_batch_records,
    iter_batch_headers,
    validate_produce_records,
)
from odradek.storage.log import (
    AppendInfo,
    InconsistentTopicId,
    OffsetOutOfRange,
    PartitionLog,
    kafka_uuid_string,
    parse_kafka_uuid,
)
from odradek.storage.log_config import LogConfig

TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")
SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=64)


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _open(dir: Path, config: LogConfig = SMALL, clock: FakeClock | None = None) -> PartitionLog:
    return PartitionLog.open(dir, "orders", 3, config, TOPIC_ID, clock_ms=clock or FakeClock())


def _produce(
    log: PartitionLog, n_records: int = 3, ts: int = 1000, value: bytes = b"v" * 30
) -> AppendInfo:
    buf = bytearray(build_batch([Record(-1, ts + i, b"k", value) for i in range(n_records)]))
    return log.append_as_leader(buf, validate_produce_records(buf, 10**7), leader_epoch=4)


def _consume_all(log: PartitionLog, max_bytes: int = 300) -> list[Record]:
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes).records
        headers = list(iter_batch_headers(data))
        assert headers, f"no progress at offset {offset}"
        for header in headers:
            records += [r for r in decode_batch_records(data, header) if r.offset >= offset]
        offset = headers[-1].next_offset
    return records


def test_append_assigns_offsets_and_leader_epoch(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    first = _produce(log, 3)
    second = _produce(log, 2)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert first.log_append_time_ms == -1
    assert log.log_end_offset == 5
    data = log.read(0, 10**6).records
    assert [(h.base_offset, h.partition_leader_epoch) for h in iter_batch_headers(data)] == [
        (0, 4),
        (3, 4),
    ]


def test_roll_by_size_names_segments_by_20_digit_base_offset(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for _ in range(20):
        _produce(log, 3)  # ~190-byte batches, 1000-byte segments: 5 batches each
    names = sorted(n for n in os.listdir(log.dir) if n.endswith(".log"))
    assert names == [
        "00000000000000000000.log",
        "00000000000000000015.log",
        "00000000000000000030.log",
        "00000000000000000045.log",
    ]
    assert all(s.size_bytes <= SMALL.segment_bytes for s in log.segments)
    # rolled segments have trimmed indexes
    assert (
        os.path.getsize(log.dir / "00000000000000000000.index")
        == 8 * log.segments[0].offset_index.entries
    )


def test_read_across_segments_sees_every_record_once_in_order(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for i in range(30):
        _produce(log, 2, ts=1000 + 10 * i)
    assert len(log.segments) > 3
    records = _consume_all(log)
    assert [r.offset for r in records] == list(range(60))
    assert records[7].timestamp == 1031


def test_read_from_middle_of_a_batch_returns_that_whole_batch(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    _produce(log, 5)
    fetched = log.read(3, 10**6)
    [header] = list(iter_batch_headers(fetched.records))
    assert header.base_offset == 0 and fetched.position == 0


def test_read_respects_max_offset_and_offset_range(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    _produce(log, 2)
    _produce(log, 2)
    log.set_high_watermark(2)
    data = log.read(0, 10**6, max_offset=log.high_watermark).records
    assert [h.base_offset for h in iter_batch_headers(data)] == [0]
    assert log.read(2, 10**6, max_offset=2).records == b""
    assert log.read(4, 10**6).records == b""  # at log end
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 10**6)
    log.delete_records_before(2)
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 10**6)


def test_min_one_batch_returns_an_oversized_first_batch(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    _produce(log, 3)
    assert log.read(0, 10, min_one_batch=False).records == b""
    assert len(log.read(0, 10, min_one_batch=True).records) > 10


def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for i in range(30):
        _produce(log, 2, ts=1000 + 10 * i)  # batch i: timestamps 1000+10i, +1
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1002) == (2, 1010)
    assert log.offset_for_timestamp(1255) == (52, 1260)
    assert log.offset_for_timestamp(1291) == (59, 1291)
    assert log.offset_for_timestamp(1292) is None
    assert log.offset_for_timestamp(1255, max_offset=52) is None


def test_max_timestamp_offset(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    assert log.max_timestamp_offset() == (-1, -1)
    _produce(log, 2, ts=1000)
    _produce(log, 3, ts=9000)  # max 9002 at offset 4
    for _ in range(10):
        _produce(log, 2, ts=2000)
    assert len(log.segments) > 1
    assert log.max_timestamp_offset() == (4, 9002)


def test_log_append_time_overrides_record_timestamps(tmp_path: Path) -> None:
    clock = FakeClock(777_000)
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = _open(tmp_path / "orders-3", config, clock)
    info = _produce(log, 3, ts=5)
    assert info.log_append_time_ms == 777_000 and info.max_timestamp == 777_000
    data = log.read(0, 10**6).records
    [header] = list(iter_batch_headers(data))
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert {r.timestamp for r in decode_batch_records(data, header)} == {777_000}
    assert log.offset_for_timestamp(777_000) == (0, 777_000)


def test_roll_by_time_uses_first_batch_timestamp_and_jitter_free_segment_ms(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_ms=1000)
    log = _open(tmp_path / "orders-3", config)
    _produce(log, 1, ts=10_000)
    _produce(log, 1, ts=11_000)  # waited exactly segment.ms: not more, no roll
    assert len(log.segments) == 1
    _produce(log, 1, ts=11_001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_offset_index_is_full(tmp_path: Path) -> None:
    config = LogConfig(segment_index_bytes=24, index_interval_bytes=1)  # 3 entries
    log = _open(tmp_path / "orders-3", config)
    for _ in range(10):
        _produce(log, 1)
    assert len(log.segments) > 1
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in _consume_all(log)] == list(range(10))


def test_reopen_after_close_keeps_data_indexes_and_offsets(tmp_path: Path) -> None:
    dir = tmp_path / "orders-3"
    log = _open(dir)
    for i in range(25):
        _produce(log, 2, ts=1000 + i)
    before = _consume_all(log)
    segment_bases = [s.base_offset for s in log.segments]
    index_bytes = (dir / "00000000000000000000.index").read_bytes()
    log.close()
    reopened = _open(dir)
    assert reopened.log_end_offset == 50
    assert reopened.high_watermark == 50
    assert reopened.log_start_offset == 0
    assert [s.base_offset for s in reopened.segments] == segment_bases
    assert (dir / "00000000000000000000.index").read_bytes() == index_bytes
    assert _consume_all(reopened) == before
    assert _produce(reopened, 1).first_offset == 50


def test_torn_tail_is_truncated_on_reopen(tmp_path: Path) -> None:
    dir = tmp_path / "orders-3"
    log = _open(dir, LogConfig())
    for _ in range(5):
        _produce(log, 2)
    good_size = log.size_bytes()
    log.close()
    last_log = dir / "00000000000000000000.log"
    with open(last_log, "ab") as f:
        f.write(build_batch([Record(-1, 1, b"k", b"x" * 100)], base_offset=10)[:-7])
    reopened = _open(dir, LogConfig())
    assert reopened.truncated_on_load_bytes > 0
    assert reopened.size_bytes() == good_size == os.path.getsize(last_log)
    assert reopened.log_end_offset == 10
    assert _produce(reopened, 1).first_offset == 10
    assert [r.offset for r in _consume_all(reopened)] == list(range(11))


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    dir = tmp_path / "orders-3"
    log = _open(dir)
    for _ in range(20):
        _produce(log, 2)
    log.close()
    expected = {p.name: p.read_bytes() for p in dir.iterdir() if "index" in p.name}
    for name in expected:
        (dir / name).unlink()
    reopened = _open(dir)
    assert reopened.offset_for_timestamp(1001) == (1, 1001)
    reopened.close()  # the active segment's indexes are preallocated until closed
    assert {p.name: p.read_bytes() for p in dir.iterdir() if "index" in p.name} == expected


def test_orphan_index_files_are_removed(tmp_path: Path) -> None:
    dir = tmp_path / "orders-3"
    dir.mkdir()
    (dir / "00000000000000000077.index").write_bytes(b"\x00" * 8)
    (dir / "00000000000000000012.log.deleted").write_bytes(b"x")
    log = _open(dir)
    assert sorted(os.listdir(dir)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ]
    log.close()


def test_partition_metadata_uses_kafka_format(tmp_path: Path) -> None:
    dir = tmp_path / "orders-3"
    _open(dir).close()
    text = (dir / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {kafka_uuid_string(TOPIC_ID)}\n"
    assert kafka_uuid_string(TOPIC_ID) == "axxdNh8NS2qcjhI0VniQqw"
    assert parse_kafka_uuid("axxdNh8NS2qcjhI0VniQqw") == TOPIC_ID
    with pytest.raises(InconsistentTopicId):
        PartitionLog.open(dir, "orders", 3, SMALL, uuid.uuid4())


def test_truncate_to_removes_later_segments_and_allows_appends(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for _ in range(20):
        _produce(log, 2)
    assert len(log.segments) >= 3
    log.set_high_watermark(log.log_end_offset)
    assert log.truncate_to(13)  # inside batch 12..13: cut at 12
    assert log.log_end_offset == 12
    assert log.high_watermark == 12
    assert log.segments[-1].base_offset <= 12
    assert _produce(log, 1).first_offset == 12
    assert [r.offset for r in _consume_all(log)] == list(range(13))
    assert not log.truncate_to(100)


def test_truncate_below_first_segment_starts_fresh(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    _produce(log, 2)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.size_bytes() == 0


def test_delete_records_before_advances_start_and_drops_segments(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for _ in range(20):
        _produce(log, 2)
    log.set_high_watermark(log.log_end_offset)
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert log.segments[0].base_offset == second_base
    assert not (log.dir / "00000000000000000000.log").exists()
    records = _consume_all(log)
    assert records[0].offset == second_base + 1
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.high_watermark + 1)


def test_delete_oldest_segments_for_retention(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    for _ in range(20):
        _produce(log, 2)
    log.set_high_watermark(log.log_end_offset)
    count = len(log.segments)
    active = log.active_segment
    # Closed segments only: the active segment is never deleted by retention.
    assert log.delete_oldest_segments(lambda s: True) == count - 1
    assert log.segments == [active]
    assert log.log_start_offset == active.base_offset
    assert log.log_end_offset == 40


def test_flush_advances_recovery_point_and_flush_messages_policy(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3", LogConfig(flush_messages=4))
    _produce(log, 2)
    assert log.recovery_point == 0
    _produce(log, 2)
    assert log.recovery_point == 4
    _produce(log, 1)
    log.flush()
    assert log.recovery_point == 5


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = _open(tmp_path / "orders-3")
    _produce(log)
    log.delete()
    assert not (tmp_path / "orders-3").exists()


# -- model-based property test ---------------------------------------------------------

op_strategy = st.one_of(
    st.tuples(
        st.just("append"),
        st.integers(min_value=1, max_value=4),  # records
        st.integers(min_value=0, max_value=120),  # value bytes
        st.integers(min_value=0, max_value=50),  # timestamp step (may repeat)
    ),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=200)),
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(op_strategy, max_size=40),
    segment_bytes=st.integers(min_value=100, max_value=3000),
    index_interval_bytes=st.integers(min_value=1, max_value=500),
    segment_index_bytes=st.sampled_from([16, 36, 96, 10_000]),
)
def test_log_matches_a_simple_model_through_appends_reopens_and_truncations(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple],
    segment_bytes: int,
    index_interval_bytes: int,
    segment_index_bytes: int,
) -> None:
    config = LogConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=index_interval_bytes,
        segment_index_bytes=segment_index_bytes,
    )
    dir = tmp_path_factory.mktemp("model") / "orders-3"
    log = _open(dir, config)
    model: list[tuple[int, int, bytes]] = []  # (offset, timestamp, value) per record
    batch_starts: list[int] = []
    ts = 1000
    for op in ops:
        if op[0] == "append":
            _, n, size, step = op
            values = [bytes([len(model) % 251]) * size for _ in range(n)]
            buf = bytearray(
                build_batch([Record(-1, ts + i, None, v) for i, v in enumerate(values)])
            )
            info = log.append_as_leader(buf, validate_produce_records(buf, 10**7), 1)
            assert info.first_offset == len(model)
            batch_starts.append(len(model))
            model += [(info.first_offset + i, ts + i, v) for i, v in enumerate(values)]
            ts += step
        elif op[0] == "reopen":
            log.close()
            log = _open(dir, config)
        else:
            target = op[1]
            if target < len(model):
                cut = max(b for b in batch_starts if b <= target)
                log.set_high_watermark(log.log_end_offset)
                log.truncate_to(target)
                model = model[:cut]
                batch_starts = [b for b in batch_starts if b < cut]
        assert log.log_end_offset == len(model)
    got = [(r.offset, r.timestamp, r.value) for r in _consume_all(log, max_bytes=200)]
    assert got == model
    for probe in {1000, ts - 1, ts, (1000 + ts) // 2}:
        expected = next(((o, t) for o, t, _ in model if t >= probe), None)
        assert log.offset_for_timestamp(probe) == expected
    if model:
        top = max(t for _, t, _ in model)
        assert log.max_timestamp_offset() == next((o, t) for o, t, _ in model if t == top)
    log.close()


def test_a_tear_at_any_byte_recovers_to_the_preceding_batch_boundary(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=50)
    source = tmp_path / "src" / "orders-3"
    log = _open(source, config)
    for i in range(4):
        _produce(log, 2, ts=1000 + i, value=bytes([i]) * 20)
    log.close()
    data = (source / "00000000000000000000.log").read_bytes()
    boundaries = [h.position + h.size for h in iter_batch_headers(data)]
    for cut in range(0, len(data), 7):
        dir = tmp_path / f"cut{cut}" / "orders-3"
        dir.mkdir(parents=True)
        (dir / "00000000000000000000.log").write_bytes(data[:cut])
        (dir / "00000000000000000000.index").write_bytes(
            (source / "00000000000000000000.index").read_bytes()
        )
        reopened = _open(dir, config)
        kept_batches = sum(1 for b in boundaries if b <= cut)
        assert reopened.size_bytes() == (boundaries[kept_batches - 1] if kept_batches else 0)
        assert reopened.log_end_offset == 2 * kept_batches
        assert len(_consume_all(reopened)) == reopened.log_end_offset
        assert _produce(reopened, 1).first_offset == reopened.log_end_offset - 1
        reopened.close()
