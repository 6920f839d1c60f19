"""One request's metadata records are one batch of the metadata log (at most
Kafka's MAX_RECORDS_PER_USER_OP, 10,000): a CreateTopics or CreatePartitions
that would need more gets POLICY_VIOLATION, never an exception in the handler
(a 10,000-partition CreateTopics is 10,001 records with its TopicRecord)."""

from __future__ import annotations

import random

from odradek.metadata.controller import (
    MAX_RECORDS_PER_USER_OP,
    TOO_LARGE_BATCH,
    Controller,
    NewTopic,
)
from tests.unit.test_cluster_control import _cluster, _control, _step

POLICY_VIOLATION = 44


def _controller() -> Controller:
    return Controller(1, 1, lambda configs: None, rng=random.Random(1))


def test_a_topic_of_10000_partitions_is_refused_and_9999_is_one_batch() -> None:
    image = _cluster(_control(), n=1)
    results, recs = _controller().create_topics(
        image, [NewTopic("big", 10_000, 1, {}, {}), NewTopic("ok", 9_999, 1, {}, {})], False)
    assert results["big"].error_code == POLICY_VIOLATION
    assert results["big"].error_message == TOO_LARGE_BATCH
    assert results["ok"].error_code == 0
    assert len(recs) == MAX_RECORDS_PER_USER_OP  # TopicRecord + 9,999 PartitionRecords


def test_topics_together_past_the_bound_refuse_the_one_that_crosses_it() -> None:
    image = _cluster(_control(), n=1)
    topics = [NewTopic(f"t{i}", 3000, 1, {}, {}) for i in range(4)]
    results, recs = _controller().create_topics(image, topics, False)
    assert [results[f"t{i}"].error_code for i in range(4)] == [0, 0, 0, POLICY_VIOLATION]
    assert len(recs) == 3 * 3001


def test_create_partitions_past_the_bound_is_refused() -> None:
    image = _cluster(_control(), n=1)
    results, recs = _controller().create_topics(image, [NewTopic("grow", 1, 1, {}, {})], False)
    image = _step(image, recs)
    results, recs = _controller().create_partitions(image, [("grow", 10_002, None)], False)
    assert results["grow"].error_code == POLICY_VIOLATION and recs == []
    results, recs = _controller().create_partitions(image, [("grow", 10_001, None)], False)
    assert results["grow"].error_code == 0 and len(recs) == 10_000
