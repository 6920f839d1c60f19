"""Every (API, version) that odradek advertises answers a well-formed request.

For each advertised version, a request is built with kio for exactly that
version, sent over a raw socket with the matching header version, and the
response is decoded with kio's class for the same version; the decode must
consume the whole frame and the interesting error codes must be 0.
"""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from odradek.protocol.records import Record, build_batch
from tests.integration.clients import Wire, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _requests(topic: str, topic_id: uuid.UUID) -> dict[int, dict[str, Any]]:
    batch = build_batch([Record(offset=0, timestamp=1_700_000_000_000, key=b"k", value=b"v")])
    part = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    return {
        api.ApiKey.API_VERSIONS: {"client_software_name": "matrix",
                                  "client_software_version": "1"},
        api.ApiKey.METADATA: {"topics": [{"name": topic, "topic_id": topic_id}],
                              "allow_auto_topic_creation": False,
                              "include_cluster_authorized_operations": False,
                              "include_topic_authorized_operations": False},
        api.ApiKey.PRODUCE: {"transactional_id": None, "acks": 1, "timeout": 5000,
                             "topic_data": [{"name": topic, "topic_id": topic_id,  # v13
                                             "partition_data": [
                                                 {"index": 0, "records": batch}]}]},
        # level 0 stays 0: nothing changes (v1+ only validate)
        api.ApiKey.UPDATE_FEATURES: {"timeout": 5000, "validate_only": True, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 0, "upgrade_type": 1,
             "allow_downgrade": False}]},
        api.ApiKey.FETCH: {"cluster_id": None, "replica_id": -1,
                           "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                           "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                           "topics": [{"topic": topic, "topic_id": topic_id,
                                       "partitions": [part]}],
                           "forgotten_topics_data": [], "rack_id": ""},
        api.ApiKey.LIST_OFFSETS: {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                            "timestamp": -2, "max_num_offsets": 1}]}],
                                  "timeout": 5000},
        api.ApiKey.CREATE_TOPICS: {"topics": [{"name": topic + "-new", "num_partitions": 1,
                                               "replication_factor": 1, "assignments": [],
                                               "configs": []}],
                                   "timeout": 5000, "validate_only": True},
        api.ApiKey.DELETE_TOPICS: {"topics": [{"name": topic + "-absent", "topic_id": uuid.UUID(int=0)}],
                                   "topic_names": [topic + "-absent"], "timeout": 5000},
        api.ApiKey.DELETE_RECORDS: {"topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "offset": 0}]}], "timeout": 5000},
        api.ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 60000,
                                      "producer_id": -1, "producer_epoch": -1},
        api.ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                             "leader_epoch": 0}]}]},
        api.ApiKey.DESCRIBE_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": topic,
                                                     "configuration_keys": None}],
                                      "include_synonyms": True, "include_documentation": True},
        api.ApiKey.ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": topic,
                                                  "configs": [{"name": "retention.ms",
                                                               "value": "86400000"}]}],
                                   "validate_only": True},
        api.ApiKey.DESCRIBE_LOG_DIRS: {"topics": None},
        api.ApiKey.CREATE_PARTITIONS: {"topics": [{"name": topic, "count": 1,
                                                   "assignments": None}],
                                       "timeout": 5000, "validate_only": True},
        api.ApiKey.INCREMENTAL_ALTER_CONFIGS: {"resources": [
            {"resource_type": 2, "resource_name": topic,
             "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}],
            "validate_only": True},
        api.ApiKey.LIST_CONFIG_RESOURCES: {"resource_types": []},
        api.ApiKey.DESCRIBE_CLUSTER: {"include_cluster_authorized_operations": False,
                                      "endpoint_type": 1, "include_fenced_brokers": True},
        api.ApiKey.DESCRIBE_TOPIC_PARTITIONS: {"topics": [{"name": topic}],
                                               "response_partition_limit": 100,
                                               "cursor": None},
        api.ApiKey.ELECT_LEADERS: {"election_type": 0, "timeout": 5000, "topic_partitions": [
            {"topic": topic, "partitions": [0]}]},
        api.ApiKey.ALTER_PARTITION_REASSIGNMENTS: {
            "timeout": 5000, "allow_replication_factor_change": True,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "replicas": None}]}]},
        api.ApiKey.LIST_PARTITION_REASSIGNMENTS: {"timeout": 5000, "topics": None},
        **_group_requests(topic, topic_id),
        **_txn_requests(topic),
    }


