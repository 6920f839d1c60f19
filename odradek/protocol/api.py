"""The API version table: which Kafka APIs odradek answers, in which versions.

Message types come from `kio` (generated from Kafka's own JSON schemas). This
module maps (api_key, api_version) to the kio request/response classes and
says whether a version is *flexible* (KIP-482: compact types and tagged fields),
which also decides the header versions:

- request header v2 for flexible requests, v1 otherwise;
- response header v1 for flexible responses, v0 otherwise, except ApiVersions,
  whose response always uses header v0 so that a client that does not yet know
  the broker's versions can read it.

Every range in SUPPORTED_VERSIONS is advertised by ApiVersions and must work in
every version it covers.
"""

from __future__ import annotations

from enum import IntEnum
from functools import cache
from pkgutil import resolve_name
from typing import Any

from kio.schema.index import schema_name_map
from kio.static.constants import EntityType


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_PRODUCERS = 61
    LIST_TRANSACTIONS = 66
    DESCRIBE_TRANSACTIONS = 65
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76  # KIP-932 share groups
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83  # the share coordinator's, broker to broker
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    LIST_CONFIG_RESOURCES = 74  # KIP-1142 (v0 was ListClientMetricsResources)
    ELECT_LEADERS = 43
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    ADD_RAFT_VOTER = 80  # KIP-853 dynamic controller quorum
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82  # a voter's own, to the leader (controller listener)
    UPDATE_FEATURES = 57
    UNREGISTER_BROKER = 64  # KIP-631: an operator removes a broker's registration
    # Controller APIs (KRaft): answered only on a controller's listeners.
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    FETCH_SNAPSHOT = 59
    ALTER_PARTITION = 56
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    ALLOCATE_PRODUCER_IDS = 67
    ASSIGN_REPLICAS_TO_DIRS = 73
    ENVELOPE = 58  # KIP-590: a broker's forwarded admin request, as its client


# api_key -> (min_version, max_version) that odradek answers.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    # v12: transactions v2 (KIP-890 part 2), the partitions of a transaction
    # are added implicitly when the cluster is at transaction.version 2;
    # v13 names topics by id (KIP-516, Kafka 4.1)
    ApiKey.PRODUCE: (3, 13),
    # v17 (KIP-853's replica directory id) and v18 (the follower's high watermark)
    # add tagged request fields only KRaft's own fetches use: ignored, as Kafka's
    # broker does for consumer and follower fetches
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    # v5 (KIP-890) lets the answer carry TRANSACTION_ABORTABLE: same fields
    ApiKey.INIT_PRODUCER_ID: (0, 6),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # Share groups (KIP-932) as Kafka 4.1 serves them: v1 (v0 was early access)
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    # the share coordinator's state (KIP-932), sent by share-partition leaders
    # (CLUSTER_ACTION); WriteShareGroupState v1 and ReadShareGroupStateSummary v1
    # carry Kafka 4.2's DeliveryCompleteCount (KIP-1226)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    # Transactions (KIP-98, KIP-890). EndTxn v4, TxnOffsetCommit v4, AddOffsetsToTxn
    # v4 and AddPartitionsToTxn v5 let the answer carry TRANSACTION_ABORTABLE (of
    # these, odradek answers it only to a verify-only AddPartitionsToTxn v5 for a
    # partition outside the transaction, as Kafka does); EndTxn's and TxnOffsetCommit's v5
    # are transactions v2 (with transaction.version 2: the epoch bump, the
    # implicit add of the group's partition; coordinator/transaction.py).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    # v2 names each marker's transaction version: 2 makes the leader refuse a
    # marker whose epoch is not above the producer's (odradek's coordinator sends v1)
    ApiKey.WRITE_TXN_MARKERS: (1, 2),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),  # v5: the implicit add of transactions v2
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    # ACLs (KIP-140; v1+ have pattern types, KIP-290; kio has no v0)
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # SASL (KIP-43, KIP-152, KIP-368) and SCRAM credentials (KIP-554)
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    # KIP-853: brokers forward them to the active controller (the Raft leader);
    # AddRaftVoter v1 adds ack_when_committed
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    # finalized feature levels (KIP-584; metadata/features.py)
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.UNREGISTER_BROKER: (0, 0),
}


# APIs a broker sends to the active controller (KIP-500, KIP-631), with the
# versions odradek's controller answers. They are not in SUPPORTED_VERSIONS:
# clients never see them in ApiVersions, as in Kafka.
CONTROLLER_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.ALTER_PARTITION: (2, 3),
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 1),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    # KRaft between voters (metadata/raft_wire.py speaks these versions)
    ApiKey.VOTE: (2, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (1, 1),
    ApiKey.END_QUORUM_EPOCH: (1, 1),
    ApiKey.FETCH_SNAPSHOT: (0, 1),  # voters and observers (brokers), KIP-630
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),  # KIP-853: a voter's new endpoints
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (0, 0),
    ApiKey.ENVELOPE: (0, 0),  # brokers' forwarded admin requests (KIP-590)
}


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN({api_key})"


def is_supported(api_key: int, api_version: int) -> bool:
    span = SUPPORTED_VERSIONS.get(api_key)
    return span is not None and span[0] <= api_version <= span[1]


def is_controller_api(api_key: int, api_version: int) -> bool:
    span = CONTROLLER_VERSIONS.get(api_key)
    return span is not None and span[0] <= api_version <= span[1]


def _schema_name(api_key: int) -> str:
    return ApiKey(api_key).name.lower()


@cache
def request_class(api_key: int, api_version: int) -> Any:
    path = schema_name_map[_schema_name(api_key)][api_version][EntityType.request]
    return resolve_name(path)


@cache
def response_class(api_key: int, api_version: int) -> Any:
    path = schema_name_map[_schema_name(api_key)][api_version][EntityType.response]
    return resolve_name(path)


@cache
def is_flexible(api_key: int, api_version: int) -> bool:
    return bool(request_class(api_key, api_version).__flexible__)


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0
