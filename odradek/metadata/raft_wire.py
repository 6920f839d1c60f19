"""The Raft core's messages (`raft/messages.py`) to and from Kafka's wire RPCs.

KRaft's RPCs carry one topic (``__cluster_metadata``) and one partition; the
core's messages are those partition-level fields. This module is the whole
translation, both ways, as plain dicts for `protocol/entities.py` (requests
out, responses out) and kio objects (requests in, responses in):

    Vote v2 (KIP-996 pre-vote)      <-> VoteRequest / VoteResponse
    BeginQuorumEpoch v1             <-> BeginQuorumEpochRequest / Response
    EndQuorumEpoch v1               <-> EndQuorumEpochRequest / Response
    Fetch v12 (replica_id)          <-> FetchRequest / FetchResponse (snapshot_id tag)
    FetchSnapshot v1 (KIP-630)      <-> FetchSnapshotRequest / FetchSnapshotResponse
    UpdateRaftVoter v0 (KIP-853)    <-> UpdateVoterRequest / UpdateVoterResponse (sent
                                        only: the leader answers in broker/handlers/quorum.py)

Records travel as the bytes of whole record batches (`metadata/raft_log.py`
reads and writes them); a snapshot travels as `unaligned_records`, chunks of
its file from a byte position. `metadata/raft_quorum.py` sends these and
feeds the answers to the core.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..protocol import api
from ..protocol.entities import ms
from ..protocol.records import iter_batch_headers
from ..raft import messages as M
from ..raft.config import VoterAddress
from ..raft.log import OffsetAndEpoch, RecordsSlice
from ..raft.voters import ZERO_UUID, uuid_bytes, uuid_text
from .quorum import METADATA_TOPIC, METADATA_TOPIC_ID

VOTE_VERSION = 2
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
FETCH_VERSION = 17  # v17: the fetcher's replica directory id (KIP-853)
FETCH_SNAPSHOT_VERSION = 1
UPDATE_RAFT_VOTER_VERSION = 0
FETCH_MAX_BYTES = 8 * 1024 * 1024


def _uuid(text: str) -> uuid.UUID | None:
    """A Kafka Uuid (base64) as kio's UUID; None for no id (the zero id)."""
    if not text or text == ZERO_UUID:
        return None
    return uuid.UUID(bytes=uuid_bytes(text))


def _uuid_text(value: Any) -> str:
    """kio's UUID as a Kafka Uuid (base64); "" for none."""
    return uuid_text(value.bytes) if isinstance(value, uuid.UUID) else ""


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


def _partition(obj: Any) -> Any:
    """The one partition of a KRaft RPC (topics[0].partitions[0])."""
    topics = getattr(obj, "topics", None) or getattr(obj, "responses", None)
    if not topics or not topics[0].partitions:
        raise ValueError("a KRaft RPC without the metadata partition")
    return topics[0].partitions[0]


# -- requests out ----------------------------------------------------------------------


