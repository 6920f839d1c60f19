"""Topics auto-created through a broker take that broker's own num.partitions and
default.replication.factor (Kafka's AutoTopicCreationManager sends them in the
CreateTopics it forwards), not the active controller's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from odradek.protocol import api
from tests.integration.cluster_proc import ClusterProcesses, _wait
from tests.integration.txn_helpers import call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

# the controller keeps the defaults (1 partition, replication factor 1)
BROKERS = {1: {"num.partitions": 3, "default.replication.factor": 2},
           2: {"num.partitions": 2, "default.replication.factor": 1}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, broker_kind: str
            ) -> Iterator[ClusterProcesses]:
    if broker_kind != "odradek":
        pytest.skip("a KRaft cluster of odradek nodes")
    c = ClusterProcesses(tmp_path_factory.mktemp("autocreate"), brokers=2,
                         broker_overrides=BROKERS).start()
    try:
        yield c
    finally:
        c.close()


def _shape(c: ClusterProcesses, topic: str) -> tuple[int, frozenset[int]]:
    parts = _wait(lambda: c.partitions(topic) or None, 30, f"{topic} in metadata")
    return len(parts), frozenset(len(p.replicas) for p in parts.values())


@pytest.mark.parametrize("node", [1, 2])
def test_metadata_auto_creation_takes_the_receiving_brokers_defaults(cluster, node):
    topic = f"auto-md-{node}-{uuid.uuid4().hex[:6]}"
    r = call(cluster.brokers[node].bootstrap, api.ApiKey.METADATA, 9, {
        "topics": [{"name": topic}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    assert r.topics[0].error_code.value in (0, 5)  # NONE or LEADER_NOT_AVAILABLE
    want = BROKERS[node]
    assert _shape(cluster, topic) == (want["num.partitions"],
                                      {want["default.replication.factor"]})


def test_a_producer_auto_creates_with_its_brokers_defaults(cluster):
    """librdkafka asks Metadata with allow_auto_topic_creation for a topic it
    produces to: the topic gets the defaults of the broker it asked (librdkafka
    may ask either broker once it knows both), never the controller's (1, {1})."""
    topic = f"auto-prod-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "acks": "all"})
    errors: list[object] = []
    p.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(30) == 0 and errors == [None]
    assert _shape(cluster, topic) in {(3, frozenset({2})), (2, frozenset({1}))}
