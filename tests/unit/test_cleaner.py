"""The log cleaner in one process: offset map, record scanning, cleaning rules, swaps."""

from __future__ import annotations

import os
import random
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.record_scan import check_records, scan_records
from odradek.protocol.records import (
    DELETE_HORIZON_MASK,
    Compression,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_batch_records,
    iter_batch_headers,
    parse_batch_header,
    validate_produce_records,
)
from odradek.storage.cleaner.cleaner import clean_log
from odradek.storage.cleaner.manager import (
    CleanerConfig,
    clean_now,
    cleanable_offsets,
    log_to_clean,
    make_task,
)
from odradek.storage.cleaner.offset_map import OffsetMap, OffsetMapFull, key_hash
from odradek.storage.cleaner.swap import commit_cleaned, complete_interrupted_swaps
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")
COMPACT = LogConfig(segment_bytes=4000, index_interval_bytes=256, cleanup_policy="compact",
                    delete_retention_ms=1000)
NOW_MS = 1_000_000_000


class Clock:
    def __init__(self, now_ms: int = NOW_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _open(dir: Path, config: LogConfig = COMPACT, clock: Clock | None = None) -> PartitionLog:
    return PartitionLog.open(dir / "t-0", "t", 0, config, TOPIC_ID, clock_ms=clock or Clock())


def _append(log: PartitionLog, records: list[Record], **batch: object) -> None:
    buf = bytearray(build_batch(records, **batch))  # type: ignore[arg-type]
    log.append_as_leader(buf, validate_produce_records(buf, 10**7, allow_control=True), 0)
    log.high_watermark = log.log_end_offset


def _fill(log: PartitionLog, n_batches: int, keys: int, seed: int = 1,
          tombstone_every: int = 0, codec: int = Compression.NONE) -> dict[bytes, bytes | None]:
    """Append ``n_batches`` batches of 5 updates over ``keys`` keys; returns the
    latest value per key."""
    rnd = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    n = 0
    for _ in range(n_batches):
        records = []
        for _ in range(5):
            key = f"key-{rnd.randrange(keys)}".encode()
            value = None if tombstone_every and n % tombstone_every == 0 else f"v{n}".encode()
            records.append(Record(-1, NOW_MS - 10_000 + n, key, value))
            latest[key] = value
            n += 1
        _append(log, records, compression=codec)
    return latest


def _close_active(log: PartitionLog) -> None:
    log.roll()
    log.high_watermark = log.log_end_offset
    log.flush()


def _read_all(log: PartitionLog) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**7).records
        headers = list(iter_batch_headers(data))
        assert headers, f"no progress at {offset}"
        for header in headers:
            out.extend(r for r in decode_batch_records(data, header) if r.offset >= offset)
            offset = header.next_offset
    return out


def _latest(records: list[Record]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records}


def _batches(log: PartitionLog) -> list:
    out = []
    for segment in log.segments:
        data = segment.read_batch(0, segment.size_bytes)
        out.extend((h, data) for h in iter_batch_headers(data))
    return out


CONFIG = CleanerConfig(dedupe_buffer_size=1024 * 1024)


# -- offset map ----------------------------------------------------------------------------


def test_offset_map_keeps_the_latest_offset_per_key() -> None:
    m = OffsetMap(24 * 100)
    assert m.slots == 100 and m.max_entries == 90
    m.put(b"a", 5)
    m.put(b"b", 6)
    m.put(b"a", 9)
    m.put(b"a", 7)  # an older offset never replaces a newer one
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c")) == (9, 6, -1)
    assert m.size == 2


def test_offset_map_never_grows_past_its_slots_and_clears() -> None:
    m = OffsetMap(24 * 8, load_factor=0.5)
    for i in range(8):
        m.put(f"k{i}".encode(), i)
    with pytest.raises(OffsetMapFull):
        m.put(b"one more", 99)
    assert all(m.get(f"k{i}".encode()) == i for i in range(8))
    m.clear()
    assert m.size == 0 and m.get(b"k1") == -1
    m.put(b"k1", 3)
    assert m.get(b"k1") == 3
    assert m.fits(24 * 8, 0.5) and not m.fits(24 * 9, 0.5)


