"""bench/rawload.py, the load behind `bench/host.py --raw`, against a real broker.

Its Produce requests are encoded once and sent again and again, so what must hold is
that a broker takes every copy: 3,000 records in 100-record requests over 3
partitions are acknowledged without an error and confluent-kafka sees exactly 3,000
records in the partitions' offsets; the fetch load reads the same 3,000 back; the
latency probe's records each come back on the Fetch parked before them (the offsets
move by one per sample).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.rawload import run_fetch, run_load, run_probe
from tests.integration.broker_proc import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(data_dir=Path(tmp_path_factory.mktemp("rawload")) / "data",
                      ready_timeout_s=90).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("raw", 3, 1), NewTopic("probe", 1, 1)]).values():
            f.result(timeout=60)
        yield b
    finally:
        b.close()


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rawload-check"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        c.close()


def test_every_copy_of_a_pre_encoded_request_is_written_and_read_back(
        broker: BrokerProcess) -> None:
    res = asyncio.run(run_load(broker.bootstrap, "raw", size=1024, batch=100, acks=1,
                               connections=2, in_flight=4, seconds=60, records=3000))
    assert (res["errors"], res["first_error"]) == (0, None)
    assert res["sent"] == 3000 and res["requests"] == 30 and not res["timed_out"]
    assert _end_offsets(broker.bootstrap, "raw", 3) == 3000
    read = asyncio.run(run_fetch(broker.bootstrap, "raw", max_bytes=64 * 1024, seconds=60,
                                 size=1024))
    assert (read["errors"], read["received"]) == (0, 3000)


def test_the_probe_reads_each_record_on_the_fetch_parked_before_it(
        broker: BrokerProcess) -> None:
    for parked in (True, False):
        res = run_probe(broker.bootstrap, "probe", count=20, size=100, acks=1, park_ms=1.0,
                        parked=parked)
        assert res["produce"]["n"] == res["e2e"]["n"] == 20
        assert 0 < res["e2e"]["p50_ms"] <= res["e2e"]["max_ms"]
    assert _end_offsets(broker.bootstrap, "probe", 1) == 40
