"""DescribeQuorum (API 55): the metadata quorum as its leader sees it.

v0 (KIP-595): leader, epoch, high watermark, and each voter's and observer's
log end offset; v1 (KIP-836) adds each replica's last fetch and last caught-up
times; v2 (KIP-853) adds each replica's directory id (the zero id: odradek's
voters are static, `controller.quorum.voters`) and the voters' controller
listeners. Only the Raft leader answers; a broker-only node forwards the request
to the active controller (the leader) in an Envelope, as Kafka's brokers do, and
a voter that does not lead answers NOT_LEADER_OR_FOLLOWER for the partition.
"""

from __future__ import annotations

import uuid
from typing import Any

from ...metadata.quorum import METADATA_TOPIC
from ...metadata.quorum_status import ReplicaView
from ...metadata.raft_quorum import RaftMetadataQuorum
from ..context import RequestContext
from ..services import QuorumServices

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
ZERO_DIRECTORY = uuid.UUID(int=0)


def _replica(r: ReplicaView) -> dict[str, Any]:
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": ZERO_DIRECTORY,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_ms,
        "last_caught_up_timestamp": r.last_caught_up_ms,
    }


def _partition(error: int, leader_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "partition_index": 0,
        "error_code": error,
        "error_message": None,
        "leader_id": leader_id,
        "leader_epoch": epoch,
        "high_watermark": -1,
        "current_voters": [],
        "observers": [],
    }


async def handle_describe_quorum(
    broker: QuorumServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    asked = [(t.topic_name, int(p.partition_index)) for t in req.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return {"error_code": UNKNOWN_TOPIC_OR_PARTITION, "error_message": None,
                "topics": [], "nodes": []}
    quorum = broker.quorum
    status = quorum.describe_quorum() if isinstance(quorum, RaftMetadataQuorum) else None
    nodes: list[dict[str, Any]] = []
    if status is None:
        leader = quorum.leader_id if isinstance(quorum, RaftMetadataQuorum) else -1
        epoch = quorum.epoch if isinstance(quorum, RaftMetadataQuorum) else -1
        partition = _partition(NOT_LEADER_OR_FOLLOWER, leader, epoch)
    else:
        partition = {
            **_partition(NONE, status.leader_id, status.leader_epoch),
            "high_watermark": status.high_watermark,
            "current_voters": [_replica(r) for r in status.voters],
            "observers": [_replica(r) for r in status.observers],
        }
        assert isinstance(quorum, RaftMetadataQuorum)
        listener = min(broker.controller_listener_names, default="CONTROLLER")
        addresses = quorum.config.voters.addresses
        nodes = [
            {"node_id": vid, "listeners": [
                {"name": listener, "host": addresses[vid].host, "port": addresses[vid].port}
            ] if vid in addresses else []}
            for vid in sorted(quorum.config.voters.ids)
        ]
    return {
        "error_code": NONE,
        "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes,
    }