# -- record scanning -------------------------------------------------------------------------

records_strategy = st.lists(
    st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=300),
              st.integers(0, 10**6)),
    min_size=1, max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(records_strategy, st.sampled_from(list(Compression)))
def test_scan_records_agrees_with_the_full_decoder(rows: list, codec: int) -> None:
    batch = build_batch([Record(-1, 10**12 + ts, k, v, (("h", b"x"),)) for k, v, ts in rows],
                        base_offset=100, compression=codec)
    header = parse_batch_header(batch)
    scanned = scan_records(batch, header)
    decoded = decode_batch_records(batch, header)
    assert [100 + d for d in scanned.offset_deltas] == [r.offset for r in decoded]
    assert scanned.keys == [r.key for r in decoded]
    assert scanned.null_values == [r.value is None for r in decoded]
    assert [header.base_timestamp + d for d in scanned.timestamp_deltas] == [
        r.timestamp for r in decoded]
    assert check_records(batch, header) == [
        i for i, r in enumerate(decoded) if r.key is None]


# -- cleaning ---------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                   Compression.LZ4, Compression.ZSTD])
def test_cleaning_keeps_exactly_the_latest_value_per_key(tmp_path: Path, codec: int) -> None:
    log = _open(tmp_path)
    latest = _fill(log, 300, keys=40, codec=codec)
    _close_active(log)
    before = {(h.base_offset, h.last_offset_delta) for h, _ in _batches(log)}
    size_before = log.size_bytes()
    _, result = clean_now(log, CONFIG, None, NOW_MS)
    assert result.end_offset == log.segments[-1].base_offset
    records = _read_all(log)
    assert _latest(records) == latest
    assert len(records) == len(latest)  # one record per key
    assert log.size_bytes() < size_before / 10
    for header, _ in _batches(log):
        assert header.compression == codec
        # batch boundaries stay where they were
        assert (header.base_offset, header.last_offset_delta) in before
    # the files are what a reload (index sanity checks, CRCs) accepts
    log.close()
    again = PartitionLog.open(tmp_path / "t-0", "t", 0, COMPACT, TOPIC_ID, clock_ms=Clock())
    assert _latest(_read_all(again)) == latest


def test_producer_fields_are_kept_and_a_producers_last_batch_stays_even_when_empty(
    tmp_path: Path,
) -> None:
    log = _open(tmp_path)
    _append(log, [Record(-1, NOW_MS, b"a", b"1"), Record(-1, NOW_MS, b"b", b"1")],
            producer_id=7, producer_epoch=2, base_sequence=0)
    _append(log, [Record(-1, NOW_MS, b"a", b"2"), Record(-1, NOW_MS, b"b", b"2")],
            producer_id=7, producer_epoch=2, base_sequence=2)
    _append(log, [Record(-1, NOW_MS, b"a", b"3"), Record(-1, NOW_MS, b"b", b"3")])
    _close_active(log)
    clean_now(log, CONFIG, None, NOW_MS)
    headers = [h for h, _ in _batches(log)]
    # The first producer batch is fully superseded and goes; the second is the
    # producer's last: kept as an empty batch with its sequence range.
    assert [(h.base_offset, h.records_count, h.producer_id, h.producer_epoch,
             h.base_sequence, h.last_offset_delta) for h in headers] == [
        (2, 0, 7, 2, 2, 1), (4, 2, -1, -1, -1, 1)]
    assert _latest(_read_all(log)) == {b"a": b"3", b"b": b"3"}


def test_tombstones_stay_for_delete_retention_after_cleaning_then_go(tmp_path: Path) -> None:
    log = _open(tmp_path)
    latest = _fill(log, 200, keys=30, tombstone_every=7)
    _close_active(log)
    tombstoned = {k for k, v in latest.items() if v is None}
    assert tombstoned
    _, result = clean_now(log, CONFIG, None, NOW_MS)
    assert _latest(_read_all(log)) == latest  # tombstones are still there
    horizon = NOW_MS + COMPACT.delete_retention_ms
    assert result.earliest_delete_horizon_ms == horizon
    marked = [h for h, _ in _batches(log) if h.attributes & DELETE_HORIZON_MASK]
    assert marked and all(h.base_timestamp == horizon for h in marked)
    # record timestamps survive the rebased deltas
    original = {r.key: r.timestamp for r in _read_all(log)}
    # before the horizon a second cleaning keeps them
    clean_now(log, CONFIG, result.end_offset, horizon - 1)
    assert _latest(_read_all(log)) == latest
    clean_now(log, CONFIG, result.end_offset, horizon)
    after = _read_all(log)
    assert _latest(after) == {k: v for k, v in latest.items() if v is not None}
    assert all(r.timestamp == original[r.key] for r in after)