def request_to_wire(body: M.Request, cluster_id: str | None) -> tuple[int, int, dict[str, Any]]:
    """(api key, version, request dict) for a request the core sends."""
    if isinstance(body, M.VoteRequest):
        return api.ApiKey.VOTE, VOTE_VERSION, {
            "cluster_id": cluster_id, "voter_id": body.voter_id,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "replica_epoch": body.replica_epoch,
                "replica_id": body.replica_id,
                "replica_directory_id": _uuid(body.candidate_directory_id),
                "voter_directory_id": _uuid(body.voter_directory_id),
                "last_offset_epoch": body.last_offset_epoch,
                "last_offset": body.last_offset, "pre_vote": body.pre_vote,
            }]}],
        }
    if isinstance(body, M.BeginQuorumEpochRequest):
        return api.ApiKey.BEGIN_QUORUM_EPOCH, BEGIN_QUORUM_EPOCH_VERSION, {
            "cluster_id": cluster_id, "voter_id": body.voter_id,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "voter_directory_id": _uuid(body.voter_directory_id),
                "leader_id": body.leader_id, "leader_epoch": body.leader_epoch,
            }]}],
            "leader_endpoints": [],
        }
    if isinstance(body, M.EndQuorumEpochRequest):
        return api.ApiKey.END_QUORUM_EPOCH, END_QUORUM_EPOCH_VERSION, {
            "cluster_id": cluster_id,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": 0, "leader_id": body.leader_id,
                "leader_epoch": body.leader_epoch,
                "preferred_candidates": [{"candidate_id": c, "candidate_directory_id": None}
                                         for c in body.preferred_successors],
            }]}],
            "leader_endpoints": [],
        }
    if isinstance(body, M.FetchRequest):
        return api.ApiKey.FETCH, FETCH_VERSION, {
            "cluster_id": cluster_id,
            "replica_state": {"replica_id": body.replica_id, "replica_epoch": -1},
            "max_wait": body.max_wait_ms, "min_bytes": 0, "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [{
                "partition": 0, "current_leader_epoch": body.current_leader_epoch,
                "fetch_offset": body.fetch_offset,
                "last_fetched_epoch": body.last_fetched_epoch,
                "log_start_offset": -1, "partition_max_bytes": FETCH_MAX_BYTES,
                "replica_directory_id": _uuid(body.replica_directory_id),
            }]}],
            "forgotten_topics_data": [], "rack_id": "",
        }
    if isinstance(body, M.FetchSnapshotRequest):
        return api.ApiKey.FETCH_SNAPSHOT, FETCH_SNAPSHOT_VERSION, {
            "cluster_id": cluster_id, "replica_id": body.replica_id,
            "max_bytes": FETCH_MAX_BYTES,
            "topics": [{"name": METADATA_TOPIC, "partitions": [{
                "partition": 0, "current_leader_epoch": body.current_leader_epoch,
                "snapshot_id": {"end_offset": body.snapshot_id.offset,
                                "epoch": body.snapshot_id.epoch},
                "position": body.position, "replica_directory_id": None,
            }]}],
        }
    if isinstance(body, M.UpdateVoterRequest):
        address = body.address
        return api.ApiKey.UPDATE_RAFT_VOTER, UPDATE_RAFT_VOTER_VERSION, {
            "cluster_id": cluster_id, "current_leader_epoch": body.current_leader_epoch,
            "voter_id": body.voter_id, "voter_directory_id": _uuid(body.voter_directory_id),
            "listeners": [{"name": address.listener, "host": address.host,
                           "port": address.port}],
            "k_raft_version_feature": {"min_supported_version": 0,
                                       "max_supported_version": 1}}
    raise TypeError(f"no wire form for {type(body).__name__}")


def _snapshot_id(obj: Any) -> OffsetAndEpoch | None:
    """A SnapshotId struct; None when absent or at its default (-1, -1)."""
    if obj is None or int(obj.end_offset) < 0 or int(obj.epoch) < 0:
        return None
    return OffsetAndEpoch(int(obj.end_offset), int(obj.epoch))


