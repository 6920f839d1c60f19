"""I/O faults a real disk rarely shows on demand, injected at the syscall layer
(issue 15.1): a short write then ENOSPC, an fsync that fails, a checkpoint
rename that fails. Each takes the dir offline (KAFKA_STORAGE_ERROR, as Kafka),
leaves no torn data behind, and a restart (a new LogManager on the same dir,
as after the repair) serves every record acknowledged before the fault."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pytest

from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.log import KafkaStorageError, PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import RECOVERY_POINT_CHECKPOINT, LogManager

CLUSTER = "YmVuY2gtcmVjb3ZlcnktMDAw"
CONFIG = LogConfig(segment_bytes=64 * 1024)
TOPIC_ID = uuid.UUID("6b1c5d36-1f0d-4b6a-9c8e-1234567890ab")


def _append(log: PartitionLog, i: int) -> int:
    buf = bytearray(build_batch([Record(-1, 1000, b"k", b"%04d" % i + b"x" * 200)]))
    return log.append_as_leader(buf, validate_produce_records(buf, len(buf) + 1), 0).first_offset


def _values(log: PartitionLog) -> list[bytes]:
    from odradek.protocol.records import (
        decode_batch_records,
        iter_batch_headers,
        parse_batch_header,
    )

    data = log.read(0, 10_000_000, log.log_end_offset, False).records
    out = []
    for h in iter_batch_headers(data):
        one = data[h.position:h.position + h.size]
        out += [(r.value or b"")[:4] for r in decode_batch_records(one, parse_batch_header(one))]
    return out


def _start(root: Path) -> tuple[LogManager, PartitionLog]:
    manager = LogManager([root], CONFIG, CLUSTER, 1)
    manager.startup()
    return manager, manager.get_or_create("t", 0, TOPIC_ID, CONFIG)


def test_short_write_then_enospc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, log = _start(tmp_path / "d")
    for i in range(5):
        _append(log, i)
    active = log.segments[-1].log_path
    size_before = active.stat().st_size
    real = os.pwrite
    calls = [0]

    def pwrite(fd: int, data: object, position: int) -> int:
        calls[0] += 1
        if calls[0] == 1:
            return real(fd, memoryview(data)[:50], position)  # type: ignore[arg-type]
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", pwrite)
    with pytest.raises(KafkaStorageError):
        _append(log, 5)
    monkeypatch.setattr(os, "pwrite", real)
    assert log.offline and manager.offline_dirs
    assert active.stat().st_size == size_before  # the half-written batch was cut
    again, log2 = _start(tmp_path / "d")
    assert log2.log_end_offset == 5 and _values(log2) == [b"%04d" % i for i in range(5)]
    _append(log2, 5)
    again.shutdown()


def test_fsync_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, log = _start(tmp_path / "d")
    for i in range(5):
        _append(log, i)

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KafkaStorageError):
        log.flush()
    monkeypatch.undo()
    assert log.offline and manager.offline_dirs
    assert log.recovery_point == 0  # nothing was said durable
    again, log2 = _start(tmp_path / "d")  # recovers the unflushed tail by CRC
    assert again.load_progress.partitions_recovered == 1
    assert _values(log2) == [b"%04d" % i for i in range(5)]
    again.shutdown()


def test_checkpoint_rename_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager, log = _start(tmp_path / "d")
    for i in range(3):
        _append(log, i)
    log.flush()
    manager.checkpoint_recovery_points()
    checkpoint = tmp_path / "d" / RECOVERY_POINT_CHECKPOINT
    before = checkpoint.read_text()
    _append(log, 3)
    log.flush()
    real = os.replace

    def replace(src: object, dst: object) -> None:
        if str(dst).endswith(RECOVERY_POINT_CHECKPOINT):
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    manager.checkpoint_recovery_points()
    monkeypatch.undo()
    assert manager.offline_dirs and log.offline
    assert checkpoint.read_text() == before  # the old checkpoint, whole
    again, log2 = _start(tmp_path / "d")
    assert _values(log2) == [b"%04d" % i for i in range(4)]
    again.shutdown()
