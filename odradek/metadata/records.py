"""Metadata records: every change to the cluster's metadata is one of these.

They are appended to the metadata log (`__cluster_metadata-0`, record batches
v2 like any partition) and replayed into the image. In this version each
record value is UTF-8 JSON with a `type` field naming the record; the names and
fields follow Kafka's metadata record schemas (TopicRecord, PartitionRecord,
ConfigRecord, RemoveTopicRecord, RegisterBrokerRecord, ProducerIdsRecord,
PartitionChangeRecord, FeatureLevelRecord). odradek differs from Kafka here: Kafka encodes these
records with its own binary schemas, so `kafka-metadata-shell` cannot read
odradek's metadata log.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from .directory_id import UNASSIGNED

TOPIC = "TopicRecord"
PARTITION = "PartitionRecord"
PARTITION_CHANGE = "PartitionChangeRecord"
REMOVE_TOPIC = "RemoveTopicRecord"
CONFIG = "ConfigRecord"
REGISTER_BROKER = "RegisterBrokerRecord"
PRODUCER_IDS = "ProducerIdsRecord"
BROKER_REGISTRATION_CHANGE = "BrokerRegistrationChangeRecord"
UNREGISTER_BROKER = "UnregisterBrokerRecord"
CLIENT_QUOTA = "ClientQuotaRecord"
# SASL/SCRAM credentials (KIP-554)
USER_SCRAM_CREDENTIAL = "UserScramCredentialRecord"
REMOVE_USER_SCRAM_CREDENTIAL = "RemoveUserScramCredentialRecord"

KNOWN_TYPES = frozenset(
    {TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC, CONFIG, REGISTER_BROKER, PRODUCER_IDS,
     BROKER_REGISTRATION_CHANGE, CLIENT_QUOTA}
) | {USER_SCRAM_CREDENTIAL, REMOVE_USER_SCRAM_CREDENTIAL, UNREGISTER_BROKER}

# -- ACLs (Kafka's AccessControlEntryRecord / RemoveAccessControlEntryRecord) ------------
# Each ACL has an id; the fields are AclBinding's (security/acl.py), as wire numbers.
ACCESS_CONTROL_ENTRY = "AccessControlEntryRecord"
REMOVE_ACCESS_CONTROL_ENTRY = "RemoveAccessControlEntryRecord"
KNOWN_TYPES |= {ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY}

# Finalized feature levels (Kafka's FeatureLevelRecord; metadata/features.py).
# Level 0 removes the feature.
FEATURE_LEVEL = "FeatureLevelRecord"
KNOWN_TYPES |= {FEATURE_LEVEL}


def feature_level_record(name: str, level: int) -> dict[str, Any]:
    return {"type": FEATURE_LEVEL, "name": name, "feature_level": level}


def access_control_entry_record(acl_id: str, resource_type: int, resource_name: str,
                                pattern_type: int, principal: str, host: str,
                                operation: int, permission_type: int) -> dict[str, Any]:
    return {"type": ACCESS_CONTROL_ENTRY, "id": acl_id, "resource_type": resource_type,
            "resource_name": resource_name, "pattern_type": pattern_type,
            "principal": principal, "host": host, "operation": operation,
            "permission_type": permission_type}


def remove_access_control_entry_record(acl_id: str) -> dict[str, Any]:
    return {"type": REMOVE_ACCESS_CONTROL_ENTRY, "id": acl_id}
# -- end ACLs ------------------------------------------------------------------------------

# ConfigResource types, as in Kafka's DescribeConfigs/AlterConfigs.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32  # KIP-848 group configs (group_config.py)

MetadataRecord = dict[str, Any]


def topic_record(name: str, topic_id: str) -> MetadataRecord:
    return {"type": TOPIC, "name": name, "topic_id": topic_id}


def partition_record(
    topic_id: str, partition: int, replicas: list[int], leader: int, leader_epoch: int = 0
) -> MetadataRecord:
    """A new partition: every replica in the ISR, no reassignment in progress
    (`adding_replicas`/`removing_replicas` are absent, read as empty)."""
    return {
        "type": PARTITION,
        "topic_id": topic_id,
        "partition": partition,
        "replicas": replicas,
        "isr": list(replicas),
        "leader": leader,
        "leader_epoch": leader_epoch,
        "partition_epoch": 0,
        # KIP-858: each replica's log dir; its broker places it and says where
        "directories": [UNASSIGNED] * len(replicas),
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
    broker_id: int,
    endpoints: list[dict[str, Any]],
    rack: str | None,
    fenced: bool = False,
    incarnation_id: str | None = None,
    log_dirs: list[str] | None = None,
) -> MetadataRecord:
    """A broker (re)registers. Kafka's RegisterBrokerRecord starts fenced; a
    broker that registers with the controller stays fenced until it has caught
    up with the metadata log (records written before this field default to
    unfenced: the single node registered itself)."""
    record: MetadataRecord = {
        "type": REGISTER_BROKER, "broker_id": broker_id, "endpoints": endpoints, "rack": rack,
    }
    if fenced:
        record["fenced"] = True
    if incarnation_id is not None:
        record["incarnation_id"] = incarnation_id
    if log_dirs is not None:  # the directory ids the broker has online (KIP-858)
        record["log_dirs"] = sorted(log_dirs)
    return record


def unregister_broker_record(broker_id: int, broker_epoch: int) -> MetadataRecord:
    """An operator removed the broker's registration (UnregisterBroker, KIP-631):
    the registration of that epoch goes; a later one stays."""
    return {"type": UNREGISTER_BROKER, "broker_id": broker_id, "broker_epoch": broker_epoch}


def broker_registration_change_record(
    broker_id: int, fenced: bool | None = None, in_controlled_shutdown: bool | None = None,
    log_dirs: list[str] | None = None,
) -> MetadataRecord:
    """Fence, unfence, or mark a broker as shutting down (Kafka's
    BrokerRegistrationChangeRecord; FenceBrokerRecord/UnfenceBrokerRecord), or
    name the directory ids it still has online after some failed while it
    ran (KIP-858, never empty: a broker with no dir left is fenced instead)."""
    record: MetadataRecord = {"type": BROKER_REGISTRATION_CHANGE, "broker_id": broker_id}
    if fenced is not None:
        record["fenced"] = fenced
    if in_controlled_shutdown is not None:
        record["in_controlled_shutdown"] = in_controlled_shutdown
    if log_dirs is not None:
        assert log_dirs, "an empty log_dirs reads as 'every dir online' (directories.py)"
        record["log_dirs"] = sorted(log_dirs)
    return record


def partition_change_record(
    topic_id: str,
    partition: int,
    *,
    leader: int | None = None,
    isr: list[int] | None = None,
    leader_epoch: int | None = None,
    directories: list[str] | None = None,
    replicas: list[int] | None = None,
    adding_replicas: list[int] | None = None,
    removing_replicas: list[int] | None = None,
    eligible_leader_replicas: list[int] | None = None,
    last_known_elr: list[int] | None = None,
) -> MetadataRecord:
    """Kafka's PartitionChangeRecord: only the fields that change. A new leader
    always comes with a new leader epoch; every change bumps the partition epoch.
    A reassignment (KIP-455) sets `replicas` to target + removing and names the
    `adding_replicas`/`removing_replicas`; completing or cancelling it sets
    them back to empty lists. `eligible_leader_replicas` and `last_known_elr`
    are KIP-966's (metadata/elr.py); absent, they are unchanged."""
    record: MetadataRecord = {"type": PARTITION_CHANGE, "topic_id": topic_id, "partition": partition}
    if leader is not None:
        record["leader"] = leader
    if isr is not None:
        record["isr"] = list(isr)
    if leader_epoch is not None:
        record["leader_epoch"] = leader_epoch
    if directories is not None:  # one log dir id per replica (KIP-858)
        record["directories"] = list(directories)
    if replicas is not None:
        record["replicas"] = list(replicas)
    if adding_replicas is not None:
        record["adding_replicas"] = list(adding_replicas)
    if removing_replicas is not None:
        record["removing_replicas"] = list(removing_replicas)
    if eligible_leader_replicas is not None:
        record["eligible_leader_replicas"] = list(eligible_leader_replicas)
    if last_known_elr is not None:
        record["last_known_elr"] = list(last_known_elr)
    return record