def response_from_wire(body: M.Request, response: Any) -> M.Response:
    """The core's response for the kio answer to `body`."""
    code = _code(getattr(response, "error_code", 0))
    if isinstance(body, M.FetchRequest):
        if code:
            return M.FetchResponse(code, M.NO_LEADER, M.NO_EPOCH)
        p = _partition(response)
        pcode = _code(p.error_code)
        leader = p.current_leader
        diverging = p.diverging_epoch
        records = None
        data = bytes(p.records) if p.records else b""
        snapshot_id = _snapshot_id(getattr(p, "snapshot_id", None))
        if pcode == M.NONE and (diverging is None or diverging.epoch < 0) and snapshot_id is None:
            headers = list(iter_batch_headers(data))
            end = headers[-1].position + headers[-1].size if headers else 0
            nxt = headers[-1].next_offset if headers else body.fetch_offset
            records = RecordsSlice(body.fetch_offset, nxt, data[:end], end)
        return M.FetchResponse(
            pcode, int(leader.leader_id), int(leader.leader_epoch),
            high_watermark=int(p.high_watermark), log_start_offset=int(p.log_start_offset),
            records=records,
            diverging_epoch=(OffsetAndEpoch(int(diverging.end_offset), int(diverging.epoch))
                             if diverging is not None and diverging.epoch >= 0 else None),
            snapshot_id=snapshot_id,
        )
    if isinstance(body, M.FetchSnapshotRequest):
        if code:
            return M.FetchSnapshotResponse(code, M.NO_LEADER, M.NO_EPOCH)
        p = _partition(response)
        leader = p.current_leader
        return M.FetchSnapshotResponse(
            _code(p.error_code), int(leader.leader_id), int(leader.leader_epoch),
            _snapshot_id(p.snapshot_id), int(p.size), int(p.position),
            bytes(p.unaligned_records) if p.unaligned_records else b"",
        )
    if isinstance(body, M.UpdateVoterRequest):
        leader = response.current_leader
        return M.UpdateVoterResponse(code, int(leader.leader_id), int(leader.leader_epoch))
    if code:
        if isinstance(body, M.VoteRequest):
            return M.VoteResponse(code, M.NO_LEADER, M.NO_EPOCH, False, body.pre_vote)
        if isinstance(body, M.BeginQuorumEpochRequest):
            return M.BeginQuorumEpochResponse(code, M.NO_LEADER, M.NO_EPOCH)
        return M.EndQuorumEpochResponse(code, M.NO_LEADER, M.NO_EPOCH)
    p = _partition(response)
    if isinstance(body, M.VoteRequest):
        return M.VoteResponse(_code(p.error_code), int(p.leader_id), int(p.leader_epoch),
                              bool(p.vote_granted), body.pre_vote)
    if isinstance(body, M.BeginQuorumEpochRequest):
        return M.BeginQuorumEpochResponse(_code(p.error_code), int(p.leader_id),
                                          int(p.leader_epoch))
    return M.EndQuorumEpochResponse(_code(p.error_code), int(p.leader_id), int(p.leader_epoch))


# -- requests in --------------------------------------------------------------------------


