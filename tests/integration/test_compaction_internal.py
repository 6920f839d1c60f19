"""The cleaner on internal topics and transactions: ``__consumer_offsets`` and
``__transaction_state`` are compacted and replay correctly after a restart;
aborted transactions leave a compacted topic."""

from __future__ import annotations

import os
import re

import pytest
from confluent_kafka import TopicPartition

from odradek.protocol.records import decode_batch_records, iter_batch_headers
from tests.integration.clients import ck_consumer, create_topic, wait_until
from tests.integration.compaction_helpers import (
    FILLER_KEY,
    cleaned_lines,
    consume_all,
    produce_updates,
    roll_with_filler,
)
from tests.integration.txn_helpers import TXN_BROKER, read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

COMMITS = 400


def _records_in(dir: os.PathLike[str], below: int | None = None) -> int:
    """Records in the partition's segments (only those at offsets below `below`)."""
    count = 0
    for name in sorted(os.listdir(dir)):
        if re.fullmatch(r"\d{20}\.log", name):
            with open(os.path.join(dir, name), "rb") as f:
                data = f.read()
            for h in iter_batch_headers(data):
                count += sum(1 for r in decode_batch_records(data, h)
                             if below is None or r.offset < below)
    return count


def test_consumer_offsets_is_cleaned_and_groups_replay_from_the_cleaned_log(
    broker_factory, topic_name
):
    broker = broker_factory({
        "log.cleaner.backoff.ms": 200,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.segment.bytes": 3000,
    })
    create_topic(broker.bootstrap, topic_name, 2)
    produce_updates(broker.bootstrap, topic_name, [(b"k", b"v")] * 20)
    group = f"group-{topic_name}"
    consumer = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        consumer.subscribe([topic_name])
        wait_until(lambda: consumer.poll(0.2) is not None or consumer.assignment(),
                   desc="a partition assignment")
        for i in range(COMMITS):
            consumer.commit(offsets=[TopicPartition(topic_name, 0, i % 17),
                                     TopicPartition(topic_name, 1, i % 5)],
                            asynchronous=False)
        final = [TopicPartition(topic_name, 0, 11), TopicPartition(topic_name, 1, 3)]
        consumer.commit(offsets=final, asynchronous=False)
    finally:
        consumer.close()

    def cleaned_up_to() -> int:
        lines = cleaned_lines(broker, "__consumer_offsets-0")
        return int(re.search(r"dirty section \[\d+, (\d+)\)", lines[-1])[1]) if lines else 0

    # Each commit of two partitions is one batch of two records.
    wait_until(lambda: cleaned_up_to() >= 2 * COMMITS - 100, timeout=30,
               desc="the cleaner to clean __consumer_offsets-0")
    broker.stop()
    # Two commit records per round plus group metadata: far fewer are left in
    # the cleaned section. (The active segment is never cleaned; where it
    # starts depends on the records' sizes, so it is not counted.)
    end = cleaned_up_to()
    left = _records_in(broker.data_dir / "__consumer_offsets-0", below=end)
    assert left < COMMITS // 8, f"{left} records left below {end} in __consumer_offsets-0"
    broker.start()
    reader = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic_name, 0),
                                      TopicPartition(topic_name, 1)], timeout=20)
    finally:
        reader.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 11), (1, 3)]


def _cleaned_up_to(broker, topic_partition: str) -> int:
    lines = cleaned_lines(broker, topic_partition)
    return int(re.search(r"dirty section \[\d+, (\d+)\)", lines[-1])[1]) if lines else 0


def test_transaction_state_is_cleaned_and_transactions_go_on_after_a_restart(
    broker_factory, topic_name
):
    broker = broker_factory({
        **TXN_BROKER,
        "log.cleaner.backoff.ms": 200,
        "transaction.state.log.num.partitions": 1,
        "transaction.state.log.segment.bytes": 3000,
    })
    create_topic(broker.bootstrap, topic_name, 1)
    producer = txn_producer(broker.bootstrap, f"txn-{topic_name}")
    transactions = 60
    for i in range(transactions):
        producer.begin_transaction()
        producer.produce(topic_name, key=b"k", value=b"%d" % i)
        producer.commit_transaction(30)
    # Every transaction rewrote the id's state several times: one key, many records.
    # The cleaner may run while the transactions still go on: wait for a cleaning
    # that covers what they wrote, not only for the first one past some offset.
    state_dir = broker.data_dir / "__transaction_state-0"
    wait_until(lambda: _cleaned_up_to(broker, "__transaction_state-0") > 2 * transactions
               and _records_in(state_dir) < transactions,
               timeout=30, desc="the cleaner to clean __transaction_state-0")
    broker.stop()
    # Each transaction wrote about three state records for the one transactional
    # id; what is left is one per id in the cleaned part plus the active segment.
    left = _records_in(state_dir)
    assert left < transactions, f"{left} records left in __transaction_state-0"
    broker.start()
    again = txn_producer(broker.bootstrap, f"txn-{topic_name}")
    again.begin_transaction()
    again.produce(topic_name, key=b"k", value=b"after")
    again.commit_transaction(30)
    values = read_values(broker.bootstrap, topic_name, 1, "read_committed",
                         expect=transactions + 1)
    assert values[-1] == b"after" and len(values) == transactions + 1


def test_the_cleaner_removes_aborted_transactions_from_a_compacted_topic(
    broker_factory, topic_name
):
    broker = broker_factory({**TXN_BROKER, "log.cleaner.backoff.ms": 200})
    create_topic(broker.bootstrap, topic_name, 1, {
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
        "segment.bytes": "2000", "segment.ms": "1000"})
    producer = txn_producer(broker.bootstrap, f"txn-{topic_name}")
    for i in range(40):
        producer.begin_transaction()
        producer.produce(topic_name, key=b"key-%d" % (i % 4), value=b"%d" % i)
        producer.flush(30)  # on the broker before the abort (else librdkafka drops it)
        if i % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    roll_with_filler(broker.bootstrap, topic_name, 1000)
    # Read uncommitted: aborted records show until the cleaner removes them.
    expected = {b"key-%d" % k: b"%d" % (36 + k) for k in (0, 2)}

    def only_committed_left() -> bool:
        values = {r.key: r.value for r in consume_all(broker.bootstrap, topic_name)
                  if r.key != FILLER_KEY}
        return values == expected

    wait_until(only_committed_left, timeout=30, interval=0.5,
               desc="aborted records removed by the cleaner")
    lines = cleaned_lines(broker, f"{topic_name}-0")
    assert any(re.search(r", [1-9]\d* aborted records", line) for line in lines), lines
