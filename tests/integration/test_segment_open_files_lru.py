"""Closed segments' files are opened on use and kept in a bounded LRU (issue
15.3): a broker under an open-files limit of 256 holds several times more
closed segments than the limit, serves every record from offset 0 (its
descriptors staying bounded) and loads them all again after kill -9."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import pytest

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import Out, ck_consume, ck_produce, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PARTITIONS = 4
RECORDS_PER_PARTITION = 200  # one batch each, bigger than segment.bytes: one segment each
LIMIT = 256
# The derived LRU bound: (256 - odradek.open.files.reserve 128) // 2.
LRU_BOUND = 64
# Descriptors the broker may hold: the LRU (active segments' .log files
# included; indexes hold none) and a margin for the metadata log, sockets,
# pipes and the like (about 25 measured).
MAX_FDS = LRU_BOUND + 40


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    [value] = re.findall(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(value)


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _fd_kinds(pid: int) -> dict[str, int]:
    """What the open descriptors are, by file suffix (for a failure message)."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = Path(target).suffix or target.split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def assert_bounded_and_clean(proc: BrokerProcess, max_fds: int) -> None:
    """At most ``max_fds`` descriptors open, and no EMFILE or traceback logged."""
    assert proc.pid is not None
    assert _open_fds(proc.pid) <= max_fds, str(sorted(_fd_kinds(proc.pid).items()))
    text = proc.log_path.read_text(errors="replace")
    assert "Too many open files" not in text, proc.log_tail()
    assert "Traceback" not in text, proc.log_tail()


def _segment_files(data_dir: Path, topic: str) -> int:
    return sum(1 for path in data_dir.rglob(f"{topic}-*/*.log"))


def _read_all(proc: BrokerProcess, topic: str) -> None:
    for p in range(PARTITIONS):
        got = ck_consume(proc.bootstrap, topic, RECORDS_PER_PARTITION, partitions=[p],
                         timeout=90)
        assert [r.offset for r in got] == list(range(RECORDS_PER_PARTITION))
        assert [r.value for r in got] == [b"%d-%d-" % (p, i) + b"x" * 600
                                          for i in range(RECORDS_PER_PARTITION)]


def test_many_more_closed_segments_than_descriptors_are_all_served(tmp_path, topic_name):
    metrics_port = free_port()
    data_dir = tmp_path / "data"
    proc = BrokerProcess(data_dir=data_dir, log_path=tmp_path / "broker.log",
                         wrapper=["prlimit", f"--nofile={LIMIT}:{LIMIT}"],
                         overrides={"odradek.metrics.port": metrics_port,
                                    "offsets.topic.num.partitions": 1})
    try:
        proc.start()
        assert f"segments' .log files kept open: at most {LRU_BOUND}" in proc.log_tail()
        create_topic(proc.bootstrap, topic_name, PARTITIONS,
                     config={"segment.bytes": "512", "segment.index.bytes": "4096"})
        ck_produce(proc.bootstrap, topic_name,
                   [Out(value=b"%d-%d-" % (p, i) + b"x" * 600, partition=p)
                    for i in range(RECORDS_PER_PARTITION) for p in range(PARTITIONS)],
                   acks="all", timeout=120, **{"batch.num.messages": 1, "linger.ms": 0})
        segments = _segment_files(data_dir, topic_name)
        assert segments >= PARTITIONS * RECORDS_PER_PARTITION > 3 * LIMIT > 3 * LRU_BOUND

        assert proc.pid is not None
        _read_all(proc, topic_name)
        fds = _open_fds(proc.pid)
        assert fds <= MAX_FDS, str(sorted(_fd_kinds(proc.pid).items()))
        assert _metric(metrics_port, "odradek_log_segment_open_files") <= LRU_BOUND
        assert _metric(metrics_port, "odradek_log_segment_open_files_max") == LRU_BOUND
        assert _metric(metrics_port, "odradek_log_segment_files_opened_total") > LRU_BOUND
        assert _metric(metrics_port, "odradek_log_segment_files_evicted_total") > LRU_BOUND

        proc.restart(hard=True)  # every segment is loaded again under the same limit
        _read_all(proc, topic_name)
        assert_bounded_and_clean(proc, MAX_FDS)
    finally:
        proc.close()
