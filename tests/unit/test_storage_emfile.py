"""Out of file descriptors during a segment roll (issue 15.3): the append that
met EMFILE fails, the dir stays online, and the next appends (descriptors
free again) roll and succeed with every acknowledged record readable."""

from __future__ import annotations

import errno
import uuid
from pathlib import Path

import pytest

from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

CONFIG = LogConfig(segment_bytes=1024)


def _append(log: PartitionLog, i: int) -> int:
    buf = bytearray(build_batch([Record(-1, 1000, b"k", b"%03d" % i + b"x" * 300)]))
    return log.append_as_leader(buf, validate_produce_records(buf, len(buf) + 1), 0).first_offset


def test_emfile_on_roll_fails_the_append_only(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager([tmp_path / "d"], CONFIG, "YmVuY2gtcmVjb3ZlcnktMDAw", 1)
    manager.startup()
    log = manager.get_or_create("t", 0, uuid.uuid4(), CONFIG)
    acked = [_append(log, i) for i in range(3)]
    original = PartitionLog._new_segment
    out_of_fds = [True]

    def new_segment(self: PartitionLog, base: int) -> object:
        if out_of_fds[0]:
            raise OSError(errno.EMFILE, "Too many open files")
        return original(self, base)

    monkeypatch.setattr(PartitionLog, "_new_segment", new_segment)
    failed = 0
    for i in range(3, 6):
        try:
            acked.append(_append(log, i))
        except OSError as e:
            assert e.errno == errno.EMFILE or "Too many open files" in str(e)
            failed += 1
    assert failed >= 1
    assert not log.offline and not manager.offline_dirs
    out_of_fds[0] = False
    acked += [_append(log, i) for i in range(6, 9)]
    assert log.log_end_offset == len(acked) and acked == list(range(len(acked)))
    assert len(log.segments) > 1
    manager.shutdown()
