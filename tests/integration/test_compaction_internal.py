"""The cleaner on ``__consumer_offsets``: it is compacted, and a group's state
replays correctly from the cleaned log after a restart."""

from __future__ import annotations

import os
import re

import pytest
from confluent_kafka import TopicPartition

from odradek.protocol.records import decode_batch_records, iter_batch_headers
from tests.integration.clients import ck_consumer, create_topic, wait_until
from tests.integration.compaction_helpers import cleaned_lines, produce_updates

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

COMMITS = 400


def _records_in(dir: os.PathLike[str]) -> int:
    count = 0
    for name in sorted(os.listdir(dir)):
        if re.fullmatch(r"\d{20}\.log", name):
            with open(os.path.join(dir, name), "rb") as f:
                data = f.read()
            count += sum(len(decode_batch_records(data, h)) for h in iter_batch_headers(data))
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
    # Two commit records per round plus group metadata: far fewer are left.
    left = _records_in(broker.data_dir / "__consumer_offsets-0")
    assert left < COMMITS // 4, f"{left} records left in __consumer_offsets-0"
    broker.start()
    reader = ck_consumer(broker.bootstrap, **{"group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic_name, 0),
                                      TopicPartition(topic_name, 1)], timeout=20)
    finally:
        reader.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 11), (1, 3)]
