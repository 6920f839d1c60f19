"""Helpers of the log-compaction integration tests (test_compaction*.py)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from odradek.cli.main import main as odradek_cli
from odradek.protocol.records import decode_batch_records, iter_batch_headers
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import TIMEOUT, Out, Rec, ck_consumer, ck_produce, wait_until

FILLER_KEY = b"~filler"


def consume_all(bootstrap: str, topic: str, timeout: float = TIMEOUT, batch: int = 1000,
                pause_s: float = 0.0, **conf: Any) -> list[Rec]:
    """Every record of partition 0 from the beginning up to the high watermark,
    taken ``batch`` at a time with ``pause_s`` between (a slow reader)."""
    c = ck_consumer(bootstrap, **{"enable.partition.eof": True, **conf})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"read {len(out)} records of {topic} before the deadline"
            if pause_s:
                time.sleep(pause_s)
            for m in c.consume(batch, timeout=min(left, 1.0)):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    raise KafkaException(m.error())
                out.append(Rec(m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()


def latest_by_key(records: Iterable[Rec]) -> dict[bytes | None, bytes | None]:
    return {r.key: r.value for r in records}


def produce_updates(bootstrap: str, topic: str, updates: list[tuple[bytes, bytes | None]],
                    batch_records: int = 2000) -> None:
    """Produce (key, value) pairs with acks=all, at most ``batch_records`` a batch."""
    ck_produce(bootstrap, topic, (Out(value=v, key=k) for k, v in updates),
               **{"linger.ms": 20, "acks": "all", "batch.num.messages": batch_records})


def roll_with_filler(bootstrap: str, topic: str, segment_ms: int) -> None:
    """Make the segment holding the last updates cleanable: wait segment.ms and
    append one record (the append rolls the active segment)."""
    time.sleep(segment_ms / 1000 + 0.2)
    produce_updates(bootstrap, topic, [(FILLER_KEY, b"x")])


def cleaned_lines(proc: BrokerProcess, topic_partition: str) -> list[str]:
    text = proc.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if f"cleaned {topic_partition}:" in line]


def partition_dir(proc: BrokerProcess, topic: str, partition: int = 0) -> Path:
    return proc.data_dir / f"{topic}-{partition}"


def segment_bases(dir: Path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(dir) if re.fullmatch(r"\d{20}\.log", n))


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry))
    return children


def cleaner_worker_pids(broker_pid: int) -> list[int]:
    """The broker's cleaner worker processes (multiprocessing "spawn" children;
    the resource tracker is another child)."""
    workers = []
    for pid in child_pids(broker_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            workers.append(pid)
    return workers


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def verify_segment_files(dir: Path) -> None:
    """``odradek dump-log --verify`` over every segment file of ``dir`` (the CLI's
    own entry point, in this process); fails on any problem it prints."""
    files = sorted(str(dir / n) for n in os.listdir(dir)
                   if re.fullmatch(r"\d{20}\.(log|index|timeindex)", n))
    assert files, f"no segment files in {dir}"
    code = odradek_cli(["dump-log", "--verify", "--files", ",".join(files)])
    assert code == 0, f"dump-log --verify found problems in {dir}"


def load_copy_and_read(dir: Path, work: Path, config: LogConfig) -> dict[bytes | None,
                                                                           bytes | None]:
    """Copy a partition dir (its broker is dead), load it the way a starting broker
    does (finishing or undoing an interrupted cleaner swap, recovering the tail),
    check its files with dump-log --verify and return the latest value per key."""
    copy = work / dir.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(dir, copy)
    log = PartitionLog.open(copy, dir.name.rsplit("-", 1)[0], 0, config, None)
    try:
        latest: dict[bytes | None, bytes | None] = {}
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 24).records
            headers = list(iter_batch_headers(data))
            assert headers, f"no progress reading {copy} at offset {offset}"
            for header in headers:
                for record in decode_batch_records(data, header):
                    if record.offset >= offset:
                        latest[record.key] = record.value
                offset = header.next_offset
    finally:
        log.close()
    verify_segment_files(copy)
    return latest


def wait_for_exact(bootstrap: str, topic: str, expected: dict[bytes, bytes | None],
                   timeout: float = 60.0) -> list[Rec]:
    """Wait until reading the partition gives exactly one record per expected key,
    with its latest value (the filler key aside)."""
    last: list[Rec] = []

    def exact() -> bool:
        nonlocal last
        last = [r for r in consume_all(bootstrap, topic) if r.key != FILLER_KEY]
        return len(last) == len(expected) and latest_by_key(last) == expected

    try:
        wait_until(exact, timeout, interval=0.3, desc=f"{topic} compacted to one record per key")
    except AssertionError:
        seen = latest_by_key(last)
        wrong = [k for k in expected if seen.get(k, b"<missing>") != expected[k]][:5]
        raise AssertionError(
            f"{topic}: {len(last)} records for {len(expected)} keys; wrong or missing: {wrong}"
        ) from None
    return last
