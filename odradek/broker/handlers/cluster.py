"""Cluster APIs: the controller's (BrokerRegistration, BrokerHeartbeat,
AlterPartition, AllocateProducerIds, AssignReplicasToDirs) and the Fetch dispatcher.

Fetch has three callers, told apart as Kafka tells them apart:

* a fetch of ``__cluster_metadata`` from another voter is Raft replication
  (`metadata/raft_quorum.py` answers it, as it answers Vote,
  BeginQuorumEpoch, EndQuorumEpoch and FetchSnapshot); from anyone else it
  is an observer (a broker) replicating the committed metadata log from the
  active controller (KRaft's pull replication), sent to the newest snapshot
  (`snapshot_id`, then FetchSnapshot) when it asks below the log start; a
  standby controller answers NOT_LEADER_OR_FOLLOWER with the quorum's leader;
* a fetch with a replica id >= 0 (``replica_id`` before v15,
  ``replica_state.replica_id`` from v15) is a follower: served by
  `replica_fetch.py`, up to the log end offset, with diverging epochs;
* anything else is a consumer: `fetch.py`, up to the high watermark.

``__cluster_metadata`` is served on the controller listeners only: on a client
listener it is an unknown topic, as on a Kafka broker, so no client can pose
as a voter and move the quorum's high watermark.
"""

from __future__ import annotations

import time
from typing import Any

from ...metadata import raft_wire
from ...metadata import records as R
from ...metadata.quorum import METADATA_TOPIC, METADATA_TOPIC_ID
from ...metadata.raft_quorum import NotControllerError, RaftMetadataQuorum
from ...protocol import api
from ...protocol import errors as E
from ...protocol.entities import ms
from ...raft.log import OffsetAndEpoch
from ...security.resources import CLUSTER_NAME, ResourceType
from ...security.resources import AclOperation as Op
from ...storage.log import kafka_uuid_string
from ..context import RequestContext
from ..controller_service import METADATA_KEY
from ..services import ClusterServices
from . import fetch as consumer_fetch
from . import replica_fetch

NOT_CONTROLLER = 41
INCONSISTENT_CLUSTER_ID = 104
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
METADATA_FETCH_MAX_WAIT_MS = 1000
NOT_LEADER_OR_FOLLOWER = 6
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
FETCH_SNAPSHOT_MAX_BYTES = 1024 * 1024  # one chunk to an observer


def replica_id_of(req: Any) -> int:
    state = getattr(req, "replica_state", None)
    if state is not None and getattr(state, "replica_id", -1) >= 0:
        return int(state.replica_id)
    return int(getattr(req, "replica_id", -1))


def _is_metadata_fetch(req: Any) -> bool:
    return len(req.topics) == 1 and (
        getattr(req.topics[0], "topic", None) == METADATA_TOPIC
        or getattr(req.topics[0], "topic_id", None) == METADATA_TOPIC_ID
    )


def _raft_quorum(broker: ClusterServices) -> RaftMetadataQuorum | None:
    quorum = broker.quorum
    return quorum if isinstance(quorum, RaftMetadataQuorum) else None


def _to_raft_core(raft: RaftMetadataQuorum, replica_id: int, req: Any) -> bool:
    """A voter's metadata Fetch/FetchSnapshot goes to the Raft core; so does,
    in a KIP-853 quorum, a controller's that is not a voter (yet): the core
    sends its epoch (>= 0), a broker's lifecycle sends -1 and is served from
    the log as an observer of the active controller."""
    if replica_id in raft.voters:
        return True
    if not raft.dynamic or replica_id < 0:
        return False
    try:
        return int(req.topics[0].partitions[0].current_leader_epoch) >= 0
    except (AttributeError, IndexError):
        return False


def _is_active_controller(broker: ClusterServices) -> bool:
    service = broker.controller_service
    return service is not None and service.active