def _txn_requests(topic: str) -> dict[int, dict[str, Any]]:
    tid = f"matrix-{topic}"
    txn = {"transactional_id": tid, "producer_id": 123456789, "producer_epoch": 0}
    topics = [{"name": topic, "partitions": [0]}]
    return {  # unknown producer on purpose: the coordinator must say so in every version
        api.ApiKey.ADD_PARTITIONS_TO_TXN: {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": 123456789,
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": topics,
            "transactions": [{**txn, "verify_only": False, "topics": topics}]},
        api.ApiKey.ADD_OFFSETS_TO_TXN: {**txn, "group_id": tid},
        api.ApiKey.TXN_OFFSET_COMMIT: {
            **txn, "group_id": tid, "generation_id": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]},
        api.ApiKey.END_TXN: {**txn, "committed": True},
        api.ApiKey.WRITE_TXN_MARKERS: {"markers": [
            {"producer_id": 123456789, "producer_epoch": 0, "transaction_result": False,
             "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        api.ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": topic, "partition_indexes": [0]}]},
        api.ApiKey.DESCRIBE_TRANSACTIONS: {"transactional_ids": [tid]},
        api.ApiKey.LIST_TRANSACTIONS: {"state_filters": [], "producer_id_filters": [],
                                       "duration_filter": -1, "transactional_id_pattern": None},
    }


