"""A wall clock stepped back: retention deletes nothing, renamed segments are
still unlinked, time-based flushes still happen (see odradek/clock.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek import clock
from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")


class SteppedClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _append(log: PartitionLog, ts: int) -> None:
    buf = bytearray(build_batch([Record(-1, ts, b"k", b"v" * 200)]))
    log.append_as_leader(buf, validate_produce_records(buf, 10**7), leader_epoch=0)


def _log(tmp_path: Path, wall: SteppedClock, **config: int) -> PartitionLog:
    settings = {"segment_bytes": 1000, **config}
    return PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(**settings), TOPIC_ID,
                             clock_ms=wall)


def test_step_back_deletes_nothing_and_unlinks_renamed_files(tmp_path: Path) -> None:
    wall = SteppedClock(10_000_000)
    log = _log(tmp_path, wall, retention_ms=60_000, file_delete_delay_ms=60_000)
    for _ in range(5):
        _append(log, wall.now_ms - 120_000)
    for _ in range(5):
        _append(log, wall.now_ms)
    log.set_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments()
    assert deleted > 0
    start = log.log_start_offset
    wall.now_ms -= 3_600_000  # an hour back
    assert log.delete_old_segments() == 0
    assert log.log_start_offset == start
    # Renamed a minute of file.delete.delay.ms ago by the old clock; the step back
    # must not keep them (and their disk space) for the hour of the step.
    assert log.delete_pending_files() == deleted
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_a_time_read_before_the_renames_of_the_same_pass_keeps_their_delay(
        tmp_path: Path) -> None:
    """run_retention reads `now` once, then renames: files renamed a few ms after that
    `now` are not taken for a step back, and wait their whole file.delete.delay.ms."""
    wall = SteppedClock(10_000_000)
    log = _log(tmp_path, wall, retention_ms=60_000, file_delete_delay_ms=60_000)
    for _ in range(5):
        _append(log, wall.now_ms - 120_000)
    for _ in range(5):
        _append(log, wall.now_ms)
    log.set_high_watermark(log.log_end_offset)
    before = wall.now_ms
    wall.now_ms += 15  # the renames come a little after the pass read its time
    assert log.delete_old_segments() > 0
    assert log.delete_pending_files(now_ms=before) == 0
    assert list((tmp_path / "t-0").glob("*.deleted"))
    wall.now_ms += 60_000
    assert log.delete_pending_files() > 0
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_step_back_does_not_hold_a_time_based_flush(tmp_path: Path) -> None:
    wall = SteppedClock(10_000_000)
    manager = LogManager([tmp_path / "d"], LogConfig(flush_ms=1_000), "MkU3OEVBNTcwNTJENDM2Qk", 1,
                         clock_ms=wall)
    manager.startup()
    try:
        log = manager.get_or_create("t", 0, TOPIC_ID)
        _append(log, wall.now_ms)
        log.flush()
        _append(log, wall.now_ms)
        wall.now_ms -= 3_600_000
        assert manager.flush_due_logs() == 1
    finally:
        manager.shutdown()


def test_steady_clock_reads_wall_units_and_never_goes_back() -> None:
    a = clock.steady_ms()
    assert abs(a - clock.wall_ms()) < 60_000
    b = clock.steady_ms()
    assert b >= a
