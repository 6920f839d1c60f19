"""Idempotent producers: retries after lost responses never duplicate records.

A fault-injecting proxy (fault_proxy.py) sits between the client and the
broker and closes the connection instead of forwarding some Produce
responses, after the broker has appended the batch. The client retries the
batch with the same producer id, epoch and sequence; the broker recognises it
(storage/producer_state.py) and answers with the original offsets.
"""

from __future__ import annotations

import pytest

from tests.integration.broker_proc import free_port
from tests.integration.clients import (
    ck_producer,
    create_topic,
    kp_producer,
    watermarks,
)
from tests.integration.fault_proxy import FaultProxy
from tests.integration.txn_helpers import read_values

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

RECORDS = 400
PRODUCE = 0


@pytest.fixture
def proxied(broker_factory):
    port = free_port()
    b = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    proxy = FaultProxy(port, b.port, api_key=PRODUCE, drop_every=3, max_drops=6)
    try:
        yield b, proxy
    finally:
        proxy.close()


def _check_exactly_once(b, topic: str) -> None:
    values = read_values(f"127.0.0.1:{b.port}", topic, 1, "read_uncommitted", expect=RECORDS,
                         idle_s=3.0)
    assert len(values) == RECORDS, f"{len(values)} records for {RECORDS} sent"
    assert values == [b"v%04d" % i for i in range(RECORDS)]


def test_confluent_idempotent_producer_retries_without_duplicates(proxied, topic_name):
    b, proxy = proxied
    create_topic(f"127.0.0.1:{b.port}", topic_name, 1)
    p = ck_producer(f"127.0.0.1:{proxy.port}", **{
        "enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 20,
        "retry.backoff.ms": 50, "message.timeout.ms": 60000})
    errors = []
    for i in range(RECORDS):
        p.produce(topic_name, value=b"v%04d" % i, partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        if i % 20 == 19:
            p.flush(60)
    assert p.flush(60) == 0
    assert not errors
    assert proxy.drops >= 3, "the proxy dropped no responses: the test proved nothing"
    _check_exactly_once(b, topic_name)
    assert watermarks(f"127.0.0.1:{b.port}", topic_name, 0)[1] == RECORDS


def test_kafka_python_idempotent_producer_retries_without_duplicates(proxied, topic_name):
    b, proxy = proxied
    create_topic(f"127.0.0.1:{b.port}", topic_name, 1)
    p = kp_producer(f"127.0.0.1:{proxy.port}", enable_idempotence=True, acks="all",
                    linger_ms=2, batch_size=400, retries=20, retry_backoff_ms=50,
                    request_timeout_ms=10000)
    futures = []
    for i in range(RECORDS):
        futures.append(p.send(topic_name, value=b"v%04d" % i, partition=0))
        if i % 20 == 19:
            p.flush(60)
    p.flush(60)
    for f in futures:
        f.get(timeout=60)
    p.close(10)
    assert proxy.drops >= 3
    _check_exactly_once(b, topic_name)


def _init_producer_id(bootstrap: str, transactional_id: str | None = None) -> tuple[int, int, int]:
    import io

    from kio.serial import entity_reader, entity_writer

    from odradek.protocol import api, entities
    from tests.integration.clients import Wire

    key, version = api.ApiKey.INIT_PRODUCER_ID, 4
    req_cls = api.request_class(key, version)
    body = io.BytesIO()
    entity_writer(req_cls)(body, entities.build(req_cls, {
        "transactional_id": transactional_id, "transaction_timeout": 60000,
        "producer_id": -1, "producer_epoch": -1}))
    with Wire(bootstrap) as w:
        w.send_request(key, version, 7, body.getvalue(),
                       header_version=api.request_header_version(key, version))
        frame = w.read_frame()
    assert frame is not None
    resp, _ = entity_reader(api.response_class(key, version))(frame, 5)
    return resp.error_code.value, resp.producer_id, resp.producer_epoch


def test_producer_ids_stay_unique_across_restarts(broker_factory):
    b = broker_factory({"transaction.state.log.num.partitions": 2})
    first = [_init_producer_id(b.bootstrap)[1] for _ in range(3)]
    assert len(set(first)) == 3
    code, txn_pid, epoch = _init_producer_id(b.bootstrap, "tx-ids")
    assert (code, epoch) == (0, 0)
    b.restart(hard=True)  # a crash: the id block in use is never handed out again
    again = [_init_producer_id(b.bootstrap)[1] for _ in range(3)]
    assert not set(again) & set(first + [txn_pid])
    # a known transactional id keeps its producer id and gets the next epoch
    assert _init_producer_id(b.bootstrap, "tx-ids") == (0, txn_pid, 1)
    b.restart()
    assert _init_producer_id(b.bootstrap, "tx-ids") == (0, txn_pid, 2)
    assert not {_init_producer_id(b.bootstrap)[1] for _ in range(2)} & set(first + again)


def test_transaction_timeout_above_the_maximum_is_refused(broker_factory):
    b = broker_factory({"transaction.state.log.num.partitions": 2,
                        "transaction.max.timeout.ms": 30000})
    assert _init_producer_id(b.bootstrap, "tx-long")[0] == 50  # INVALID_TRANSACTION_TIMEOUT