async def handle_fetch(broker: ClusterServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if (_is_metadata_fetch(req) or replica_id_of(req) >= 0) and not ctx.authorize(
            Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        # replication (metadata or partitions) is the brokers' own: CLUSTER_ACTION
        return _fetch_denied(ctx, req)
    if _is_metadata_fetch(req) and not ctx.controller_listener:
        return _fetch_unknown_topic(ctx, req)
    if _is_metadata_fetch(req):
        raft = _raft_quorum(broker)
        if raft is not None and _to_raft_core(raft, replica_id_of(req), req):
            return await raft.handle_request(api.ApiKey.FETCH, req)
        return await _metadata_fetch(broker, ctx, req)
    if replica_id_of(req) >= 0:
        return await replica_fetch.handle_follower_fetch(broker, ctx, req, replica_id_of(req))
    return await consumer_fetch.handle_fetch(broker, ctx, req)


def _fetch_denied(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Kafka answers an unauthorized follower TOPIC_AUTHORIZATION_FAILED per
    partition (and a controller CLUSTER_AUTHORIZATION_FAILED for the request)."""
    return _fetch_error(ctx, req, E.TOPIC_AUTHORIZATION_FAILED)


def _fetch_unknown_topic(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return _fetch_error(ctx, req, E.UNKNOWN_TOPIC_ID if ctx.api_version >= 13
                        else E.UNKNOWN_TOPIC_OR_PARTITION)


def _fetch_error(ctx: RequestContext, req: Any, error: int) -> dict[str, Any]:
    """`error` for every partition asked for."""
    use_ids = ctx.api_version >= 13
    key_field = "topic_id" if use_ids else "topic"
    return {"error_code": 0, "session_id": 0, "responses": [
        {key_field: t.topic_id if use_ids else t.topic, "partitions": [
            {"partition_index": p.partition, "error_code": error,
             "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
             "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
            for p in t.partitions]}
        for t in req.topics]}


async def _metadata_fetch(broker: ClusterServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topic = req.topics[0]
    key_field = "topic_id" if ctx.api_version >= 13 else "topic"
    key = METADATA_TOPIC_ID if ctx.api_version >= 13 else METADATA_TOPIC
    service = broker.controller_service
    answers = []
    for p in topic.partitions:
        answer: dict[str, Any] = {
            "partition_index": p.partition, "error_code": 0, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": 0, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b"",
        }
        raft = _raft_quorum(broker)
        if service is None or not service.active or p.partition != 0:
            answer["error_code"] = 6  # NOT_LEADER_OR_FOLLOWER: not the active controller
            if raft is not None:
                answer["current_leader"] = {"leader_id": raft.leader_id,
                                            "leader_epoch": raft.epoch}
            answers.append(answer)
            continue
        quorum = broker.quorum
        offset = p.fetch_offset
        if raft is not None:
            raft.observer_fetched(replica_id_of(req), offset)  # DescribeQuorum's observers
        if offset > quorum.log_end_offset:
            answer["error_code"] = 1  # OFFSET_OUT_OF_RANGE
            answers.append(answer)
            continue
        snapshot_id = quorum.latest_snapshot_id()
        if offset < quorum.log_start_offset and snapshot_id is not None:
            # KIP-630: the log below here is gone; fetch the snapshot instead
            answer.update(high_watermark=quorum.high_watermark,
                          last_stable_offset=quorum.high_watermark,
                          log_start_offset=quorum.log_start_offset,
                          snapshot_id=raft_wire.snapshot_id_to_wire(snapshot_id))
            answers.append(answer)
            continue
        max_wait_s = min(ms(req.max_wait), METADATA_FETCH_MAX_WAIT_MS) / 1000
        deadline = time.monotonic() + max_wait_s
        data = quorum.read(offset, p.partition_max_bytes)
        while not data and service.active:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if not await service.metadata_waiters.wait_for_any([METADATA_KEY], remaining):
                break
            data = quorum.read(offset, p.partition_max_bytes)
        end = quorum.high_watermark
        answer.update(high_watermark=end, last_stable_offset=end, records=data,
                      log_start_offset=quorum.log_start_offset)
        answers.append(answer)
    return {"error_code": 0, "session_id": 0,
            "responses": [{key_field: key, "partitions": answers}]}


# -- controller APIs ------------------------------------------------------------------------


async def handle_broker_registration(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "broker_epoch": -1}
    if req.cluster_id != broker.cluster_id:
        return {"error_code": INCONSISTENT_CLUSTER_ID, "broker_epoch": -1}
    endpoints = [
        {"listener": lst.name, "host": lst.host, "port": int(lst.port),
         "security_protocol": SECURITY_PROTOCOLS.get(int(lst.security_protocol), "PLAINTEXT")}
        for lst in req.listeners
    ]
    # KIP-858 (v2+): the directory ids the broker has online
    log_dirs = [kafka_uuid_string(d) for d in getattr(req, "log_dirs", ()) if d is not None]
    # v3+ (KIP-966): the epoch the broker's clean-shutdown marker recorded, -1
    # after an unclean shutdown (metadata/elr.py)
    previous = getattr(req, "previous_broker_epoch", None)
    code, epoch = await service.register(
        int(req.broker_id), str(req.incarnation_id), endpoints, req.rack, log_dirs or None,
        None if previous is None else int(previous),
    )
    return {"error_code": code, "broker_epoch": epoch}


async def handle_broker_heartbeat(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "is_caught_up": False, "is_fenced": True,
                "should_shut_down": False}
    # KIP-858 (v1+): the broker's log dirs that failed while it ran
    offline = tuple(kafka_uuid_string(d) for d in getattr(req, "offline_log_dirs", None) or ())
    a = await service.heartbeat(
        int(req.broker_id), int(req.broker_epoch), int(req.current_metadata_offset),
        bool(req.want_fence), bool(req.want_shut_down), offline,
    )
    return {"error_code": a.error_code, "is_caught_up": a.is_caught_up,
            "is_fenced": a.is_fenced, "should_shut_down": a.should_shut_down}


async def handle_alter_partition(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "topics": []}
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if ctx.api_version >= 3:
                new_isr = [int(b.broker_id) for b in p.new_isr_with_epochs]
            else:
                new_isr = [int(b) for b in p.new_isr]
            a = await service.alter_partition(
                int(req.broker_id), str(t.topic_id), int(p.partition_index),
                int(p.leader_epoch), int(p.partition_epoch), new_isr,
            )
            parts.append({
                "partition_index": p.partition_index, "error_code": a.error_code,
                "leader_id": a.leader_id, "leader_epoch": a.leader_epoch, "isr": list(a.isr),
                "leader_recovery_state": 0, "partition_epoch": a.partition_epoch,
            })
        topics.append({"topic_id": t.topic_id, "partitions": parts})
    return {"error_code": 0, "topics": topics}


async def handle_allocate_producer_ids(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "producer_id_start": -1, "producer_id_len": 0}
    start, length = await service.allocate_producer_ids(int(req.broker_id),
                                                        R.PRODUCER_ID_BLOCK_SIZE)
    return {"error_code": 0, "producer_id_start": start, "producer_id_len": length}


async def handle_assign_replicas_to_dirs(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """A broker placed replicas in log dirs (KIP-858): the controller records it."""
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "directories": []}
    assignments = [
        (str(t.topic_id), int(p.partition_index), kafka_uuid_string(d.id_))
        for d in req.directories if d.id_ is not None for t in d.topics for p in t.partitions
    ]
    code, results = await service.assign_replicas_to_dirs(
        int(req.broker_id), int(req.broker_epoch), assignments
    )
    if code:
        return {"error_code": code, "directories": []}
    return {"error_code": 0, "directories": [
        {"id_": d.id_, "topics": [
            {"topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": results.get((str(t.topic_id), int(p.partition_index)), 42)}
                for p in t.partitions]}
            for t in d.topics]}
        for d in req.directories]}


async def handle_unregister_broker(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """UnregisterBroker (KIP-631), decided by the controller (brokers relay it)."""
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "error_message": None}
    broker_id = int(req.broker_id)
    code = await service.unregister_broker(broker_id)
    return {"error_code": code, "error_message": (
        f"Broker ID {broker_id} is not currently registered" if code else None)}


async def handle_elect_leaders(
    broker: ClusterServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """ElectLeaders (KIP-460), decided by the controller (brokers relay it)."""
    election_type = int(getattr(req, "election_type", 0))
    named = None
    if req.topic_partitions is not None:
        named = [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]
    service = broker.controller_service
    if service is None or not service.active:
        return {"error_code": NOT_CONTROLLER, "replica_election_results": []}
    results = await service.elect_leaders(election_type, named)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": index, "error_code": code, "error_message": message})
    return {"error_code": 0, "replica_election_results": [
        {"topic": t, "partition_result": parts} for t, parts in by_topic.items()]}


async def handle_fetch_snapshot(broker: ClusterServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """FetchSnapshot (KIP-630): a voter's goes to the Raft core; an observer's
    (a broker whose metadata fetch fell below the log start) is served by the
    active controller, a chunk of the snapshot file from the asked position."""
    raft = _raft_quorum(broker)
    if raft is not None and _to_raft_core(raft, int(req.replica_id), req):
        return await raft.handle_request(api.ApiKey.FETCH_SNAPSHOT, req)
    p = req.topics[0].partitions[0] if req.topics and req.topics[0].partitions else None
    leader = (raft.leader_id, raft.epoch) if raft is not None else (broker.node_id, 0)
    if p is None or not _is_active_controller(broker):
        return raft_wire.fetch_snapshot_response(NOT_LEADER_OR_FOLLOWER, *leader, None)
    snapshot_id = OffsetAndEpoch(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
    data = broker.quorum.read_snapshot(snapshot_id)
    if data is None:
        return raft_wire.fetch_snapshot_response(SNAPSHOT_NOT_FOUND, *leader, snapshot_id)
    position = int(p.position)
    if not 0 <= position <= len(data):
        return raft_wire.fetch_snapshot_response(POSITION_OUT_OF_RANGE, *leader, snapshot_id)
    chunk = data[position : position + max(1, min(int(req.max_bytes), FETCH_SNAPSHOT_MAX_BYTES))]
    return raft_wire.fetch_snapshot_response(
        0, *leader, snapshot_id, len(data), position, chunk)


async def handle_raft_request(broker: ClusterServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Vote, BeginQuorumEpoch, EndQuorumEpoch from another voter: the Raft core answers."""
    raft = _raft_quorum(broker)
    if raft is None:
        raise NotControllerError(-1)  # not a voter of a Raft quorum: close the connection
    return await raft.handle_request(ctx.api_key, req)
