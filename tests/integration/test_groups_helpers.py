"""Helpers for the consumer group tests (no tests here): a broker tuned for quick
rebalances, group consumers, and polling several consumers from one thread."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import TIMEOUT, Wire, ck_common

# Broker settings for group tests: no initial rebalance delay, short sessions allowed,
# quick KIP-848 heartbeats.
GROUP_BROKER_OVERRIDES: dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
}


def start_group_broker(base: Path, kind: str, **extra: Any) -> BrokerProcess:
    if kind != "odradek":
        pytest.skip("group tests run against odradek")
    proc = BrokerProcess(
        kind,
        overrides={**GROUP_BROKER_OVERRIDES, **extra},
        data_dir=base / "data",
        log_path=base / "broker.log",
    )
    return proc.start()


def ck_member(bootstrap: str, group: str, **conf: Any) -> Consumer:
    base = {
        **ck_common(bootstrap),
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    return Consumer({**base, **conf})


class Members:
    """Several confluent-kafka consumers polled in turn from the test thread."""

    def __init__(self) -> None:
        self.consumers: dict[str, Consumer] = {}
        self.records: dict[str, list[tuple[int, int, bytes | None]]] = {}
        self.assign_calls: dict[str, int] = {}

    def add(self, name: str, consumer: Consumer, topics: list[str]) -> Consumer:
        self.consumers[name] = consumer
        self.records.setdefault(name, [])
        self.assign_calls.setdefault(name, 0)

        def on_assign(c: Consumer, parts: Any) -> None:
            self.assign_calls[name] += 1

        consumer.subscribe(topics, on_assign=on_assign)
        return consumer

    def remove(self, name: str, close: bool = True) -> None:
        c = self.consumers.pop(name)
        if close:
            c.close()

    def poll_round(self, timeout_s: float = 0.05) -> None:
        for name, c in list(self.consumers.items()):
            for m in c.consume(100, timeout=timeout_s):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                self.records[name].append((m.partition(), m.offset(), m.value()))

    def assignment(self, name: str) -> set[int]:
        return {tp.partition for tp in self.consumers[name].assignment()}

    def assignments(self) -> dict[str, set[int]]:
        return {name: self.assignment(name) for name in self.consumers}

    def poll_until(
        self, pred: Callable[[], bool], timeout: float = TIMEOUT, desc: str = ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {desc}; assignments {self.assignments()}"
                )
            self.poll_round()

    def balanced(self, partitions: int) -> bool:
        a = self.assignments()
        parts = [p for ps in a.values() for p in ps]
        sizes = [len(ps) for ps in a.values()]
        return (
            len(parts) == partitions == len(set(parts))
            and bool(sizes)
            and max(sizes) - min(sizes) <= 1
            and min(sizes) > 0
        )

    def values(self) -> set[bytes | None]:
        return {v for recs in self.records.values() for _, _, v in recs}

    def close(self) -> None:
        for c in self.consumers.values():
            with contextlib.suppress(Exception):  # best effort at teardown
                c.close()
        self.consumers.clear()


def kio_call(w: Wire, api_key: int, version: int, body: dict[str, Any], corr: int = 7) -> Any:
    """One request of a flexible version over `w`, answered as a kio response."""
    cls = api.request_class(api_key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, body))
    w.send_request(api_key, version, corr, buf.getvalue(), header_version=2)
    frame = w.read_frame()
    assert frame is not None, "the broker closed the connection"
    resp, _ = entity_reader(api.response_class(api_key, version))(frame, 5)
    return resp


def offset_commit_v8(group: str, topic: str, offsets: dict[int, int],
                     metadata: str | None = None) -> dict[str, Any]:
    """An OffsetCommit v8 body committing `offsets` (partition -> offset) for
    `group` without a generation (a simple consumer group's commit)."""
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{
            "name": topic,
            "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": metadata}
                for p, o in offsets.items()
            ],
        }],
    }


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
