"""Start-up after kill -9 follows the unflushed tail, not the partition count
(issue 15.4). A broker with a few hundred partitions, every record flushed
and the recovery points checkpointed, is killed: at the next start it loads
every log without recovering any (the log's summary line and the
``odradek_log_load_*`` metrics say so) and serves every record; one partition
written after the last checkpoint is the only one scanned."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import Out, ck_consume, ck_produce, create_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PARTITIONS = 500
SUMMARY = re.compile(r"loaded the logs of \S+ in (\d+) ms \((\w+) shutdown, (\d+) thread\(s\)\):"
                     r" (\d+) of (\d+) partitions loaded, (\d+) recovered")


def _summaries(proc: BrokerProcess) -> list[tuple[int, str, int, int, int]]:
    """(ms, clean|unclean, loaded, total, recovered) of each start, in order."""
    return [(int(m[1]), m[2], int(m[4]), int(m[5]), int(m[6]))
            for m in SUMMARY.finditer(proc.log_path.read_text(errors="replace"))]


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    [value] = re.findall(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(value)


def test_kill9_with_nothing_unflushed_recovers_no_partition(tmp_path, topic_name):
    metrics_port = free_port()
    proc = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                         ready_timeout_s=120, overrides={
                             "log.flush.interval.messages": 1,  # every append flushed
                             "log.flush.offset.checkpoint.interval.ms": 200,
                             "num.recovery.threads.per.data.dir": 2,
                             "odradek.metrics.port": metrics_port,
                         })
    try:
        proc.start()
        create_topic(proc.bootstrap, topic_name, PARTITIONS, timeout=120)
        ck_produce(proc.bootstrap, topic_name,
                   [Out(value=b"v%d" % p, partition=p) for p in range(PARTITIONS)], acks="all")
        time.sleep(1.5)  # a few recovery-point checkpoints
        proc.stop()  # clean: the reference figure
        proc.start()
        proc.kill9()
        proc.start()
        clean, crash = _summaries(proc)[-2:]
        assert clean[1] == "clean" and crash[1] == "unclean"
        assert crash[2] == crash[3] >= PARTITIONS
        assert crash[4] == 0, crash  # no partition scanned: nothing was unflushed
        assert _metric(metrics_port, "odradek_log_load_partitions_recovered") == 0
        assert _metric(metrics_port, "odradek_log_load_partitions_loaded") >= PARTITIONS
        print(f"{PARTITIONS} partitions: logs loaded in {clean[0]} ms after a clean stop, "
              f"{crash[0]} ms after kill -9")
        got = ck_consume(proc.bootstrap, topic_name, 3, partitions=[0, 7, PARTITIONS - 1])
        assert sorted(r.value for r in got) == sorted(
            [b"v0", b"v7", b"v%d" % (PARTITIONS - 1)])

        # One partition written after the last flush of its recovery point: it
        # alone is scanned.
        proc.stop()
        proc.overrides["log.flush.interval.messages"] = "1000000"
        proc.overrides["log.flush.offset.checkpoint.interval.ms"] = "3600000"
        proc.start()
        ck_produce(proc.bootstrap, topic_name, [Out(value=b"tail", partition=3)], acks="all")
        proc.kill9()
        proc.start()
        last = _summaries(proc)[-1]
        assert last[1] == "unclean" and last[4] == 1, last
        wait_until(lambda: _metric(metrics_port, "odradek_log_load_recovered_bytes") > 0, 10)
        got = ck_consume(proc.bootstrap, topic_name, 2, partitions=[3])
        assert [r.value for r in got] == [b"v3", b"tail"]
    finally:
        proc.close()
