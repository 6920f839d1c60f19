"""Transactions with kafka-python and aiokafka (both implement KIP-98 producers)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.integration.clients import create_topic, run
from tests.integration.txn_helpers import TXN_BROKER, read_values

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def test_kafka_python_commit_and_abort(broker_factory, topic_name):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 2)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="kp-tx",
                      request_timeout_ms=10000)
    p.init_transactions()
    p.begin_transaction()
    for i in range(6):
        p.send(topic_name, value=b"kc-%d" % i, partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(4):
        p.send(topic_name, value=b"ka-%d" % i, partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.close(10)
    assert sorted(read_values(b.bootstrap, topic_name, 2, "read_committed", idle_s=2.0)) == (
        sorted(b"kc-%d" % i for i in range(6)))
    assert len(read_values(b.bootstrap, topic_name, 2, "read_uncommitted", expect=10)) == 10
    # kafka-python's own consumer skips the aborted records and the markers too
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    got = sorted(m.value for m in c)
    c.close()
    assert got == sorted(b"kc-%d" % i for i in range(6))


def test_aiokafka_commit_abort_and_read_committed_consumer(broker_factory, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)

    async def scenario() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-tx")
        await p.start()
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send(topic_name, value=b"ac-%d" % i, partition=0)
            await p.begin_transaction()
            for i in range(3):
                await p.send_and_wait(topic_name, value=b"aa-%d" % i, partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic_name, value=b"ac-last", partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=b.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic_name, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            for _ in range(20):
                batch = await c.getmany(tp, timeout_ms=500)
                got += [m.value for m in batch.get(tp, [])]
                if len(got) >= 6:
                    break
            return got
        finally:
            await c.stop()

    got = run(scenario())
    assert got == [b"ac-%d" % i for i in range(5)] + [b"ac-last"]


def test_aiokafka_fenced_producer_sees_producer_fenced(broker_factory, topic_name):
    """aiokafka speaks AddPartitionsToTxn and EndTxn v0, which know no PRODUCER_FENCED
    (90): the broker answers INVALID_PRODUCER_EPOCH (47), which aiokafka turns into
    its ProducerFenced error (with 90 it logged an unexpected error and failed)."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import ProducerFenced

    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)

    async def scenario() -> BaseException | None:
        old = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-fence")
        await old.start()
        new = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-fence")
        await new.start()  # InitProducerId: the old producer's epoch is fenced
        try:
            await old.begin_transaction()
            try:
                await asyncio.wait_for(
                    old.send_and_wait(topic_name, value=b"zombie", partition=0), 20)
            except Exception as e:  # noqa: BLE001 - the error is what we look at
                return e
            return None
        finally:
            await new.stop()
            with contextlib.suppress(Exception):
                await old.stop()

    error = run(scenario())
    assert isinstance(error, ProducerFenced), repr(error)
