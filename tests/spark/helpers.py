"""Small helpers shared by the Spark tests: topics, producing, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int, bytes | None, bytes, int | None]],
    headers: list[tuple[str, bytes]] | None = None,
) -> int:
    """records: (partition, key, value, timestamp_ms or None). Returns the count."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    n = 0
    for part, key, value, ts in records:
        kwargs: dict[str, Any] = {"partition": part}
        if ts is not None:
            kwargs["timestamp"] = ts
        if headers:
            kwargs["headers"] = headers
        p.produce(topic, value, key, **kwargs)
        n += 1
    assert p.flush(30) == 0
    return n


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(step_s)
