"""Client quotas against a real broker, set with `odradek quotas` and felt by
confluent-kafka: a producer and a consumer over their byte rates are answered
with throttle_time_ms (librdkafka's throttle_cb sees it) and slowed to about
their quota; clients the quota does not cover are not throttled; quotas are in
the metadata log, so they survive kill -9; bad input gets a clear answer.

The broker measures over 2 windows of 1 s (quota.window.*), so the rate
settles within seconds; the bounds on the rates are loose on purpose (a check
of the mechanism, not a benchmark).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from confluent_kafka import Consumer, Producer

from .broker_proc import BrokerProcess
from .clients import ck_common, create_topic

QUOTA_WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}
RATE = 200_000  # bytes/s
PAYLOAD = b"q" * 10_000
COUNT = 150  # 1.5 MB: at the quota, about 7 s


def quotas_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "quotas", "--bootstrap-server", broker.bootstrap,
         *args], capture_output=True, text=True, timeout=60, check=False)


def produce_timed(bootstrap: str, topic: str, client_id: str) -> tuple[float, list[float]]:
    """Seconds to get COUNT records acknowledged, and the throttle times seen."""
    throttles: list[float] = []
    p = Producer({**ck_common(bootstrap), "client.id": client_id, "linger.ms": 0,
                  "batch.size": 20_000, "acks": 1, "message.timeout.ms": 60_000,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    errors: list[Any] = []
    started = time.monotonic()
    for _ in range(COUNT):
        while True:
            try:
                p.produce(topic, PAYLOAD, on_delivery=lambda err, _m: err and errors.append(err))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - started
    assert errors == []
    return elapsed, throttles


def consume_timed(bootstrap: str, topic: str, client_id: str, count: int
                  ) -> tuple[float, list[float]]:
    throttles: list[float] = []
    c = Consumer({**ck_common(bootstrap), "group.id": f"g-{client_id}", "client.id": client_id,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 100_000,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.subscribe([topic])
    got, started = 0, time.monotonic()
    try:
        while got < count and time.monotonic() - started < 60:
            for m in c.consume(50, 1.0):
                assert m.error() is None, m.error()
                got += 1
    finally:
        c.close()
    assert got == count
    return time.monotonic() - started, throttles


def test_byte_rate_quotas_throttle_the_clients_they_cover(broker_factory: Any) -> None:
    broker = broker_factory(QUOTA_WINDOW)
    create_topic(broker.bootstrap, "quota-topic", 1)
    set_p = quotas_cli(broker, "alter", "--client", "slow-producer",
                       "--add-config", f"producer_byte_rate={RATE}")
    assert set_p.returncode == 0, set_p.stderr
    assert "Completed updating config for client-id=slow-producer." in set_p.stdout
    set_c = quotas_cli(broker, "alter", "--user-defaults", "--client", "slow-consumer",
                       "--add-config", f"consumer_byte_rate={RATE}")
    assert set_c.returncode == 0, set_c.stderr
    described = quotas_cli(broker, "describe")
    assert described.returncode == 0, described.stderr
    assert f"Quota configs for client-id=slow-producer are producer_byte_rate={RATE}" \
        in described.stdout
    assert (f"Quota configs for client-id=slow-consumer, user=<default> are "
            f"consumer_byte_rate={RATE}") in described.stdout

    fast_s, fast_throttles = produce_timed(broker.bootstrap, "quota-topic", "fast-producer")
    assert fast_throttles == []
    slow_s, slow_throttles = produce_timed(broker.bootstrap, "quota-topic", "slow-producer")
    assert slow_throttles and max(slow_throttles) > 0
    sent = COUNT * len(PAYLOAD)
    # the first window's burst aside, the producer is held near its quota
    assert sent / slow_s < 2.5 * RATE, (slow_s, fast_s)
    assert slow_s > fast_s

    # The default user with client id slow-consumer: covers this consumer (its
    # principal is User:ANONYMOUS), not another client id.
    total = 2 * COUNT  # both producers' records
    _, free = consume_timed(broker.bootstrap, "quota-topic", "free-consumer", total)
    assert free == []
    slow_c, consumer_throttles = consume_timed(broker.bootstrap, "quota-topic",
                                                "slow-consumer", total)
    assert consumer_throttles and max(consumer_throttles) > 0
    assert total * len(PAYLOAD) / slow_c < 2.5 * RATE


def test_quotas_survive_kill_9_and_can_be_removed(broker_factory: Any) -> None:
    broker = broker_factory(QUOTA_WINDOW)
    assert quotas_cli(broker, "alter", "--user", "alice", "--add-config",
                      "producer_byte_rate=1024,request_percentage=50").returncode == 0
    broker.kill9()
    broker.start()
    shown = quotas_cli(broker, "describe", "--user", "alice")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == (
        "Quota configs for user=alice are producer_byte_rate=1024, request_percentage=50")
    removed = quotas_cli(broker, "alter", "--user", "alice",
                         "--delete-config", "producer_byte_rate,request_percentage")
    assert removed.returncode == 0, removed.stderr
    assert quotas_cli(broker, "describe", "--user", "alice").stdout == ""


def test_bad_quota_input_gets_a_clear_answer(broker_factory: Any) -> None:
    broker = broker_factory()
    negative = quotas_cli(broker, "alter", "--user", "a", "--add-config",
                          "producer_byte_rate=-5")
    assert negative.returncode == 1
    assert "INVALID_REQUEST" in negative.stderr and "must be positive" in negative.stderr
    wrong_key = quotas_cli(broker, "alter", "--ip", "10.0.0.1", "--add-config",
                           "producer_byte_rate=5")
    assert wrong_key.returncode == 1 and "Invalid configuration key" in wrong_key.stderr
    both = quotas_cli(broker, "alter", "--user", "a", "--user-defaults", "--add-config",
                      "producer_byte_rate=5")
    assert both.returncode == 2 and "not both" in both.stderr
    not_a_number = quotas_cli(broker, "alter", "--user", "a", "--add-config",
                              "producer_byte_rate=fast")
    assert not_a_number.returncode == 2 and "not a number" in not_a_number.stderr
    nothing = quotas_cli(broker, "describe")
    assert nothing.returncode == 0 and nothing.stdout == ""
