"""consumer_byte_rate on Fetch as Kafka applies it (KafkaApis.handleFetchRequest):
a consumer's fetch asks no more than one quota window's worth of bytes, and a
response that would take its rate over the quota is answered empty with
throttle_time_ms (its bytes taken back from the rate), the connection muted for
that time; the data comes in the next fetch after the wait. Raw Fetch v12 with
odradek's KafkaChannel shows each answer; confluent-kafka reads everything at about
the quota with throttle_cb seeing the throttle.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.protocol.client import KafkaChannel
from tests.integration.broker_proc import HOST, BrokerProcess
from tests.integration.clients import ck_common, create_topic
from tests.integration.test_quotas import consume_timed, quotas_cli

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(180)]

WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}
RATE = 50_000  # bytes/s: one window holds 50 kB
VALUE = b"f" * 10_000
COUNT = 30


def fetch(ch: KafkaChannel, topic: str, offset: int) -> Any:
    part = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    return asyncio.get_event_loop().run_until_complete(ch.request(1, 12, {
        "cluster_id": None, "replica_id": -1, "max_wait": 0, "min_bytes": 0,
        "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [part]}], "forgotten_topics_data": [],
        "rack_id": ""}))


def throttle_ms(response: Any) -> int:
    return round(response.throttle_time.total_seconds() * 1000)


def test_a_fetch_over_the_quota_is_answered_empty_then_served(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory(WINDOW)
    create_topic(broker.bootstrap, "fetch-quota", 1)
    p = Producer({**ck_common(broker.bootstrap), "linger.ms": 0, "batch.size": 12_000})
    for _ in range(COUNT):
        p.produce("fetch-quota", VALUE)
    assert p.flush(30) == 0
    out = quotas_cli(broker, "alter", "--client", "slow", "--add-config",
                     f"consumer_byte_rate={RATE}")
    assert out.returncode == 0, out.stderr

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    ch = KafkaChannel(HOST, broker.port, client_id=b"slow")
    try:
        first = fetch(ch, "fetch-quota", 0)
        data = first.responses[0].partitions[0].records
        # one window's worth (50 kB, the first batch always) rather than the 1 MB asked
        assert 10_000 < len(data) <= RATE + 12_000, len(data)
        assert throttle_ms(first) == 0
        second = fetch(ch, "fetch-quota", 5)  # at once: over the quota
        assert second.responses == ()
        assert 500 <= throttle_ms(second) <= 2100, throttle_ms(second)
        started = time.monotonic()
        third = fetch(ch, "fetch-quota", 5)  # the connection was muted meanwhile
        waited = time.monotonic() - started
        assert waited >= throttle_ms(second) / 1000 - 0.2, waited
        assert third.responses and len(third.responses[0].partitions[0].records) > 10_000
        other = KafkaChannel(HOST, broker.port, client_id=b"fast")
        try:  # a client id without the quota gets everything at once
            assert len(fetch(other, "fetch-quota", 0).responses[0].partitions[0].records) \
                >= COUNT * len(VALUE)
        finally:
            other.close()
    finally:
        ch.close()
        loop.close()

    elapsed, throttles = consume_timed(broker.bootstrap, "fetch-quota", "slow", COUNT)
    assert throttles and max(throttles) > 0, throttles
    assert elapsed >= 3.0, elapsed  # 300 kB at 50 kB/s, less the burst
