"""Small helpers shared by the Spark tests: topics, producing, waiting."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.integration.broker_proc import REPO_ROOT

EXAMPLE_PATH = REPO_ROOT / "examples" / "spark_balances.py"


def load_example() -> Any:
    """examples/spark_balances.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("spark_balances", EXAMPLE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed_records(
    bootstrap: str, topic: str, partitions: int = 1, timeout_s: float = 30
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every record of `topic` below each partition's
    last stable offset, read with read_committed, in offset order per partition."""
    from confluent_kafka import Consumer, IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    latest = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED
    )
    lso = {tp.partition: latest[tp].result(timeout_s).offset for tp in tps}
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "committed-records",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": False,
        }
    )
    out: list[tuple[int, bytes | None, bytes | None]] = []
    todo = {p: end for p, end in lso.items() if end > 0}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in todo])
        deadline = time.monotonic() + timeout_s
        while todo:
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                partition, offset = m.partition(), m.offset()
                assert partition is not None and offset is not None
                if offset < lso[partition]:
                    out.append((partition, m.key(), m.value()))
            # The position passes transaction markers, which are never returned.
            for tp in c.position([TopicPartition(topic, p) for p in todo]):
                if tp.offset >= todo[tp.partition]:
                    del todo[tp.partition]
            assert time.monotonic() < deadline, f"read_committed of {topic} stuck below {lso}"
    finally:
        c.close()
    return out


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
