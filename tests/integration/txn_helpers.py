"""Helpers shared by the transaction and idempotence integration tests."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.clients import ck_common

# Small internal topics make a broker start and create them quickly.
TXN_BROKER = {
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
}


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    p = Producer({**ck_common(bootstrap), "transactional.id": transactional_id,
                  "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str,
                expect: int | None = None, timeout_s: float = 15.0,
                idle_s: float = 2.0) -> list[bytes]:
    """Every value from offset 0 of each partition, read with ``isolation``; stops
    at ``expect`` values, or after ``idle_s`` without a message, or at the timeout."""
    c = Consumer({**ck_common(bootstrap), "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expect is not None and len(values) >= expect:
                break
            if expect is None and time.monotonic() - last > idle_s:
                break
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            values.append(m.value() or b"")
            last = time.monotonic()
    finally:
        c.close()
    return values


def end_offset(bootstrap: str, topic: str, partition: int, read_committed: bool) -> int:
    """ListOffsets(latest) with the isolation level (kafka-python sends it)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap,
                      isolation_level="read_committed" if read_committed else "read_uncommitted")
    try:
        tp = KTP(topic, partition)
        return int(c.end_offsets([tp])[tp])
    finally:
        c.close()


def call(bootstrap: str, key: int, version: int, data: dict[str, Any]) -> Any:
    """One request built with kio for exactly ``version``; the decoded response."""
    import io
    import struct

    from kio.serial import entity_reader, entity_writer

    from odradek.protocol import api, entities
    from tests.integration.clients import Wire

    req_cls = api.request_class(key, version)
    body = io.BytesIO()
    entity_writer(req_cls)(body, entities.build(req_cls, data))
    with Wire(bootstrap) as w:
        w.send_request(key, version, 11, body.getvalue(),
                       header_version=api.request_header_version(key, version))
        frame = w.read_frame()
    assert frame is not None, "connection closed"
    assert struct.unpack_from(">i", frame, 0)[0] == 11
    pos = 4 + (1 if api.response_header_version(key, version) >= 1 else 0)
    resp, _ = entity_reader(api.response_class(key, version))(frame, pos)
    return resp
