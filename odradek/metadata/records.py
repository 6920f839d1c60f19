"""Metadata records: every change to the cluster's metadata is one of these.

They are appended to the metadata log (`__cluster_metadata-0`, record batches
v2 like any partition) and replayed into the image. In this version each
record value is UTF-8 JSON with a `type` field naming the record; the names and
fields follow Kafka's metadata record schemas (TopicRecord, PartitionRecord,
ConfigRecord, RemoveTopicRecord, RegisterBrokerRecord, ProducerIdsRecord,
PartitionChangeRecord). odradek differs from Kafka here: Kafka encodes these
records with its own binary schemas, so `kafka-metadata-shell` cannot read
odradek's metadata log.
"""

from __future__ import annotations

import json
from typing import Any

TOPIC = "TopicRecord"
PARTITION = "PartitionRecord"
PARTITION_CHANGE = "PartitionChangeRecord"
REMOVE_TOPIC = "RemoveTopicRecord"
CONFIG = "ConfigRecord"
REGISTER_BROKER = "RegisterBrokerRecord"
PRODUCER_IDS = "ProducerIdsRecord"

KNOWN_TYPES = frozenset(
    {TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC, CONFIG, REGISTER_BROKER, PRODUCER_IDS}
)

# ConfigResource types, as in Kafka's DescribeConfigs/AlterConfigs.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

MetadataRecord = dict[str, Any]


def topic_record(name: str, topic_id: str) -> MetadataRecord:
    return {"type": TOPIC, "name": name, "topic_id": topic_id}


def partition_record(
    topic_id: str, partition: int, replicas: list[int], leader: int, leader_epoch: int = 0
) -> MetadataRecord:
    return {
        "type": PARTITION,
        "topic_id": topic_id,
        "partition": partition,
        "replicas": replicas,
        "isr": list(replicas),
        "leader": leader,
        "leader_epoch": leader_epoch,
        "partition_epoch": 0,
    }


def remove_topic_record(topic_id: str) -> MetadataRecord:
    return {"type": REMOVE_TOPIC, "topic_id": topic_id}


def config_record(
    resource_type: int, resource_name: str, name: str, value: str | None
) -> MetadataRecord:
    return {
        "type": CONFIG,
        "resource_type": resource_type,
        "resource_name": resource_name,
        "name": name,
        "value": value,
    }


def register_broker_record(
    broker_id: int, endpoints: list[dict[str, Any]], rack: str | None
) -> MetadataRecord:
    return {"type": REGISTER_BROKER, "broker_id": broker_id, "endpoints": endpoints, "rack": rack}


def producer_ids_record(broker_id: int, next_producer_id: int) -> MetadataRecord:
    return {"type": PRODUCER_IDS, "broker_id": broker_id, "next_producer_id": next_producer_id}


def encode(record: MetadataRecord) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode(value: bytes) -> MetadataRecord:
    record = json.loads(value)
    if not isinstance(record, dict) or record.get("type") not in KNOWN_TYPES:
        raise ValueError(f"not a metadata record: {value[:80]!r}")
    return record