def test_a_full_offset_map_cleans_in_several_rounds(tmp_path: Path) -> None:
    log = _open(tmp_path)
    latest = _fill(log, 400, keys=300)
    _close_active(log)
    small = CleanerConfig(dedupe_buffer_size=24 * 100)  # 90 keys a round
    checkpoint = None
    rounds = 0
    while True:
        ltc = log_to_clean(log, checkpoint, NOW_MS)
        if ltc.cleanable_bytes == 0:
            break
        _, result = clean_now(log, small, checkpoint, NOW_MS)
        assert result.map_entries <= 90
        assert result.end_offset > ltc.first_dirty_offset
        checkpoint = result.end_offset
        rounds += 1
        assert rounds < 100
    assert rounds > 3
    records = _read_all(log)
    assert _latest(records) == latest and len(records) == len(latest)


def test_records_past_the_map_and_the_active_segment_are_never_touched(
        tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log, 100, keys=10)
    _close_active(log)
    _append(log, [Record(-1, NOW_MS, b"key-1", b"active-1"),
                  Record(-1, NOW_MS, b"key-1", b"active-2")])
    active_before = log.active_segment.read_batch(0, log.active_segment.size_bytes)
    clean_now(log, CONFIG, None, NOW_MS)
    assert log.active_segment.read_batch(0, log.active_segment.size_bytes) == active_before
    assert [r.value for r in _read_all(log) if r.key == b"key-1"][-2:] == [
        b"active-1", b"active-2"]


def test_aborted_transactions_go_and_markers_go_once_empty_and_past_the_horizon(
    tmp_path: Path,
) -> None:
    log = _open(tmp_path)
    # producer 5: a committed transaction, producer 6: an aborted one.
    _append(log, [Record(-1, NOW_MS, b"c", b"committed")], producer_id=5, producer_epoch=0,
            base_sequence=0, is_transactional=True)
    _append(log, [Record(-1, NOW_MS, b"x", b"aborted")], producer_id=6, producer_epoch=0,
            base_sequence=0, is_transactional=True)
    for pid, kind in ((5, "commit"), (6, "abort")):
        buf = bytearray(build_control_batch(kind, pid, 0, 1, timestamp_ms=NOW_MS))
        log.append_as_leader(buf, validate_produce_records(buf, 10**7, allow_control=True), 0)
    _append(log, [Record(-1, NOW_MS, b"c", b"later")])
    _append(log, [Record(-1, NOW_MS, b"y", b"1")], producer_id=5, producer_epoch=0,
            base_sequence=1)
    _append(log, [Record(-1, NOW_MS, b"z", b"1")], producer_id=6, producer_epoch=0,
            base_sequence=1)
    log.high_watermark = log.log_end_offset
    _close_active(log)
    _, first = clean_now(log, CONFIG, None, NOW_MS)
    values = {r.key: r.value for r in _read_all(log)}
    assert b"x" not in values  # aborted data removed
    assert values[b"c"] == b"later"
    controls = [h for h, _ in _batches(log) if h.is_control]
    # Both markers governed data met in this cleaning: kept.
    assert len(controls) == 2
    _, _second = clean_now(log, CONFIG, first.end_offset, NOW_MS)
    controls = [h for h, _ in _batches(log) if h.is_control]
    # Now no data of either transaction remains: the markers get a horizon...
    assert len(controls) == 2 and all(h.attributes & DELETE_HORIZON_MASK for h in controls)
    clean_now(log, CONFIG, first.end_offset, NOW_MS + COMPACT.delete_retention_ms)
    # ... and go once it has passed.
    assert not [h for h, _ in _batches(log) if h.is_control]
    assert {r.key: r.value for r in _read_all(log)} == {b"c": b"later", b"y": b"1",
                                                         b"z": b"1"}