def request_from_wire(api_key: int, request: Any) -> tuple[int, M.Request]:
    """(source node id, the core's request) for a KRaft request received."""
    if api_key == api.ApiKey.VOTE:
        p = _partition(request)
        return int(p.replica_id), M.VoteRequest(
            int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch),
            int(p.last_offset), bool(getattr(p, "pre_vote", False)),
            int(getattr(request, "voter_id", -1)),
            _uuid_text(getattr(p, "voter_directory_id", None)),
            _uuid_text(getattr(p, "replica_directory_id", None)))
    if api_key == api.ApiKey.BEGIN_QUORUM_EPOCH:
        p = _partition(request)
        return int(p.leader_id), M.BeginQuorumEpochRequest(
            int(p.leader_id), int(p.leader_epoch), int(getattr(request, "voter_id", -1)),
            _uuid_text(getattr(p, "voter_directory_id", None)))
    if api_key == api.ApiKey.END_QUORUM_EPOCH:
        p = _partition(request)
        successors = tuple(int(c.candidate_id) for c in getattr(p, "preferred_candidates", ()))
        return int(p.leader_id), M.EndQuorumEpochRequest(
            int(p.leader_id), int(p.leader_epoch), successors)
    if api_key == api.ApiKey.FETCH:
        p = _partition(request)
        state = getattr(request, "replica_state", None)
        replica_id = int(state.replica_id) if state is not None else int(request.replica_id)
        return replica_id, M.FetchRequest(
            replica_id, int(p.current_leader_epoch), int(p.fetch_offset),
            int(p.last_fetched_epoch), ms(request.max_wait),
            _uuid_text(getattr(p, "replica_directory_id", None)))
    if api_key == api.ApiKey.FETCH_SNAPSHOT:
        p = _partition(request)
        return int(request.replica_id), M.FetchSnapshotRequest(
            int(request.replica_id), int(p.current_leader_epoch),
            OffsetAndEpoch(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            int(p.position))
    raise ValueError(f"not a KRaft request: api key {api_key}")


# -- responses out ---------------------------------------------------------------------


def _endpoints(leader: VoterAddress | None, rack: bool = False) -> list[dict[str, Any]]:
    if leader is None:
        return []
    entry: dict[str, Any] = {"node_id": leader.node_id, "host": leader.host, "port": leader.port}
    if rack:
        entry["rack"] = None
    return [entry]


def response_to_wire(body: M.Response, leader: VoterAddress | None = None) -> dict[str, Any]:
    """The response dict (entities.build / fetch_codec) for the core's answer;
    `leader`: the endpoint of the leader it names, sent as the response's
    NodeEndpoints (KIP-853: Fetch v17, Vote v2, BeginQuorumEpoch and
    EndQuorumEpoch v1, FetchSnapshot v1), so an observer that knows the
    leader only by id learns where it is."""
    if leader is not None and leader.node_id != body.leader_id:
        leader = None
    if isinstance(body, M.FetchResponse):
        records = body.records
        data = records.payload if records is not None else b""
        part: dict[str, Any] = {
            "partition_index": 0, "error_code": body.error_code,
            "high_watermark": body.high_watermark, "last_stable_offset": body.high_watermark,
            "log_start_offset": body.log_start_offset, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": data,
            "current_leader": {"leader_id": body.leader_id, "leader_epoch": body.leader_epoch},
        }
        if body.diverging_epoch is not None:
            part["diverging_epoch"] = {"epoch": body.diverging_epoch.epoch,
                                       "end_offset": body.diverging_epoch.offset}
        if body.snapshot_id is not None:
            part["snapshot_id"] = snapshot_id_to_wire(body.snapshot_id)
        return {"error_code": 0, "session_id": 0,
                "responses": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID,
                               "partitions": [part]}],
                "node_endpoints": _endpoints(leader, rack=True)}
    if isinstance(body, M.FetchSnapshotResponse):
        answer = fetch_snapshot_response(
            body.error_code, body.leader_id, body.leader_epoch, body.snapshot_id, body.size,
            body.position, body.unaligned_records)
        answer["node_endpoints"] = _endpoints(leader)
        return answer
    if isinstance(body, M.UpdateVoterResponse):
        raise TypeError("UpdateRaftVoter is answered by broker/handlers/quorum.py")
    fields: dict[str, Any] = {"partition_index": 0, "error_code": body.error_code,
                              "leader_id": body.leader_id, "leader_epoch": body.leader_epoch}
    if isinstance(body, M.VoteResponse):
        fields["vote_granted"] = body.vote_granted
    return {"error_code": 0, "topics": [{"topic_name": METADATA_TOPIC, "partitions": [fields]}],
            "node_endpoints": _endpoints(leader)}


def leader_endpoints(response: Any) -> dict[int, tuple[str, int]]:
    """The NodeEndpoints of a KRaft response: node id -> (host, port)."""
    return {int(e.node_id): (str(e.host), int(e.port))
            for e in getattr(response, "node_endpoints", None) or ()
            if str(e.host) and 0 < int(e.port) < 65536}


def snapshot_id_to_wire(snapshot_id: OffsetAndEpoch | None) -> dict[str, int]:
    if snapshot_id is None:
        return {"end_offset": -1, "epoch": -1}
    return {"end_offset": snapshot_id.offset, "epoch": snapshot_id.epoch}


def fetch_snapshot_response(
    error_code: int, leader_id: int, leader_epoch: int, snapshot_id: OffsetAndEpoch | None,
    size: int = 0, position: int = 0, chunk: bytes = b"",
) -> dict[str, Any]:
    """A FetchSnapshot response dict (one partition of ``__cluster_metadata``)."""
    part = {
        "index": 0, "error_code": error_code, "snapshot_id": snapshot_id_to_wire(snapshot_id),
        "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch},
        "size": size, "position": position, "unaligned_records": chunk,
    }
    return {"throttle_time": 0, "error_code": 0, "node_endpoints": [],
            "topics": [{"name": METADATA_TOPIC, "partitions": [part]}]}
