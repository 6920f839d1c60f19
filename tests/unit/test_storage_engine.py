"""The storage engine's lifecycle: leader epoch cache, checkpoints, clean shutdown,
recovery from the recovery point, retention with asynchronous deletes, offline
log dirs, the group-commit flusher, and dump-log's checks."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from pathlib import Path

import pytest

from odradek.cli import main as cli
from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.checkpoint import OffsetCheckpointFile, read_checkpoint_lines
from odradek.storage.flusher import Flusher
from odradek.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    UNDEFINED_EPOCH,
    LeaderEpochFileCache,
)
from odradek.storage.log import KafkaStorageError, PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")
SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=64, file_delete_delay_ms=0)


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _append(log: PartitionLog, n: int = 3, ts: int = 1000, epoch: int = 0) -> None:
    buf = bytearray(build_batch([Record(-1, ts + i, b"k", b"v" * 30) for i in range(n)]))
    log.append_as_leader(buf, validate_produce_records(buf, 10**7), leader_epoch=epoch)


def _manager(dirs: list[Path], config: LogConfig = SMALL, clock: FakeClock | None = None
             ) -> LogManager:
    manager = LogManager(dirs, config, CLUSTER_ID, 1, clock_ms=clock or FakeClock())
    manager.startup()
    return manager


# -- leader epoch cache ---------------------------------------------------------------------


def test_leader_epoch_cache_answers_end_offsets_like_kafka(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    assert cache.end_offset_for(0, 10) == (UNDEFINED_EPOCH, -1)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch: no change
    cache.assign(3, 100)
    cache.assign(5, 250)
    assert cache.entries == [(0, 0), (3, 100), (5, 250)]
    assert cache.end_offset_for(0, 300) == (0, 100)
    assert cache.end_offset_for(2, 300) == (0, 100)  # largest epoch <= 2 is 0
    assert cache.end_offset_for(4, 300) == (3, 250)
    assert cache.end_offset_for(5, 300) == (5, 300)
    assert cache.end_offset_for(9, 300) == (5, 300)
    assert cache.epoch_for_offset(120) == 3
    # The file is Kafka's checkpoint format and reloads to the same entries.
    assert read_checkpoint_lines(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE) == [
        "0 0", "3 100", "5 250"]
    assert LeaderEpochFileCache.load(tmp_path).entries == cache.entries
    cache.truncate_from_end(200)
    assert cache.entries == [(0, 0), (3, 100)]
    cache.truncate_from_start(150)
    assert cache.entries == [(3, 150)]


def test_corrupt_leader_epoch_checkpoint_loads_empty(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n2\n5 10\n3 20\n")
    assert LeaderEpochFileCache.load(tmp_path).entries == []


def test_log_learns_epochs_from_appends_and_from_recovery(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, SMALL, TOPIC_ID, clock_ms=FakeClock())
    _append(log, epoch=0)
    _append(log, epoch=2)
    _append(log, epoch=2)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    log.close()
    (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    reopened = PartitionLog.open(tmp_path / "t-0", "t", 0, SMALL, TOPIC_ID,
                                 clock_ms=FakeClock(), recovery_point=0)
    assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    reopened.close()


# -- checkpoints, clean shutdown, recovery ---------------------------------------------------


def test_shutdown_writes_checkpoints_and_clean_marker(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d"])
    log = manager.get_or_create("t", 0, TOPIC_ID)
    for _ in range(20):
        _append(log)
    log.set_high_watermark(log.log_end_offset)
    log.delete_records_before(7)
    manager.shutdown()
    d = tmp_path / "d"
    assert OffsetCheckpointFile(d / RECOVERY_POINT_CHECKPOINT).read() == {("t", 0): 60}
    assert OffsetCheckpointFile(d / HIGH_WATERMARK_CHECKPOINT).read() == {("t", 0): 60}
    assert OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).read() == {("t", 0): 7}
    assert (d / RECOVERY_POINT_CHECKPOINT).read_text().startswith("0\n1\nt 0 60\n")
    assert (d / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":0,"brokerEpoch":-1}'
    again = _manager([d])
    assert again.had_clean_shutdown[d] is True
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # removed once loaded
    reopened = again.get("t", 0)
    assert reopened is not None
    assert (reopened.log_start_offset, reopened.log_end_offset) == (7, 60)
    assert reopened.recovery_point == 60 and reopened.high_watermark == 60
    again.shutdown()


def test_unclean_start_recovers_only_after_the_recovery_point(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d"])
    log = manager.get_or_create("t", 0, TOPIC_ID)
    for _ in range(20):
        _append(log)
    log.flush()
    manager.checkpoint_recovery_points()
    segments = log.segments
    assert len(segments) >= 4
    # Corrupt a flushed (below the recovery point) segment's byte and the tail.
    # No clean-shutdown marker: "crash".
    first = segments[0].log_path
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF
    first.write_bytes(bytes(data))
    last = segments[-1].log_path
    os.truncate(last, last.stat().st_size - 5)
    again = _manager([tmp_path / "d"])
    reopened = again.get("t", 0)
    assert reopened is not None
    # Only the tail was scanned: the last batch was cut, the flushed corruption
    # was not looked at (Kafka's trade: start-up time follows the unflushed tail).
    assert reopened.log_end_offset == 57
    assert reopened.truncated_on_load_bytes > 0
    assert reopened.recovery_point == 57


def test_corrupt_middle_segment_ends_the_log_there(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, SMALL, TOPIC_ID, clock_ms=FakeClock())
    for _ in range(20):
        _append(log)
    segments = log.segments
    log.close()
    second = segments[1]
    data = bytearray(second.log_path.read_bytes())
    data[-10] ^= 0xFF  # the last batch of the second segment
    second.log_path.write_bytes(bytes(data))
    reopened = PartitionLog.open(tmp_path / "t-0", "t", 0, SMALL, TOPIC_ID,
                                 clock_ms=FakeClock(), recovery_point=0)
    assert [s.base_offset for s in reopened.segments] == [0, second.base_offset]
    assert reopened.log_end_offset == second.next_offset - 3
    assert not segments[2].log_path.exists()
    _append(reopened)  # the repaired log takes appends at its new end
    assert reopened.log_end_offset == second.next_offset
    reopened.close()


def test_missing_index_is_rebuilt_after_a_clean_shutdown(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d"])
    log = manager.get_or_create("t", 0, TOPIC_ID)
    for i in range(20):
        _append(log, ts=1000 + 10 * i)
    first = log.segments[0]
    expected = {p.name: p.read_bytes() for p in (first.offset_index.path, first.time_index.path)}
    manager.shutdown()
    for name in expected:
        (tmp_path / "d" / "t-0" / name).unlink()
    again = _manager([tmp_path / "d"])
    reopened = again.get("t", 0)
    assert reopened is not None
    assert reopened.offset_for_timestamp(1015) == (6, 1020)
    again.shutdown()
    assert {n: (tmp_path / "d" / "t-0" / n).read_bytes() for n in expected} == expected


# -- retention ---------------------------------------------------------------------------


def test_retention_by_time_deletes_closed_segments_asynchronously(tmp_path: Path) -> None:
    clock = FakeClock(10_000_000)
    config = LogConfig(segment_bytes=1000, retention_ms=60_000, file_delete_delay_ms=5_000)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID, clock_ms=clock)
    for _ in range(10):
        _append(log, ts=clock.now_ms - 120_000)  # two minutes old
    for _ in range(10):
        _append(log, ts=clock.now_ms)
    log.set_high_watermark(log.log_end_offset)
    old = [s for s in log.segments if s.max_timestamp < clock.now_ms - 60_000]
    assert old
    deleted = log.delete_old_segments()
    assert deleted == len(old)
    assert log.log_start_offset == log.segments[0].base_offset == old[-1].next_offset
    renamed = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted"))
    assert renamed and all(n.startswith(f"{s.base_offset:020d}") for n, s in
                           zip(renamed[::3], old))
    assert log.delete_pending_files() == 0  # file.delete.delay.ms not yet passed
    clock.now_ms += 5_000
    assert log.delete_pending_files() == len(old)
    assert not any(p.name.endswith(".deleted") for p in (tmp_path / "t-0").iterdir())


def test_retention_by_size_keeps_the_active_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=1500, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID, clock_ms=FakeClock())
    for _ in range(30):
        _append(log)
    log.set_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.size_bytes() <= 1500 + 1000
    assert log.size_bytes() - log.segments[0].size_bytes < 1500
    # retention.bytes=0 still never deletes the active segment
    log.update_config(LogConfig(segment_bytes=1000, retention_bytes=0, retention_ms=-1))
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.log_start_offset == log.active_segment.base_offset


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=0)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID, clock_ms=FakeClock())
    for _ in range(30):
        _append(log)
    log.set_high_watermark(0)
    assert log.delete_old_segments() == 0


# -- offline dirs ---------------------------------------------------------------------------


def test_io_error_takes_only_that_dir_offline(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "a", tmp_path / "b"])
    log_a = manager.get_or_create("t", 0, TOPIC_ID)
    log_b = manager.get_or_create("t", 1, TOPIC_ID)
    assert {manager.dir_of(log_a), manager.dir_of(log_b)} == {tmp_path / "a", tmp_path / "b"}
    _append(log_a)
    shutil.rmtree(manager.dir_of(log_a) / "t-0")
    with pytest.raises(KafkaStorageError):
        for _ in range(50):  # the next roll cannot create its files
            _append(log_a)
    assert manager.offline_dirs.keys() == {manager.dir_of(log_a)}
    with pytest.raises(KafkaStorageError):
        log_a.read(0, 1000)
    _append(log_b)  # the other dir keeps working
    new = manager.get_or_create("u", 0, TOPIC_ID)
    assert manager.dir_of(new) == manager.dir_of(log_b)
    manager.shutdown()
    assert (tmp_path / "b" / CLEAN_SHUTDOWN_FILE).exists()
    assert not (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()


def test_unusable_dir_at_startup_starts_offline(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a dir")
    manager = _manager([tmp_path / "file", tmp_path / "b"])
    assert list(manager.offline_dirs) == [tmp_path / "file"]
    log = manager.get_or_create("t", 0, TOPIC_ID)
    assert manager.dir_of(log) == tmp_path / "b"
    manager.shutdown()


# -- flusher ------------------------------------------------------------------------------------


def test_flusher_groups_fsyncs_and_moves_the_recovery_point(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int, int]:
        flusher = Flusher(asyncio.get_running_loop())
        log = PartitionLog.open(tmp_path / "t-0", "t", 0,
                                LogConfig(flush_messages=1), TOPIC_ID)
        log.flusher = flusher
        waits = []
        for _ in range(200):
            buf = bytearray(build_batch([Record(value=b"x")]))
            info = log.append_as_leader(buf, validate_produce_records(buf, 10**6), 0)
            assert info.flush_needed
            waits.append(flusher.request_flush(log))
        await asyncio.gather(*waits)
        flusher.shutdown()
        log.close()
        return flusher.rounds, log.recovery_point, log.log_end_offset

    rounds, recovery_point, leo = asyncio.run(scenario())
    assert recovery_point == leo == 200
    assert rounds <= 3  # 200 appends waited for at most a few fsyncs


# -- dump-log -----------------------------------------------------------------------------------


def test_dump_log_verify_finds_corruption(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, SMALL, TOPIC_ID, clock_ms=FakeClock())
    for i in range(20):
        _append(log, ts=1000 + i)
    log.close()
    files = sorted(str(p) for p in (tmp_path / "t-0").iterdir()
                   if p.suffix in (".log", ".index", ".timeindex"))
    assert cli.main(["dump-log", "--verify", "--deep-iteration", "--files", ",".join(files)]) == 0
    assert "no problems found" in capsys.readouterr().out
    log_file = Path(files[0]).with_suffix(".log")
    assert cli.main(["dump-log", "--print-data-log", "--files", str(log_file)]) == 0
    out = capsys.readouterr().out
    assert "baseOffset: 0 lastOffset: 2 count: 3" in out and "| offset: 1 CreateTime: 1001" in out
    data = bytearray(log_file.read_bytes())
    data[80] ^= 0x01
    log_file.write_bytes(bytes(data))
    assert cli.main(["dump-log", "--verify", "--files", str(log_file)]) == 1
    assert "fails its CRC" in capsys.readouterr().out
    index = log_file.with_suffix(".index")
    raw = bytearray(index.read_bytes())
    raw[3] ^= 0x01  # first entry's relative offset
    index.write_bytes(bytes(raw))
    assert cli.main(["dump-log", "--verify-index-only", "--files", str(index)]) == 1
    assert "Mismatch" in capsys.readouterr().out


# -- roll --------------------------------------------------------------------------------------


def test_segment_jitter_shortens_segment_ms_by_the_segments_own_jitter(tmp_path: Path) -> None:
    clock = FakeClock()
    config = LogConfig(segment_ms=1000, segment_jitter_ms=500)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID, clock_ms=clock)
    _append(log, n=1, ts=10_000)
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < 500
    _append(log, n=1, ts=10_000 + 1000 - jitter)  # waited == segment.ms - jitter: no roll
    assert len(log.segments) == 1
    _append(log, n=1, ts=10_000 + 1001 - jitter)  # past it: roll
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_active_indexes_are_preallocated_to_whole_entries_and_trimmed_on_roll(
        tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, segment_index_bytes=100, index_interval_bytes=1)
    log = PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID, clock_ms=FakeClock())
    _append(log, n=1)
    active = log.active_segment
    # Kafka rounds segment.index.bytes down to whole entries: 12 * 8, 8 * 12.
    assert active.offset_index.path.stat().st_size == 96
    assert active.time_index.path.stat().st_size == 96
    for _ in range(10):
        _append(log, n=1)
    closed = log.segments[0]
    assert closed.offset_index.path.stat().st_size == 8 * closed.offset_index.entries
    assert closed.time_index.path.stat().st_size == 12 * closed.time_index.entries
    log.close()
