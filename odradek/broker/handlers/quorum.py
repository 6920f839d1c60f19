"""DescribeQuorum (API 55): the metadata quorum as its leader sees it.

v0 (KIP-595): leader, epoch, high watermark, and each voter's and observer's
log end offset; v1 (KIP-836) adds each replica's last fetch and last caught-up
times; v2 (KIP-853) adds each replica's directory id (a voter's from the
VotersRecord of a dynamic quorum; the zero id for a static voter, and for an
observer) and the voters' controller listeners. Only the Raft leader answers; a broker-only node forwards the request
to the active controller (the leader) in an Envelope, as Kafka's brokers do, and
a voter that does not lead answers NOT_LEADER_OR_FOLLOWER for the partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ...metadata.quorum import METADATA_TOPIC
from ...metadata.quorum_status import ReplicaView
from ...metadata.raft_quorum import NotControllerError, RaftMetadataQuorum
from ...raft.config import VoterAddress
from ...raft.core import RaftCore, VoterChangeError
from ...raft.voters import uuid_bytes, uuid_text
from ..context import RequestContext
from ..services import QuorumServices

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REQUEST = 42
ZERO_DIRECTORY = uuid.UUID(int=0)


def _replica(r: ReplicaView, directory_id: str | None = None) -> dict[str, Any]:
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": (uuid.UUID(bytes=uuid_bytes(directory_id)) if directory_id
                                 else ZERO_DIRECTORY),
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
        assert isinstance(quorum, RaftMetadataQuorum)
        voters = quorum.voters
        partition = {
            **_partition(NONE, status.leader_id, status.leader_epoch),
            "high_watermark": status.high_watermark,
            "current_voters": [_replica(r, voters.directory_ids.get(r.replica_id))
                               for r in status.voters],
            "observers": [_replica(r) for r in status.observers],
        }
        listener = min(broker.controller_listener_names, default="CONTROLLER")
        addresses = voters.addresses
        nodes = [
            {"node_id": vid, "listeners": [
                {"name": addresses[vid].listener if voters.directory_ids else listener,
                 "host": addresses[vid].host, "port": addresses[vid].port}
            ] if vid in addresses else []}
            for vid in sorted(voters.ids)
        ]
    return {
        "error_code": NONE,
        "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes,
    }


# -- KIP-853: AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82) ------------------

REQUEST_TIMED_OUT = 7
INCONSISTENT_CLUSTER_ID = 104
DEFAULT_VOTER_CHANGE_TIMEOUT_MS = 30_000


def _voter_answer(code: int, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message}


def _directory_text(value: Any) -> str:
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(16)
    return uuid_text(raw)


async def _change(
    broker: QuorumServices, cluster_id: Any, timeout_ms: int,
    change: Callable[[RaftCore, int], tuple[int, list[Any]]],
) -> tuple[int, str | None]:
    """Run one voter change on the leader: (error code, message)."""
    quorum = broker.quorum
    if not isinstance(quorum, RaftMetadataQuorum):
        return NOT_LEADER_OR_FOLLOWER, "not a controller of a KRaft quorum"
    if cluster_id is not None and cluster_id != quorum.cluster_id:
        return INCONSISTENT_CLUSTER_ID, f"cluster id {cluster_id} is not {quorum.cluster_id}"
    try:
        await quorum.change_voters(change, max(timeout_ms, 1) / 1000)
    except VoterChangeError as e:
        return e.error_code, str(e)
    except NotControllerError as e:
        return NOT_LEADER_OR_FOLLOWER, str(e)
    except TimeoutError:
        return REQUEST_TIMED_OUT, "the voter change did not commit in time"
    return NONE, None


def _address(voter_id: int, listeners: Any) -> VoterAddress | None:
    for lst in listeners or ():
        return VoterAddress(voter_id, str(lst.host), int(lst.port), str(lst.name))
    return None


async def handle_add_raft_voter(
    broker: QuorumServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """The leader appends a VotersRecord with the new voter (a caught-up
    observer, raft/membership.py); answered once committed (v1 with
    ack_when_committed false: once appended)."""
    voter_id, directory = int(req.voter_id), _directory_text(req.voter_directory_id)
    address = _address(voter_id, req.listeners)
    if address is None:
        return _voter_answer(INVALID_REQUEST, "the new voter has no listener")
    wait = bool(getattr(req, "ack_when_committed", True))
    timeout_ms = int(getattr(req.timeout, "total_seconds", lambda: 0)() * 1000) or int(
        DEFAULT_VOTER_CHANGE_TIMEOUT_MS)

    def change(core: RaftCore, now_ms: int) -> tuple[int, list[Any]]:
        offset, effects = core.add_voter(voter_id, directory, address, now_ms)
        return (offset if wait else -1), effects

    return _voter_answer(*await _change(broker, req.cluster_id, timeout_ms, change))


async def handle_remove_raft_voter(
    broker: QuorumServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    voter_id, directory = int(req.voter_id), _directory_text(req.voter_directory_id)

    def change(core: RaftCore, now_ms: int) -> tuple[int, list[Any]]:
        return core.remove_voter(voter_id, directory, now_ms)

    return _voter_answer(*await _change(
        broker, req.cluster_id, DEFAULT_VOTER_CHANGE_TIMEOUT_MS, change))


async def handle_update_raft_voter(
    broker: QuorumServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """A voter tells the leader its endpoints (it sends this itself after a
    restart with new listeners, raft/membership.py); answered once the new
    VotersRecord is appended, not committed, as Kafka's leader does."""
    quorum = broker.quorum
    voter_id, directory = int(req.voter_id), _directory_text(req.voter_directory_id)
    address = _address(voter_id, req.listeners)
    code, _ = INVALID_REQUEST, None
    if address is not None:

        def change(core: RaftCore, now_ms: int) -> tuple[int, list[Any]]:
            _, effects = core.update_voter(voter_id, directory, address, now_ms)
            return -1, effects

        code, _ = await _change(broker, req.cluster_id, DEFAULT_VOTER_CHANGE_TIMEOUT_MS, change)
    leader, epoch, host, port = -1, -1, "", 0
    if isinstance(quorum, RaftMetadataQuorum):
        leader, epoch = quorum.leader_id, quorum.epoch
        local = quorum.config.local_address
        if leader == quorum.node_id and local is not None:
            host, port = local.host, local.port
    return {"throttle_time": 0, "error_code": code,
            "current_leader": {"leader_id": leader, "leader_epoch": epoch, "host": host,
                               "port": port}}
