"""Start-up after a crash costs what the unflushed tail costs (issue 15.4).

A log whose recovery point is its log end is opened as after a clean shutdown
(no CRC scan, its leader-epoch file not rewritten, its preallocated indexes not
read whole); one with an unflushed tail is scanned from the segment holding
the recovery point, as before; the load counts both."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

CLUSTER = "YmVuY2gtcmVjb3ZlcnktMDAw"
TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")
CONFIG = LogConfig(segment_bytes=4096)


def _append(log: PartitionLog, n: int = 3, epoch: int = 0) -> None:
    buf = bytearray(build_batch([Record(-1, 1000 + i, b"k", b"v" * 100) for i in range(n)]))
    log.append_as_leader(buf, validate_produce_records(buf, len(buf) + 1), epoch)


def _crashed_dir(root: Path, partitions: int, unflushed: set[int]) -> None:
    """Logs left as kill -9 leaves them: the active indexes preallocated, no
    clean-shutdown marker, the recovery points checkpointed at the last flush."""
    manager = LogManager([root], CONFIG, CLUSTER, 1)
    manager.startup()
    for p in range(partitions):
        log = manager.get_or_create("t", p, TOPIC_ID, CONFIG)
        for _ in range(12):  # a few segments
            _append(log, epoch=3)
        log.flush()
    manager.checkpoint_recovery_points()
    for p in unflushed:
        _append(manager.get("t", p), epoch=4)  # type: ignore[arg-type]
    # no close, no marker: the process died here
    assert not (root / CLEAN_SHUTDOWN_FILE).exists()


def test_a_crash_with_nothing_unflushed_recovers_nothing(tmp_path: Path) -> None:
    root = tmp_path / "d"
    _crashed_dir(root, 6, unflushed={2})
    index = root / "t-0" / max(p.name for p in (root / "t-0").glob("*.index"))
    assert index.stat().st_size == CONFIG.segment_index_bytes  # preallocated, as left
    epochs = {p: (root / f"t-{p}" / "leader-epoch-checkpoint").stat().st_mtime_ns
              for p in range(6)}
    again = LogManager([root], CONFIG, CLUSTER, 1, recovery_threads=3)
    again.startup()
    progress = again.load_progress
    assert (progress.partitions_total, progress.partitions_loaded) == (6, 6)
    assert progress.partitions_recovered == 1 and progress.bytes_recovered > 0
    for p in range(6):
        log = again.get("t", p)
        assert log is not None
        want = 36 + (3 if p == 2 else 0)
        assert log.log_end_offset == want and log.recovery_point == 36
        if p != 2:
            assert log.recovered_on_load_bytes == 0
            assert (root / f"t-{p}" / "leader-epoch-checkpoint").stat().st_mtime_ns == epochs[p]
        assert log.leader_epoch_cache.latest_epoch() == (4 if p == 2 else 3)
    assert again.get("t", 2).recovered_on_load_bytes > 0  # type: ignore[union-attr]
    for log in again.all_logs():
        log.close()


def test_a_torn_tail_past_the_recovery_point_is_cut(tmp_path: Path) -> None:
    root = tmp_path / "d"
    _crashed_dir(root, 1, unflushed={0})
    active = max((root / "t-0").glob("*.log"))
    os.truncate(active, active.stat().st_size - 7)  # the unflushed batch, torn
    again = LogManager([root], CONFIG, CLUSTER, 1)
    again.startup()
    log = again.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 36 and log.truncated_on_load_bytes > 0
    assert again.load_progress.partitions_recovered == 1
    for log in again.all_logs():
        log.close()


def test_a_restart_of_an_unchanged_empty_partition_writes_no_epoch_checkpoint(
        tmp_path: Path) -> None:
    """An empty partition's only epoch entry ("0 0": the leader's epoch begins
    at the log end) survives the load, so neither the load nor becoming leader
    in that epoch again rewrites the file: after a clean stop and after kill -9
    (issue 15.4: two fsyncs per empty partition on every start before)."""
    root = tmp_path / "d"
    manager = LogManager([root], CONFIG, CLUSTER, 1)
    manager.startup()
    for p in range(3):
        log = manager.get_or_create("t", p, TOPIC_ID, CONFIG)
        log.assign_leader_epoch(0)
        if p == 2:
            _append(log)  # a partition with data, for contrast: "0 0" and leo 3
    manager.checkpoint_recovery_points()
    manager.shutdown()
    checkpoints = [root / f"t-{p}" / "leader-epoch-checkpoint" for p in range(3)]
    before = [(c.stat().st_ino, c.stat().st_mtime_ns) for c in checkpoints]
    for stop_cleanly in (True, False, True):  # the third start follows a kill -9
        again = LogManager([root], CONFIG, CLUSTER, 1)
        again.startup()
        for p in range(3):
            log = again.get("t", p)
            assert log is not None
            assert log.leader_epoch_cache.entries == [(0, 0)]
            assert not log.assign_leader_epoch(0)  # becoming leader again: no change
        if stop_cleanly:
            again.shutdown()
        else:
            assert not (root / CLEAN_SHUTDOWN_FILE).exists()  # killed here: no marker
        assert [(c.stat().st_ino, c.stat().st_mtime_ns) for c in checkpoints] == before
    # a new epoch is still written, once
    last = LogManager([root], CONFIG, CLUSTER, 1)
    last.startup()
    log = last.get("t", 0)
    assert log is not None and log.assign_leader_epoch(1)
    assert log.leader_epoch_cache.entries == [(1, 0)]
    assert checkpoints[0].read_text().split("\n")[2] == "1 0"
    last.shutdown()