# Producer ids the controller hands out per AllocateProducerIds (Kafka's
# ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
PRODUCER_ID_BLOCK_SIZE = 1000


def producer_ids_record(broker_id: int, next_producer_id: int) -> MetadataRecord:
    return {"type": PRODUCER_IDS, "broker_id": broker_id, "next_producer_id": next_producer_id}


def client_quota_record(entity: Sequence[tuple[str, str | None]], key: str,
                        value: float | None) -> MetadataRecord:
    """Kafka's ClientQuotaRecord: set `key` of the entity, or remove it (value None)."""
    return {"type": CLIENT_QUOTA,
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "key": key, "value": 0.0 if value is None else value, "remove": value is None}


# -- SCRAM credentials (KIP-554) ------------------------------------------------------------


def user_scram_credential_record(name: str, mechanism: int, salt: bytes, stored_key: bytes,
                                 server_key: bytes, iterations: int) -> MetadataRecord:
    """Kafka's UserScramCredentialRecord: a user's salted credential for one
    mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512), never the password. The
    bytes fields are base64 in this JSON."""
    return {
        "type": USER_SCRAM_CREDENTIAL, "name": name, "mechanism": mechanism,
        "salt": base64.b64encode(salt).decode(),
        "stored_key": base64.b64encode(stored_key).decode(),
        "server_key": base64.b64encode(server_key).decode(),
        "iterations": iterations,
    }


def remove_user_scram_credential_record(name: str, mechanism: int) -> MetadataRecord:
    return {"type": REMOVE_USER_SCRAM_CREDENTIAL, "name": name, "mechanism": mechanism}


def encode(record: MetadataRecord) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def decode(value: bytes) -> MetadataRecord:
    record = json.loads(value)
    if not isinstance(record, dict) or record.get("type") not in KNOWN_TYPES:
        raise ValueError(f"not a metadata record: {value[:80]!r}")
    return record