def test_log_append_time_batches_keep_their_max_timestamp(tmp_path: Path) -> None:
    log = _open(tmp_path)
    for i in range(20):
        _append(log, [Record(-1, NOW_MS, b"k", str(i).encode()),
                      Record(-1, NOW_MS, f"u{i}".encode(), b"1")],
                timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=NOW_MS + i)
    _close_active(log)
    clean_now(log, CONFIG, None, NOW_MS)
    batches = [h for h, _ in _batches(log)]
    assert all(h.timestamp_type == TimestampType.LOG_APPEND_TIME for h in batches)
    assert [h.max_timestamp for h in batches] == [NOW_MS + i for i in range(20)]


# -- when ------------------------------------------------------------------------------------


def test_dirty_section_stops_at_the_active_segment_and_min_compaction_lag(
        tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=2000, cleanup_policy="compact",
                       min_compaction_lag_ms=60_000)
    log = _open(tmp_path, config, clock)
    for i in range(60):
        ts = NOW_MS - 120_000 if i < 30 else NOW_MS
        _append(log, [Record(-1, ts, b"k", b"v" * 50)])
    _close_active(log)
    first_dirty, uncleanable = cleanable_offsets(log, None, NOW_MS)
    young = next(s for s in log.segments if s.largest_timestamp_ms() > NOW_MS - 60_000)
    assert first_dirty == 0 and uncleanable == young.base_offset
    ltc = log_to_clean(log, None, NOW_MS)
    assert 0 < ltc.cleanable_ratio <= 1
    # A checkpoint outside [log start, log end] is ignored.
    assert cleanable_offsets(log, 10**9, NOW_MS)[0] == 0


def test_max_compaction_lag_makes_a_log_due_whatever_its_ratio(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2000, cleanup_policy="compact",
                       max_compaction_lag_ms=1000)
    log = _open(tmp_path, config)
    for i in range(30):
        _append(log, [Record(-1, NOW_MS, f"k{i}".encode(), b"v" * 50)])
    _close_active(log)
    assert log_to_clean(log, None, NOW_MS).max_compaction_delay_ms == 0
    assert log_to_clean(log, None, NOW_MS + 5000).need_compaction_now


# -- swaps and crashes ----------------------------------------------------------------------------


def _cleaned_but_not_swapped(tmp_path: Path) -> tuple[PartitionLog, dict, object]:
    log = _open(tmp_path)
    latest = _fill(log, 150, keys=20)
    _close_active(log)
    # Bigger segments from now on: the cleaner groups the small old ones.
    log.update_config(replace(COMPACT, segment_bytes=12_000))
    ltc = log_to_clean(log, None, NOW_MS)
    result = clean_log(make_task(CONFIG, ltc, log.segments, NOW_MS))
    assert len(result.groups) >= 2 and len(result.groups[0].old_bases) >= 2
    return log, latest, result


