"""Closed segments' index entries stay within odradek.log.index.cache.max.bytes
(issue 15.5): a broker with many closed segments, densely indexed, serves
every record from offset 0 and answers ListOffsets by time while the
entries it keeps stay under a budget of a few segments' indexes; the same
reads with no budget keep all of them. RSS of both runs is printed (a
figure, not asserted: Python's allocator and the page cache make a few
MiB noise)."""

from __future__ import annotations

import re
import urllib.request

import pytest
from confluent_kafka import TopicPartition

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import Out, ck_consume, ck_consumer, ck_produce, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PARTITIONS = 4
RECORDS_PER_PARTITION = 4000  # one batch each: one offset-index entry each
BASE_TS = 1_700_000_000_000
BUDGET = 16 * 1024  # about two closed segments' indexes of this topic
KEY = "odradek.log.index.cache.max.bytes"


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {name: float(value) for name, value in
            re.findall(r"^(odradek_log_index_cache_\w+) (\S+)$", text, re.MULTILINE)}


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _value(p: int, i: int) -> bytes:
    return b"%d-%d-" % (p, i) + b"v" * 100


def _read_everything(proc: BrokerProcess, topic: str) -> None:
    for p in range(PARTITIONS):
        # small fetches: many lookups per segment
        got = ck_consume(proc.bootstrap, topic, RECORDS_PER_PARTITION, partitions=[p],
                         timeout=120, **{"max.partition.fetch.bytes": 16384})
        assert [r.offset for r in got] == list(range(RECORDS_PER_PARTITION))
        assert [r.value for r in got] == [_value(p, i) for i in range(RECORDS_PER_PARTITION)]
    consumer = ck_consumer(proc.bootstrap)
    try:  # ListOffsets by time: the time indexes of closed segments, reloaded
        for i in (0, 1, 2501, RECORDS_PER_PARTITION - 1):  # one timestamp a partition a call
            wanted = [TopicPartition(topic, p, BASE_TS + 1000 * p + i) for p in range(PARTITIONS)]
            found = consumer.offsets_for_times(wanted, timeout=60)
            assert [(tp.partition, tp.offset) for tp in found] == [
                (p, i) for p in range(PARTITIONS)]
    finally:
        consumer.close()


def test_reads_from_offset_zero_stay_within_the_index_budget(tmp_path, topic_name):
    metrics_port = free_port()
    proc = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                         overrides={"odradek.metrics.port": metrics_port, KEY: BUDGET,
                                    "offsets.topic.num.partitions": 1})
    try:
        proc.start()
        create_topic(proc.bootstrap, topic_name, PARTITIONS,
                     config={"segment.bytes": str(64 * 1024), "index.interval.bytes": "1"})
        ck_produce(proc.bootstrap, topic_name,
                   [Out(value=_value(p, i), partition=p, timestamp=BASE_TS + 1000 * p + i)
                    for i in range(RECORDS_PER_PARTITION) for p in range(PARTITIONS)],
                   acks="all", timeout=180,  # idempotent: retries on a busy host keep the order
                   **{"batch.num.messages": 1, "linger.ms": 0, "message.timeout.ms": 170_000,
                      "enable.idempotence": True})
        closed = sum(1 for _ in (tmp_path / "data").rglob(f"{topic_name}-*/*.index"))
        closed -= PARTITIONS
        assert closed >= 5 * PARTITIONS
        during = _metrics(metrics_port)
        assert during["odradek_log_index_cache_max_bytes"] == BUDGET
        assert during["odradek_log_index_cache_bytes"] <= BUDGET  # rolled ones joined it

        figures = {}
        for budget in (BUDGET, 0):
            proc.overrides[KEY] = str(budget)
            proc.restart()  # the load reads every closed index once (its check)
            assert proc.pid is not None
            before = _metrics(metrics_port)
            _read_everything(proc, topic_name)
            after = _metrics(metrics_port)
            figures[budget] = (after["odradek_log_index_cache_bytes"], _rss_kib(proc.pid),
                               after["odradek_log_index_cache_loads_total"]
                               - before["odradek_log_index_cache_loads_total"],
                               after["odradek_log_index_cache_evictions_total"])
            if budget:
                assert after["odradek_log_index_cache_bytes"] <= BUDGET
                assert after["odradek_log_index_cache_loads_total"] > before[
                    "odradek_log_index_cache_loads_total"] + closed // 2
                assert after["odradek_log_index_cache_evictions_total"] > closed
            else:
                assert after["odradek_log_index_cache_evictions_total"] == 0
        # Unbounded, every closed index read stays: many times the budget.
        assert figures[0][0] > 4 * BUDGET
        print(f"\n{closed} closed segments; index cache bytes / RSS KiB / loads during "
              f"the reads / evictions: budget {BUDGET}: {figures[BUDGET]}; none: {figures[0]}")
        log = proc.log_path.read_text(errors="replace")
        assert "Traceback" not in log, proc.log_tail()
    finally:
        proc.close()