def _group_requests(topic: str, topic_id: uuid.UUID) -> dict[int, dict[str, Any]]:
    group = f"matrix-{topic}"
    share_member = uuid.uuid4().hex
    fetch_topics = [{"name": topic, "topic_id": topic_id, "partition_indexes": [0]}]
    return {  # in this order: the commit creates the group the later requests look at
        api.ApiKey.FIND_COORDINATOR: {"key": group, "key_type": 0, "coordinator_keys": [group]},
        api.ApiKey.JOIN_GROUP: {"group_id": group, "session_timeout": 10000,
                                "rebalance_timeout": 10000, "member_id": "not-a-member",
                                "group_instance_id": None, "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": b""}],
                                "reason": None},
        api.ApiKey.SYNC_GROUP: {"group_id": group, "generation_id": 1,
                                "member_id": "not-a-member", "group_instance_id": None,
                                "protocol_type": None, "protocol_name": None, "assignments": []},
        api.ApiKey.HEARTBEAT: {"group_id": group, "generation_id": 1,
                               "member_id": "not-a-member", "group_instance_id": None},
        api.ApiKey.LEAVE_GROUP: {"group_id": group, "member_id": "not-a-member",
                                 "members": [{"member_id": "not-a-member",
                                              "group_instance_id": None, "reason": None}]},
        api.ApiKey.OFFSET_COMMIT: {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time": -1,
            "topics": [{"name": topic, "topic_id": topic_id, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": "matrix"}]}]},
        api.ApiKey.OFFSET_FETCH: {"group_id": group, "topics": fetch_topics,
                                  "groups": [{"group_id": group, "member_id": None,
                                              "member_epoch": -1, "topics": fetch_topics}],
                                  "require_stable": False},
        api.ApiKey.DESCRIBE_GROUPS: {"groups": [group], "include_authorized_operations": False},
        api.ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
        api.ApiKey.OFFSET_DELETE: {"group_id": group, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]},
        api.ApiKey.DELETE_GROUPS: {"groups_names": [group + "-absent"]},
        api.ApiKey.CONSUMER_GROUP_HEARTBEAT: {
            "group_id": group + "-848", "member_id": str(uuid.uuid4()), "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
            "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []},
        api.ApiKey.CONSUMER_GROUP_DESCRIBE: {"group_ids": [group + "-848"],
                                             "include_authorized_operations": False},
        # share groups (KIP-932): a member joins, opens a share session, closes it
        api.ApiKey.SHARE_GROUP_HEARTBEAT: {
            "group_id": group + "-share", "member_id": share_member, "member_epoch": 0,
            "rack_id": None, "subscribed_topic_names": [topic]},
        api.ApiKey.SHARE_GROUP_DESCRIBE: {"group_ids": [group + "-share"],
                                          "include_authorized_operations": False},
        api.ApiKey.SHARE_FETCH: {
            "group_id": group + "-share", "member_id": share_member, "share_session_epoch": 0,
            "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "max_records": 10,
            "batch_size": 10, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}],
            "forgotten_topics_data": []},
        api.ApiKey.SHARE_ACKNOWLEDGE: {
            "group_id": group + "-share", "member_id": share_member, "share_session_epoch": -1,
            "topics": []},
        api.ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: {"groups": [
            {"group_id": group + "-share", "topics": None}]},
        api.ApiKey.ALTER_SHARE_GROUP_OFFSETS: {"group_id": group + "-share-idle", "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
        api.ApiKey.DELETE_SHARE_GROUP_OFFSETS: {"group_id": group + "-share-idle",
                                                "topics": [{"topic_name": topic}]},
        # the share coordinator's state APIs (the ShareFetch above made the topic)
        api.ApiKey.INITIALIZE_SHARE_GROUP_STATE: {"group_id": group + "-state", "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition": 0, "state_epoch": 0, "start_offset": 0}]}]},
        api.ApiKey.WRITE_SHARE_GROUP_STATE: {"group_id": group + "-state", "topics": [
            {"topic_id": topic_id, "partitions": [
                {"partition": 0, "state_epoch": 0, "leader_epoch": 0, "start_offset": 0,
                 "state_batches": [{"first_offset": 0, "last_offset": 0,
                                    "delivery_state": 2, "delivery_count": 1}]}]}]},
        api.ApiKey.READ_SHARE_GROUP_STATE: {"group_id": group + "-state", "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        api.ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: {"group_id": group + "-state", "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        api.ApiKey.DELETE_SHARE_GROUP_STATE: {"group_id": group + "-state", "topics": [
            {"topic_id": topic_id, "partitions": [{"partition": 0}]}]},
        # the metadata quorum and log dirs (a path the broker does not have: LOG_DIR_NOT_FOUND)
        api.ApiKey.DESCRIBE_QUORUM: {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        # a static quorum (controller.quorum.voters) cannot change: UNSUPPORTED_VERSION
        api.ApiKey.ADD_RAFT_VOTER: {
            "cluster_id": None, "timeout": 5000, "voter_id": 7,
            "voter_directory_id": uuid.UUID(int=5), "ack_when_committed": True,
            "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}]},
        api.ApiKey.REMOVE_RAFT_VOTER: {
            "cluster_id": None, "voter_id": 7, "voter_directory_id": uuid.UUID(int=5)},
        # no broker has this id: BROKER_ID_NOT_REGISTERED (KIP-631)
        api.ApiKey.UNREGISTER_BROKER: {"broker_id": 4242},
        api.ApiKey.ALTER_REPLICA_LOG_DIRS: {"dirs": [
            {"path": "/nonexistent-odradek-dir", "topics": [{"name": topic, "partitions": [0]}]}]},
        api.ApiKey.DESCRIBE_CLIENT_QUOTAS: {
            "components": [{"entity_type": "user", "match_type": 2, "match": None}],
            "strict": False},
        api.ApiKey.ALTER_CLIENT_QUOTAS: {
            "entries": [{"entity": [{"entity_type": "client-id", "entity_name": "matrix"}],
                         "ops": [{"key": "producer_byte_rate", "value": 1e6,
                                  "remove": False}]}],
            "validate_only": True},
        # a PLAINTEXT listener: SASL requests are in the wrong state (as in Kafka)
        api.ApiKey.SASL_HANDSHAKE: {"mechanism": "PLAIN"},
        api.ApiKey.SASL_AUTHENTICATE: {"auth_bytes": b"\x00u\x00p"},
        api.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: {"users": None},
        api.ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {"deletions": [{"name": "matrix",
                                                                 "mechanism": 1}],
                                                  "upsertions": []},
        # no authorizer: the ACL APIs answer SECURITY_DISABLED (below)
        api.ApiKey.CREATE_ACLS: {"creations": [{
            "resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
            "principal": "User:matrix", "host": "*", "operation": 3, "permission_type": 3}]},
        api.ApiKey.DESCRIBE_ACLS: {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1},
        api.ApiKey.DELETE_ACLS: {"filters": [{
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": "User:matrix", "host_filter": None, "operation": 1,
            "permission_type": 1}]},
    }


def _errors(obj: Any, path: str = "") -> list[tuple[str, int]]:
    """Every error_code field in a decoded response, with where it sits."""
    found: list[tuple[str, int]] = []
    if isinstance(obj, tuple):
        for i, item in enumerate(obj):
            found += _errors(item, f"{path}[{i}]")
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            value = getattr(obj, name)
            if name == "error_code":
                found.append((path + ".error_code", value.value))
            else:
                found += _errors(value, f"{path}.{name}")
    return found


# error codes that are the right answer for the request above
EXPECTED_ERRORS = {
    api.ApiKey.DELETE_TOPICS: {3, 100},  # the topic is absent on purpose
    api.ApiKey.CREATE_PARTITIONS: {37},  # asks for the count it already has
    api.ApiKey.JOIN_GROUP: {25},  # UNKNOWN_MEMBER_ID: the member id is made up on purpose
    api.ApiKey.SYNC_GROUP: {25},
    api.ApiKey.HEARTBEAT: {25},
    api.ApiKey.LEAVE_GROUP: {25},
    api.ApiKey.DELETE_GROUPS: {69},  # GROUP_ID_NOT_FOUND: the group is absent on purpose
    api.ApiKey.ELECT_LEADERS: {84},  # ELECTION_NOT_NEEDED: one node leads its partition
    api.ApiKey.ALTER_PARTITION_REASSIGNMENTS: {85},  # cancels none: NO_REASSIGNMENT_IN_PROGRESS
    # the transactional id / producer id are made up on purpose:
    api.ApiKey.ADD_PARTITIONS_TO_TXN: {49},  # INVALID_PRODUCER_ID_MAPPING
    api.ApiKey.ALTER_REPLICA_LOG_DIRS: {57},  # LOG_DIR_NOT_FOUND
    api.ApiKey.ADD_OFFSETS_TO_TXN: {49},
    api.ApiKey.END_TXN: {49},
    api.ApiKey.TXN_OFFSET_COMMIT: {48},  # INVALID_TXN_STATE: the group is not in a txn
    api.ApiKey.DESCRIBE_TRANSACTIONS: {105},  # TRANSACTIONAL_ID_NOT_FOUND
    api.ApiKey.SASL_HANDSHAKE: {34},  # ILLEGAL_SASL_STATE: not a SASL listener
    api.ApiKey.SASL_AUTHENTICATE: {34},
    api.ApiKey.ALTER_USER_SCRAM_CREDENTIALS: {91},  # RESOURCE_NOT_FOUND: no such credential
    api.ApiKey.CREATE_ACLS: {54},  # SECURITY_DISABLED: no authorizer.class.name
    api.ApiKey.DESCRIBE_ACLS: {54},
    api.ApiKey.DELETE_ACLS: {54},
    api.ApiKey.ADD_RAFT_VOTER: {35},  # UNSUPPORTED_VERSION: kraft.version 0 (static voters)
    api.ApiKey.REMOVE_RAFT_VOTER: {35},
    api.ApiKey.UNREGISTER_BROKER: {102},  # BROKER_ID_NOT_REGISTERED: the id is made up
    # the v1 request closed the share session (epoch -1): v2's close finds none
    api.ApiKey.SHARE_ACKNOWLEDGE: {122},  # SHARE_SESSION_NOT_FOUND
}


def test_every_advertised_version_round_trips(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic_name, timeout=10)
    topic_id = uuid.UUID(int=0)
    # the topic id comes from a Metadata v12 answer below; fetch it once by hand
    with Wire(broker.bootstrap) as w:
        req_cls = api.request_class(api.ApiKey.METADATA, 12)
        body = io.BytesIO()
        entity_writer(req_cls)(body, entities.build(req_cls, _requests(topic_name, topic_id)[3]))
        w.send_request(3, 12, 1, body.getvalue(), header_version=2)
        frame = w.read_frame()
        resp, _ = entity_reader(api.response_class(3, 12))(frame, 5)
        topic_id = resp.topics[0].topic_id
    assert topic_id != uuid.UUID(int=0) and topic_name in md.topics

    checked = 0
    with Wire(broker.bootstrap) as w:
        corr = 100
        for key, data in _requests(topic_name, topic_id).items():
            lo, hi = api.SUPPORTED_VERSIONS[key]
            for version in range(lo, hi + 1):
                corr += 1
                req_cls = api.request_class(key, version)
                sent = data
                if key == api.ApiKey.METADATA and version < 12:
                    # Kafka refuses topic ids below v12 (INVALID_REQUEST)
                    sent = {**data, "topics": [{"name": topic_name,
                                                "topic_id": uuid.UUID(int=0)}]}
                body = io.BytesIO()
                entity_writer(req_cls)(body, entities.build(req_cls, sent))
                w.send_request(key, version, corr, body.getvalue(),
                               header_version=api.request_header_version(key, version))
                frame = w.read_frame()
                where = f"{api.api_name(key)} v{version}"
                assert frame is not None, f"{where}: connection closed"
                (got_corr,) = struct.unpack_from(">i", frame, 0)
                assert got_corr == corr, where
                pos = 4 + (1 if api.response_header_version(key, version) >= 1 else 0)
                resp, size = entity_reader(api.response_class(key, version))(frame, pos)
                assert pos + size == len(frame), f"{where}: {len(frame) - pos - size} trailing bytes"
                bad = [(p, c) for p, c in _errors(resp) if c != 0
                       and c not in EXPECTED_ERRORS.get(key, set())]
                assert not bad, f"{where}: unexpected errors {bad}"
                checked += 1
    assert checked == sum(hi - lo + 1 for lo, hi in api.SUPPORTED_VERSIONS.values())
