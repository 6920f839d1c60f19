"""The broker's `fetch.max.bytes` (KIP-541) bounds a Fetch answer whatever the
client asks for, and a consumer asking for more still reads everything."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer
from kio.serial import entity_reader

from odradek.protocol import api
from tests.integration.clients import Out, Wire, ck_common, ck_produce, create_topic
from tests.integration.test_fetch_sessions import VERSION, fetch_request_v12

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

CAP = 64 * 1024
PARTITIONS = 3
PER_PARTITION = 200
VALUE = b"x" * 1000  # 200 KB per partition, in batches of at most 16 KB


def test_answer_bounded_by_broker_fetch_max_bytes(broker_factory, topic_name):
    broker = broker_factory(overrides={"fetch.max.bytes": CAP})
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    ck_produce(broker.bootstrap, topic_name,
               [Out(value=VALUE, partition=i % PARTITIONS)
                for i in range(PARTITIONS * PER_PARTITION)],
               **{"batch.size": 16 * 1024, "compression.type": "none"})
    with Wire(broker.bootstrap) as w:
        # The client asks for 1 MiB per partition and 1 MiB in all.
        body = fetch_request_v12(topic_name, [(p, 0) for p in range(PARTITIONS)],
                                 partition_max_bytes=1 << 20)
        w.send_request(api.ApiKey.FETCH, VERSION, 1, body, header_version=2)
        frame = w.read_frame()
        assert frame is not None and struct.unpack_from(">i", frame)[0] == 1
        resp, _ = entity_reader(api.response_class(api.ApiKey.FETCH, VERSION))(frame, 5)
    sizes = [len(p.records or b"") for t in resp.responses for p in t.partitions]
    assert resp.error_code.value == 0
    assert 0 < sum(sizes) <= CAP, sizes
    # A consumer that asks for 50 MiB answers gets every record, CAP at a time.
    consumer = Consumer({**ck_common(broker.bootstrap), "group.id": "cap",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * 1024 * 1024,
                         "max.partition.fetch.bytes": 10 * 1024 * 1024})
    consumer.subscribe([topic_name])
    got = 0
    try:
        for _ in range(300):
            got += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
            if got >= PARTITIONS * PER_PARTITION:
                break
    finally:
        consumer.close()
    assert got == PARTITIONS * PER_PARTITION
