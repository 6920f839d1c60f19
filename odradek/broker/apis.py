"""The API table: for every API a node answers, what the request pipeline needs.

One line per API: its handler, the authorizations Kafka's `KafkaApis` /
`ControllerApis` perform for it (resource type, operation, and where in the
request the resource's name comes from), whether a broker-only node relays it
to the active controller, whether it is a controller-listener API (KRaft and
the broker lifecycle; never offered in ApiVersions), and whether it may run
before a SASL connection has authenticated. Adding an API or an ACL check is a
line here; `tests/unit/test_api_table.py` walks the table.

Checks marked `REQUEST` are made by the pipeline itself before the handler
runs (a failure answers the whole request with the API's authorization error);
`RESOURCE` checks are made by the handler per resource in the request (topics,
groups, transactional ids), because Kafka answers those per resource (and
hides unauthorized topics from Metadata).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..protocol import api
from ..security.resources import AclOperation as Op
from ..security.resources import ResourceType as Res
from . import version_errors as VE
from .context import Handler
from .handlers import (
    acls,
    admin,
    api_versions,
    cluster,
    configs,
    consumer_groups,
    features,
    groups,
    log_dirs,
    metadata,
    produce,
    producer_id,
    quorum,
    quotas,
    reassignment,
    sasl,
    scram,
    share_groups,
    share_offsets,
    share_state,
    txn,
)
from .handlers import fetch as fetch_handlers
from .version_errors import NEVER, OlderError, fenced_since

K = api.ApiKey


class Scope(Enum):
    REQUEST = "request"  # checked once by the pipeline, before the handler
    RESOURCE = "resource"  # checked per resource by the handler


_AUTHORIZATION_ERRORS = {
    Res.TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    Res.GROUP: "GROUP_AUTHORIZATION_FAILED",
    Res.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
    Res.TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}
LEFT_OUT = "none: left out of the answer"


@dataclass(frozen=True, slots=True)
class Check:
    resource_type: Res
    operation: Op
    scope: Scope
    source: str  # where the resource name comes from ("kafka-cluster" for CLUSTER)
    denied: str = ""  # the error a denial answers, where not the resource type's own

    @property
    def error(self) -> str:
        """The error code's name a denial answers (docs/security.md's table)."""
        return self.denied or _AUTHORIZATION_ERRORS[self.resource_type]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    handler: Handler
    checks: tuple[Check, ...] = ()
    forwarded: bool = False  # a broker-only node relays it to the active controller
    controller: bool = False  # served on controller listeners (KRaft, broker lifecycle)
    before_auth: bool = False  # may run before SASL authentication completes
    # the answer to a request a REQUEST check refused, when Kafka answers per
    # item (request, error code, message) -> response dict; else a whole-request error
    denial: Callable[[Any, int, str], dict[str, Any]] | None = None
    # error codes older versions of the API cannot carry, and what they answer
    # instead (version_errors.py; applied by the pipeline before encoding)
    older_errors: tuple[OlderError, ...] = ()

    @property
    def name(self) -> str:
        return api.api_name(self.key)


def _cluster(op: Op) -> Check:
    return Check(Res.CLUSTER, op, Scope.REQUEST, "kafka-cluster")


def _topic(op: Op, source: str) -> Check:
    return Check(Res.TOPIC, op, Scope.RESOURCE, source)


def _group(op: Op, source: str) -> Check:
    return Check(Res.GROUP, op, Scope.RESOURCE, source)


def _txn_id(op: Op, source: str = "transactional_id") -> Check:
    return Check(Res.TRANSACTIONAL_ID, op, Scope.RESOURCE, source)


CLUSTER_ACTION = (_cluster(Op.CLUSTER_ACTION),)


async def _unwrapped_by_the_pipeline(node: Any, ctx: Any, request: Any) -> dict[str, Any]:
    raise AssertionError("Envelope is answered by the pipeline's unwrap stage")

API_TABLE: dict[int, ApiSpec] = {spec.key: spec for spec in (
    # -- produce and fetch ----------------------------------------------------------------
    # no rule for a fenced producer's batch: its PRODUCER_FENCED never reaches a
    # Produce answer (txn_verification.py maps it, as Kafka's AddPartitionsToTxnManager),
    # and a walk of every answer would cost the hot path
    # (KIP-890's TRANSACTION_ABORTABLE, v11+, is mapped by the handler: no rule here,
    # so the hot path's answers are never walked)
    ApiSpec(K.PRODUCE, produce.handle_produce, (
        _txn_id(Op.WRITE), _topic(Op.WRITE, "topic_data[].name"))),
    # consumers: READ on each topic; followers (replica_id >= 0): CLUSTER_ACTION
    ApiSpec(K.FETCH, cluster.handle_fetch, (
        _topic(Op.READ, "topics[].topic"),
        Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE, "replica_id >= 0",
              "TOPIC_AUTHORIZATION_FAILED")),
        # v0-v5 clients may not know KAFKA_STORAGE_ERROR: they refresh metadata
        # on NOT_LEADER_OR_FOLLOWER (Kafka's maybeDownConvertStorageError)
        older_errors=(OlderError(VE.KAFKA_STORAGE_ERROR, 6, VE.NOT_LEADER_OR_FOLLOWER),)),
    ApiSpec(K.LIST_OFFSETS, fetch_handlers.handle_list_offsets, (
        _topic(Op.DESCRIBE, "topics[].name"),),
        # OFFSET_NOT_AVAILABLE from v5 (KIP-207); LEADER_NOT_AVAILABLE before
        older_errors=(OlderError(VE.OFFSET_NOT_AVAILABLE, 5, VE.LEADER_NOT_AVAILABLE),)),
    ApiSpec(K.OFFSET_FOR_LEADER_EPOCH, fetch_handlers.handle_offset_for_leader_epoch, (
        _topic(Op.DESCRIBE, "topics[].topic"),
        Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE, "replica_id >= 0"))),
    # -- metadata -------------------------------------------------------------------------
    ApiSpec(K.METADATA, metadata.handle_metadata, (
        _topic(Op.DESCRIBE, "topics[].name (unauthorized topics are hidden)"),
        Check(Res.CLUSTER, Op.CREATE, Scope.RESOURCE, "allow_auto_topic_creation",
              "TOPIC_AUTHORIZATION_FAILED"),
        _topic(Op.CREATE, "allow_auto_topic_creation"))),
    ApiSpec(K.API_VERSIONS, api_versions.handle_api_versions, before_auth=True),
    # -- SASL (the connection's own authentication: security/sasl.py) --------------------
    ApiSpec(K.SASL_HANDSHAKE, sasl.handle_sasl_handshake, before_auth=True),
    ApiSpec(K.SASL_AUTHENTICATE, sasl.handle_sasl_authenticate, before_auth=True),
    ApiSpec(K.DESCRIBE_CLUSTER, metadata.handle_describe_cluster, (
        _cluster(Op.DESCRIBE),)),
    ApiSpec(K.DESCRIBE_TOPIC_PARTITIONS, metadata.handle_describe_topic_partitions, (
        _topic(Op.DESCRIBE, "topics[].name"),)),
    # -- topics and configs (admin) -------------------------------------------------------
    ApiSpec(K.CREATE_TOPICS, admin.handle_create_topics, (
        Check(Res.CLUSTER, Op.CREATE, Scope.RESOURCE, "topics[].name, else TOPIC CREATE",
              "TOPIC_AUTHORIZATION_FAILED"),
        _topic(Op.CREATE, "topics[].name"),
        Check(Res.TOPIC, Op.DESCRIBE_CONFIGS, Scope.RESOURCE,
              "topics[].name (configs in the answer)", "TOPIC_AUTHORIZATION_FAILED in "
              "topic_config_error_code, configs left out")),
        forwarded=True),
    ApiSpec(K.DELETE_TOPICS, admin.handle_delete_topics, (
        _topic(Op.DELETE, "topics[].name"),), forwarded=True,
        # TOPIC_DELETION_DISABLED from v3; INVALID_REQUEST before (KafkaApis)
        older_errors=(OlderError(VE.TOPIC_DELETION_DISABLED, 3, VE.INVALID_REQUEST),)),
    ApiSpec(K.CREATE_PARTITIONS, admin.handle_create_partitions, (
        _topic(Op.ALTER, "topics[].name"),), forwarded=True),
    ApiSpec(K.DELETE_RECORDS, admin.handle_delete_records, (
        _topic(Op.DELETE, "topics[].name"),)),
    ApiSpec(K.DESCRIBE_CONFIGS, configs.handle_describe_configs, (
        _topic(Op.DESCRIBE_CONFIGS, "resources[] of type TOPIC"),
        Check(Res.CLUSTER, Op.DESCRIBE_CONFIGS, Scope.RESOURCE, "resources[] of type BROKER"),
        _group(Op.DESCRIBE_CONFIGS, "resources[] of type GROUP"))),
    ApiSpec(K.ALTER_CONFIGS, configs.handle_alter_configs, (
        _topic(Op.ALTER_CONFIGS, "resources[] of type TOPIC"),
        Check(Res.CLUSTER, Op.ALTER_CONFIGS, Scope.RESOURCE, "resources[] of type BROKER"),
        _group(Op.ALTER_CONFIGS, "resources[] of type GROUP")),
        forwarded=True),
    ApiSpec(K.INCREMENTAL_ALTER_CONFIGS, configs.handle_incremental_alter_configs, (
        _topic(Op.ALTER_CONFIGS, "resources[] of type TOPIC"),
        Check(Res.CLUSTER, Op.ALTER_CONFIGS, Scope.RESOURCE, "resources[] of type BROKER"),
        _group(Op.ALTER_CONFIGS, "resources[] of type GROUP")),
        forwarded=True),
    ApiSpec(K.LIST_CONFIG_RESOURCES, configs.handle_list_config_resources, (
        _cluster(Op.DESCRIBE_CONFIGS),)),
    ApiSpec(K.DESCRIBE_LOG_DIRS, log_dirs.handle_describe_log_dirs, (
        _cluster(Op.DESCRIBE),)),
    ApiSpec(K.ALTER_REPLICA_LOG_DIRS, log_dirs.handle_alter_replica_log_dirs, (
        _cluster(Op.ALTER),), denial=log_dirs.alter_replica_log_dirs_errors),
    ApiSpec(K.ELECT_LEADERS, cluster.handle_elect_leaders, (
        _cluster(Op.ALTER),), forwarded=True),
    ApiSpec(K.UNREGISTER_BROKER, cluster.handle_unregister_broker, (
        _cluster(Op.ALTER),), forwarded=True),
    ApiSpec(K.ALTER_PARTITION_REASSIGNMENTS, reassignment.handle_alter_partition_reassignments,
            (_cluster(Op.ALTER),), forwarded=True),
    ApiSpec(K.LIST_PARTITION_REASSIGNMENTS, reassignment.handle_list_partition_reassignments,
            (_cluster(Op.DESCRIBE),), forwarded=True),
    ApiSpec(K.DESCRIBE_CLIENT_QUOTAS, quotas.handle_describe_client_quotas, (
        _cluster(Op.DESCRIBE_CONFIGS),)),
    ApiSpec(K.ALTER_CLIENT_QUOTAS, quotas.handle_alter_client_quotas, (
        _cluster(Op.ALTER_CONFIGS),), forwarded=True, denial=quotas.alter_client_quotas_errors),
    # -- ACLs -----------------------------------------------------------------------------
    ApiSpec(K.CREATE_ACLS, acls.handle_create_acls, (_cluster(Op.ALTER),), forwarded=True,
            denial=acls.create_acls_errors),
    ApiSpec(K.DESCRIBE_ACLS, acls.handle_describe_acls, (_cluster(Op.DESCRIBE),)),
    ApiSpec(K.DELETE_ACLS, acls.handle_delete_acls, (_cluster(Op.ALTER),), forwarded=True,
            denial=acls.delete_acls_errors),
    # -- SCRAM credentials (KIP-554) ------------------------------------------------------
    ApiSpec(K.DESCRIBE_USER_SCRAM_CREDENTIALS, scram.handle_describe_user_scram_credentials,
            (_cluster(Op.DESCRIBE),)),
    ApiSpec(K.ALTER_USER_SCRAM_CREDENTIALS, scram.handle_alter_user_scram_credentials,
            (_cluster(Op.ALTER),), forwarded=True,
            denial=scram.alter_user_scram_credentials_errors),
    # -- the metadata quorum (KIP-595/836/853): its leader answers ----------------------
    ApiSpec(K.DESCRIBE_QUORUM, quorum.handle_describe_quorum, (_cluster(Op.DESCRIBE),),
            forwarded=True),
    ApiSpec(K.ADD_RAFT_VOTER, quorum.handle_add_raft_voter, (_cluster(Op.ALTER),),
            forwarded=True),
    ApiSpec(K.REMOVE_RAFT_VOTER, quorum.handle_remove_raft_voter, (_cluster(Op.ALTER),),
            forwarded=True),
    # -- finalized features (KIP-584) -----------------------------------------------------
    ApiSpec(K.UPDATE_FEATURES, features.handle_update_features, (_cluster(Op.ALTER),),
            forwarded=True, denial=features.update_features_errors),
    # -- consumer groups ------------------------------------------------------------------
    ApiSpec(K.FIND_COORDINATOR, groups.handle_find_coordinator, (
        _group(Op.DESCRIBE, "coordinator_keys[] (key_type 0)"),
        _txn_id(Op.DESCRIBE, "coordinator_keys[] (key_type 1)"),
        Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE,
              "coordinator_keys[] (key_type 2, share)"))),
    ApiSpec(K.JOIN_GROUP, groups.handle_join_group, (_group(Op.READ, "group_id"),)),
    ApiSpec(K.SYNC_GROUP, groups.handle_sync_group, (_group(Op.READ, "group_id"),)),
    ApiSpec(K.HEARTBEAT, groups.handle_heartbeat, (_group(Op.READ, "group_id"),)),
    ApiSpec(K.LEAVE_GROUP, groups.handle_leave_group, (_group(Op.READ, "group_id"),)),
    ApiSpec(K.OFFSET_COMMIT, groups.handle_offset_commit, (
        _group(Op.READ, "group_id"), _topic(Op.READ, "topics[].name"))),
    ApiSpec(K.OFFSET_FETCH, groups.handle_offset_fetch, (
        _group(Op.DESCRIBE, "group_id / groups[].group_id"),
        _topic(Op.DESCRIBE, "topics[].name"))),
    ApiSpec(K.OFFSET_DELETE, groups.handle_offset_delete, (
        _group(Op.DELETE, "group_id"), _topic(Op.READ, "topics[].name"))),
    ApiSpec(K.DESCRIBE_GROUPS, groups.handle_describe_groups, (
        _group(Op.DESCRIBE, "groups[]"),)),
    ApiSpec(K.LIST_GROUPS, groups.handle_list_groups, (
        Check(Res.CLUSTER, Op.DESCRIBE, Scope.RESOURCE, "all groups, else per GROUP DESCRIBE",
              LEFT_OUT),
        Check(Res.GROUP, Op.DESCRIBE, Scope.RESOURCE, "each listed group", LEFT_OUT))),
    ApiSpec(K.DELETE_GROUPS, groups.handle_delete_groups, (
        _group(Op.DELETE, "groups_names[]"),)),
    ApiSpec(K.CONSUMER_GROUP_HEARTBEAT, consumer_groups.handle_consumer_group_heartbeat, (
        _group(Op.READ, "group_id"), _topic(Op.DESCRIBE, "subscribed_topic_names[]"))),
    ApiSpec(K.CONSUMER_GROUP_DESCRIBE, consumer_groups.handle_consumer_group_describe, (
        _group(Op.DESCRIBE, "group_ids[]"),)),
    # -- share groups (KIP-932) -----------------------------------------------------------
    ApiSpec(K.SHARE_GROUP_HEARTBEAT, share_groups.handle_share_group_heartbeat, (
        _group(Op.READ, "group_id"), _topic(Op.DESCRIBE, "subscribed_topic_names[]"))),
    ApiSpec(K.SHARE_GROUP_DESCRIBE, share_groups.handle_share_group_describe, (
        _group(Op.DESCRIBE, "group_ids[]"),)),
    ApiSpec(K.SHARE_FETCH, share_groups.handle_share_fetch, (
        _group(Op.READ, "group_id"), _topic(Op.READ, "topics[].topic_id"))),
    ApiSpec(K.SHARE_ACKNOWLEDGE, share_groups.handle_share_acknowledge, (
        _group(Op.READ, "group_id"), _topic(Op.READ, "topics[].topic_id"))),
    ApiSpec(K.DESCRIBE_SHARE_GROUP_OFFSETS, share_offsets.handle_describe_share_group_offsets, (
        _group(Op.DESCRIBE, "groups[].group_id"),
        Check(Res.TOPIC, Op.DESCRIBE, Scope.RESOURCE, "groups[].topics[].topic_name",
              LEFT_OUT))),
    ApiSpec(K.ALTER_SHARE_GROUP_OFFSETS, share_offsets.handle_alter_share_group_offsets, (
        _group(Op.READ, "group_id"), _topic(Op.READ, "topics[].topic_name"))),
    ApiSpec(K.DELETE_SHARE_GROUP_OFFSETS, share_offsets.handle_delete_share_group_offsets, (
        _group(Op.DELETE, "group_id"), _topic(Op.READ, "topics[].topic_name"))),
    # the share coordinator's state, broker to broker (KIP-932); CLUSTER_ACTION,
    # answered per partition by the handler (no top-level error code)
    *(ApiSpec(k, h, (Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE,
                           "the whole request"),))
      for k, h in ((K.INITIALIZE_SHARE_GROUP_STATE,
                    share_state.handle_initialize_share_group_state),
                   (K.READ_SHARE_GROUP_STATE, share_state.handle_read_share_group_state),
                   (K.WRITE_SHARE_GROUP_STATE, share_state.handle_write_share_group_state),
                   (K.DELETE_SHARE_GROUP_STATE, share_state.handle_delete_share_group_state),
                   (K.READ_SHARE_GROUP_STATE_SUMMARY,
                    share_state.handle_read_share_group_state_summary))),
    # -- producers and transactions -------------------------------------------------------
    ApiSpec(K.INIT_PRODUCER_ID, producer_id.handle_init_producer_id, (
        _txn_id(Op.WRITE),
        Check(Res.CLUSTER, Op.IDEMPOTENT_WRITE, Scope.RESOURCE,
              "no transactional_id, else WRITE on any topic")),
        older_errors=fenced_since(4)),
    ApiSpec(K.ADD_PARTITIONS_TO_TXN, txn.handle_add_partitions_to_txn, (
        _txn_id(Op.WRITE, "transactional_id / transactions[].transactional_id"),
        _topic(Op.WRITE, "topics[].name"),
        Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE, "v4+ verify-only batches")),
        older_errors=(*fenced_since(2),
                      OlderError(VE.TRANSACTION_ABORTABLE, 5, VE.INVALID_TXN_STATE))),
    ApiSpec(K.ADD_OFFSETS_TO_TXN, txn.handle_add_offsets_to_txn, (
        _txn_id(Op.WRITE), _group(Op.READ, "group_id")), older_errors=fenced_since(2)),
    ApiSpec(K.END_TXN, txn.handle_end_txn, (_txn_id(Op.WRITE),),
            older_errors=fenced_since(2)),
    # CLUSTER_ACTION, answered per partition by the handler (no top-level error code)
    ApiSpec(K.WRITE_TXN_MARKERS, txn.handle_write_txn_markers, (
        Check(Res.CLUSTER, Op.CLUSTER_ACTION, Scope.RESOURCE, "the whole request"),)),
    ApiSpec(K.TXN_OFFSET_COMMIT, txn.handle_txn_offset_commit, (
        _txn_id(Op.WRITE), _group(Op.READ, "group_id"), _topic(Op.READ, "topics[].name")),
        older_errors=(OlderError(VE.PRODUCER_FENCED, NEVER, VE.INVALID_PRODUCER_EPOCH),
                      OlderError(VE.TRANSACTION_ABORTABLE, 4, VE.INVALID_TXN_STATE))),
    ApiSpec(K.DESCRIBE_PRODUCERS, txn.handle_describe_producers, (
        _topic(Op.READ, "topics[].name"),)),
    ApiSpec(K.DESCRIBE_TRANSACTIONS, txn.handle_describe_transactions, (
        _txn_id(Op.DESCRIBE, "transactional_ids[]"),)),
    ApiSpec(K.LIST_TRANSACTIONS, txn.handle_list_transactions, (
        Check(Res.TRANSACTIONAL_ID, Op.DESCRIBE, Scope.RESOURCE,
              "each listed transactional id", LEFT_OUT),)),
    # -- controller listeners: KRaft and the broker lifecycle ----------------------------
    ApiSpec(K.VOTE, cluster.handle_raft_request, CLUSTER_ACTION, controller=True),
    ApiSpec(K.BEGIN_QUORUM_EPOCH, cluster.handle_raft_request, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.END_QUORUM_EPOCH, cluster.handle_raft_request, CLUSTER_ACTION, controller=True),
    ApiSpec(K.UPDATE_RAFT_VOTER, quorum.handle_update_raft_voter, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.FETCH_SNAPSHOT, cluster.handle_fetch_snapshot, CLUSTER_ACTION, controller=True),
    ApiSpec(K.ALTER_PARTITION, cluster.handle_alter_partition, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.BROKER_REGISTRATION, cluster.handle_broker_registration, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.BROKER_HEARTBEAT, cluster.handle_broker_heartbeat, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.ALLOCATE_PRODUCER_IDS, cluster.handle_allocate_producer_ids, CLUSTER_ACTION,
            controller=True),
    ApiSpec(K.ASSIGN_REPLICAS_TO_DIRS, cluster.handle_assign_replicas_to_dirs,
            CLUSTER_ACTION, controller=True),
    # a broker's forwarded request (KIP-590): the pipeline unwraps it and runs the
    # inner request, with its own line's checks, as the client the Envelope names
    ApiSpec(K.ENVELOPE, _unwrapped_by_the_pipeline, CLUSTER_ACTION, controller=True),
)}

FORWARDED_TO_CONTROLLER = frozenset(k for k, s in API_TABLE.items() if s.forwarded)
