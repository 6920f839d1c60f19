"""Segments on disk with a real broker and real clients: roll by size, retention
by time and by size, DeleteRecords and the log start offset."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.protocol.records import iter_batch_headers
from tests.integration.clients import (
    Out,
    ck_admin,
    ck_consume,
    ck_consumer,
    ck_produce,
    create_topic,
    wait_until,
    watermarks,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

# One record per batch, so the sizes on disk follow the produce calls.
ONE_PER_BATCH = {"linger.ms": 0, "batch.num.messages": 1, "compression.type": "none",
                 "acks": "all"}


def partition_dir(proc, topic: str, partition: int = 0) -> Path:
    return Path(proc.data_dir) / f"{topic}-{partition}"


def segment_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def dump_log_verify(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "dump-log", "--verify", "--deep-iteration",
         "--files", ",".join(str(f) for f in files)],
        capture_output=True, text=True, timeout=60, check=False,
    )


def index_files(d: Path) -> list[Path]:
    return sorted([*d.glob("*.index"), *d.glob("*.timeindex")])


def test_roll_by_size_gives_expected_file_names(broker_factory, topic_name):
    proc = broker_factory()
    segment_bytes = 4096
    create_topic(proc.bootstrap, topic_name, 1, config={"segment.bytes": str(segment_bytes)})
    outs = [Out(key=b"k%03d" % i, value=b"v" * (100 + 7 * (i % 13)), partition=0)
            for i in range(200)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    d = partition_dir(proc, topic_name)
    logs = segment_files(d)
    assert len(logs) >= 5, [p.name for p in logs]
    # Kafka's names and Kafka's rule: a segment is named by its first offset, and
    # it rolled exactly when the next batch would have taken it past segment.bytes.
    batches = []
    for path in logs:
        data = path.read_bytes()
        headers = list(iter_batch_headers(data))
        assert path.name == f"{headers[0].base_offset:020d}.log"
        assert sum(h.size for h in headers) == len(data) <= segment_bytes
        batches.append((len(data), headers))
    for (size, _), (_, next_headers) in itertools.pairwise(batches):
        assert size + next_headers[0].size > segment_bytes
    offsets = [h.base_offset for _, hs in batches for h in hs]
    assert offsets == list(range(200))
    for path in logs:
        stem = path.name[:-4]
        assert (d / f"{stem}.index").exists() and (d / f"{stem}.timeindex").exists()
    proc.stop()
    # Closed segments' indexes are trimmed to their entries (the active one's too
    # after a clean stop), as Kafka trims them.
    for path in index_files(d):
        entry = 8 if path.suffix == ".index" else 12
        assert path.stat().st_size % entry == 0 and path.stat().st_size < 10 * 1024 * 1024
    result = dump_log_verify(logs + index_files(d))
    assert result.returncode == 0, result.stdout + result.stderr


def test_retention_by_time_removes_old_segments_and_moves_log_start(broker_factory,
                                                                   topic_name):
    proc = broker_factory(overrides={"log.retention.check.interval.ms": 300})
    create_topic(proc.bootstrap, topic_name, 1, config={
        "segment.bytes": "2048", "retention.ms": "60000", "file.delete.delay.ms": "500"})
    now = int(time.time() * 1000)
    old = [Out(value=b"old%03d" % i + b"." * 200, partition=0, timestamp=now - 3_600_000)
           for i in range(40)]
    new = [Out(value=b"new%03d" % i + b"." * 200, partition=0, timestamp=now)
           for i in range(40)]
    ck_produce(proc.bootstrap, topic_name, old + new, **ONE_PER_BATCH)
    d = partition_dir(proc, topic_name)

    def first_segment_base() -> int:
        return int(segment_files(d)[0].name[:20])

    # The old records fill whole closed segments; the segment holding both old
    # and new records keeps its old ones (only whole segments go).
    wait_until(lambda: first_segment_base() > 0, 15, desc="old segments deleted")
    low, high = watermarks(proc.bootstrap, topic_name, 0)
    assert high == 80
    assert low == first_segment_base()
    assert 0 < low <= 40
    got = ck_consume(proc.bootstrap, topic_name, high - low)
    assert [r.offset for r in got] == list(range(low, high))
    # Deleted files went through the .deleted suffix and are gone after the delay.
    wait_until(lambda: not list(d.glob("*.deleted")), 15, desc=".deleted files removed")
    assert not (d / f"{0:020d}.log").exists()


def test_retention_by_size_keeps_at_most_retention_bytes_plus_a_segment(broker_factory,
                                                                       topic_name):
    proc = broker_factory(overrides={"log.retention.check.interval.ms": 300})
    create_topic(proc.bootstrap, topic_name, 1, config={
        "segment.bytes": "2048", "retention.bytes": "4096", "file.delete.delay.ms": "0"})
    outs = [Out(value=b"%04d" % i + b"." * 200, partition=0) for i in range(100)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    d = partition_dir(proc, topic_name)

    def closed_bytes() -> int:
        return sum(p.stat().st_size for p in segment_files(d)[:-1])

    wait_until(lambda: closed_bytes() <= 4096, 15, desc="size retention")
    logs = segment_files(d)
    low, high = watermarks(proc.bootstrap, topic_name, 0)
    assert (low, high) == (int(logs[0].name[:20]), 100)
    # Kafka's rule: a segment goes only if the log stays >= retention.bytes without it.
    total = sum(p.stat().st_size for p in logs)
    assert total - logs[0].stat().st_size < 4096 <= total or len(logs) == 1


def test_delete_records_moves_low_watermark_and_consumers_reset(broker_factory, topic_name):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 1, config={
        "segment.bytes": "2048", "file.delete.delay.ms": "0"})
    outs = [Out(value=b"%04d" % i + b"." * 100, partition=0) for i in range(100)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    admin: AdminClient = ck_admin(proc.bootstrap)
    fs = admin.delete_records([TopicPartition(topic_name, 0, 60)], request_timeout=20)
    [result] = fs.values()
    deleted = result.result(timeout=20)
    assert deleted.low_watermark == 60
    assert watermarks(proc.bootstrap, topic_name, 0) == (60, 100)
    d = partition_dir(proc, topic_name)
    # Segments wholly below the new log start offset are gone.
    bases = [int(p.name[:20]) for p in segment_files(d)]
    assert bases[0] <= 60 and (len(bases) == 1 or bases[1] > 60)
    assert not (d / f"{0:020d}.log").exists()
    # auto.offset.reset=earliest: a consumer at offset 0 is reset to 60.
    got = ck_consume(proc.bootstrap, topic_name, 40, offset=0)
    assert [r.offset for r in got] == list(range(60, 100))
    assert got[0].value == outs[60].value
    # auto.offset.reset=error: the client sees OFFSET_OUT_OF_RANGE from the broker.
    c = ck_consumer(proc.bootstrap, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic_name, 0, 10)])
        errors = []
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            for m in c.consume(10, timeout=1):
                if m.error():
                    errors.append(m.error())
        assert errors, "no out-of-range error"
        assert errors[0].code() == KafkaError._AUTO_OFFSET_RESET
        assert "out of range" in errors[0].str().lower()
    finally:
        c.close()
    # Offsets above the high watermark are refused.
    fs = admin.delete_records([TopicPartition(topic_name, 0, 500)], request_timeout=20)
    [result] = fs.values()
    with pytest.raises(Exception) as e:
        result.result(timeout=20)
    assert "OFFSET_OUT_OF_RANGE" in str(e.value) or "out of range" in str(e.value).lower()
    # The log start offset survives a restart (log-start-offset-checkpoint).
    proc.restart()
    assert watermarks(proc.bootstrap, topic_name, 0) == (60, 100)


def test_roll_by_segment_ms_and_by_full_index(broker_factory, topic_name):
    proc = broker_factory()
    by_time, by_index = f"{topic_name}-t", f"{topic_name}-i"
    create_topic(proc.bootstrap, by_time, 1, config={"segment.ms": "60000"})
    create_topic(proc.bootstrap, by_index, 1, config={
        "segment.index.bytes": "40", "index.interval.bytes": "100"})
    # segment.ms counts from the first batch's timestamp (Kafka's rule): records
    # a minute and more apart roll, whatever the wall clock says.
    t0 = int(time.time() * 1000) - 600_000
    stamps = [t0, t0 + 30_000, t0 + 60_001, t0 + 70_000, t0 + 200_000]
    ck_produce(proc.bootstrap, by_time,
               [Out(value=b"%d" % i, partition=0, timestamp=ts) for i, ts in enumerate(stamps)],
               **ONE_PER_BATCH)
    assert [p.name[:20] for p in segment_files(partition_dir(proc, by_time))] == [
        f"{0:020d}", f"{2:020d}", f"{4:020d}"]
    # segment.index.bytes=40 holds 5 offset entries or 3 time entries, and the time
    # index reports full at 2 (one slot kept for the final entry written on roll,
    # which is only written when the max timestamp moved past the last entry).
    # Timestamps one ms apart make every index entry a time entry too.
    ck_produce(proc.bootstrap, by_index,
               [Out(value=b"." * 150, partition=0, timestamp=t0 + i) for i in range(40)],
               **ONE_PER_BATCH)
    d = partition_dir(proc, by_index)
    logs = segment_files(d)
    assert len(logs) >= 3
    proc.stop()
    for path in logs[:-1]:
        stem = path.name[:20]
        offset_entries = (d / f"{stem}.index").stat().st_size // 8
        time_entries = (d / f"{stem}.timeindex").stat().st_size // 12
        # trimmed on roll, and one of the two was full
        assert offset_entries == 5 or time_entries >= 2, (offset_entries, time_entries)
        assert offset_entries >= 2  # interval 100 B, batches ~220 B: an entry each
        assert offset_entries <= 5 and time_entries <= 3
    result = dump_log_verify(logs + index_files(d))
    assert result.returncode == 0, result.stdout + result.stderr