def _reload(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", "t", 0, COMPACT, TOPIC_ID, clock_ms=Clock())


def _files(log_dir: Path) -> list[str]:
    return sorted(os.listdir(log_dir))


def test_crash_before_the_swap_is_decided_keeps_the_old_segments(tmp_path: Path) -> None:
    log, latest, _result = _cleaned_but_not_swapped(tmp_path)
    before = log.size_bytes()
    log.close()
    again = _reload(tmp_path)
    assert not [f for f in _files(again.dir) if f.endswith((".cleaned", ".swap"))]
    assert again.size_bytes() == before
    assert _latest(_read_all(again)) == latest


@pytest.mark.parametrize("stage", ["swap", "swap+deleted", "renamed-log-only"])
def test_crash_after_the_swap_is_decided_completes_it(tmp_path: Path, stage: str) -> None:
    log, latest, result = _cleaned_but_not_swapped(tmp_path)
    group = result.groups[0]  # type: ignore[attr-defined]
    commit_cleaned(log.dir, group)
    by_base = {s.base_offset: s for s in log.segments}
    old = [by_base[b] for b in group.old_bases]
    if stage != "swap":
        for segment in old[: max(1, len(old) // 2)] if stage == "swap+deleted" else old:
            segment.rename_to_deleted()
    if stage == "renamed-log-only":
        name = f"{group.base_offset:020d}.log"
        os.replace(log.dir / (name + ".swap"), log.dir / name)
    log.close()
    complete_interrupted_swaps(log.dir)
    names = _files(log.dir)
    assert not [f for f in names if f.endswith(".swap")]
    again = _reload(tmp_path)
    assert _latest(_read_all(again)) == latest
    # The cleaned segment is in place. (Old segments of the group past the cleaned
    # segment's last offset may stay, as in Kafka: they only hold superseded records.)
    first = again.segments[0]
    assert first.base_offset == group.base_offset and first.size_bytes == group.size_bytes
    assert not [f for f in _files(again.dir) if f.endswith((".cleaned", ".swap", ".deleted"))]


def test_cleaner_offset_checkpoint_uses_kafkas_format(tmp_path: Path) -> None:
    from odradek.storage.checkpoint import OffsetCheckpointFile

    path = tmp_path / "cleaner-offset-checkpoint"
    OffsetCheckpointFile(path).write({("t", 0): 1234, ("__consumer_offsets", 7): 5})
    assert path.read_text() == "0\n2\n__consumer_offsets 7 5\nt 0 1234\n"
    assert key_hash(b"x") == bytes.fromhex("9dd4e461268c8034f5c8564e155c67a6")


# -- choosing the log -----------------------------------------------------------------------------


def test_the_filthiest_compacted_log_is_chosen_and_never_twice_at_once(tmp_path: Path) -> None:
    from odradek.storage.cleaner.manager import LogCleaner
    from odradek.storage.log_manager import LogManager

    clock = Clock()
    manager = LogManager([tmp_path], COMPACT, "Y2xlYW5lci10ZXN0LWNsdXN0", 1, clock_ms=clock)
    manager.startup()
    logs = {}
    for name, policy in (("dirty", "compact"), ("half", "compact"), ("plain", "delete")):
        config = replace(COMPACT, cleanup_policy=policy, min_cleanable_dirty_ratio=0.1)
        logs[name] = manager.get_or_create(name, 0, uuid.uuid4(), config)
        _fill(logs[name], 100, keys=10)
        _close_active(logs[name])
    cleaner = LogCleaner(CleanerConfig(), manager, clock)
    # "half" was cleaned up to the middle of its log: a lower dirty ratio.
    middle = logs["half"].segments[len(logs["half"].segments) // 2].base_offset
    cleaner._first_dirty[("half", 0)] = middle
    first = cleaner.grab_filthiest_log()
    second = cleaner.grab_filthiest_log()
    assert first is not None and second is not None
    assert (first.log.topic, second.log.topic) == ("dirty", "half")
    assert first.cleanable_ratio == 1.0 and 0 < second.cleanable_ratio < 1
    assert cleaner.grab_filthiest_log() is None  # both in progress; "plain" is not compacted
    cleaner._in_progress.clear()
    cleaner._first_dirty[("dirty", 0)] = logs["dirty"].segments[-1].base_offset
    cleaner._first_dirty[("half", 0)] = logs["half"].segments[-1].base_offset
    assert cleaner.grab_filthiest_log() is None  # nothing dirty left
    # ... until a delete horizon passes: then the log is cleaned again.
    cleaner._delete_horizons[("half", 0)] = NOW_MS + 10
    assert cleaner.grab_filthiest_log() is None
    clock.now_ms = NOW_MS + 10
    again = cleaner.grab_filthiest_log()
    assert again is not None and again.log.topic == "half"
    manager.shutdown()


def test_the_throttler_keeps_io_under_its_rate() -> None:
    from odradek.storage.cleaner.segment_io import Throttler

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    throttler = Throttler(1_000_000, sleep=sleep, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 0.01  # the I/O itself took 10 ms
        throttler.maybe_throttle(100_000)
    # 1 MB at 1 MB/s takes a second: 0.1 s of I/O, 0.9 s of sleeping.
    assert sum(slept) == pytest.approx(0.9)
    before = len(slept)
    Throttler(float("inf"), sleep=slept.append).maybe_throttle(10**12)
    assert len(slept) == before
