"""Metadata, DescribeCluster, DescribeTopicPartitions: what the cluster looks like."""

from __future__ import annotations

import uuid
from typing import Any

from ...metadata import directories as D
from ...metadata.controller import NewTopic, validate_topic_name
from ...metadata.image import MetadataImage, PartitionImage, TopicImage
from ...metadata.raft_quorum import RaftMetadataQuorum
from ...protocol import errors as E
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ..context import RequestContext
from ..services import MetadataServices
from . import authz
from .admin import create_topics

ZERO_UUID = uuid.UUID(int=0)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def brokers_for(image: MetadataImage, listener: str,
                include_fenced: bool = False) -> list[dict[str, Any]]:
    """The registered brokers' endpoints on `listener`: the unfenced ones, and
    the fenced ones too (`is_fenced`) when asked (DescribeCluster v2, KIP-1073)."""
    out = []
    for node_id, b in sorted(image.brokers.items()):
        if b.fenced and not include_fenced:
            continue
        ep = next((e for e in b.endpoints if e.listener == listener), None) or (
            b.endpoints[0] if b.endpoints else None
        )
        if ep is None:
            continue
        out.append(
            {"node_id": node_id, "broker_id": node_id, "host": ep.host, "port": ep.port,
             "rack": b.rack, "is_fenced": bool(b.fenced)}
        )
    return out


# The partition entries of one metadata image, by topic: a Metadata request for
# every topic rebuilt ~15 us of dicts per partition each time (bench/growth.py:
# 530 ms for 6,000 partitions under load). Images are immutable, so the entries
# stay right until the image changes; the lists and dicts are shared, never
# changed by a caller (DescribeTopicPartitions slices into a new list).
_entries_image: list[Any] = [None]
_entries_by_topic: dict[str, tuple[TopicImage, list[dict[str, Any]]]] = {}


def partition_entries(
    topic: TopicImage, image: MetadataImage | None = None
) -> list[dict[str, Any]]:
    if image is None:
        return _partition_entries(topic, None)
    if _entries_image[0] is not image:
        _entries_by_topic.clear()
        _entries_image[0] = image
    cached = _entries_by_topic.get(topic.name)
    if cached is not None and cached[0] is topic:
        return cached[1]
    entries = _partition_entries(topic, image)
    _entries_by_topic[topic.name] = (topic, entries)
    return entries


def _partition_entries(
    topic: TopicImage, image: MetadataImage | None
) -> list[dict[str, Any]]:
    def offline(p: PartitionImage) -> list[int]:
        # replicas on fenced or unknown brokers (Kafka: on brokers not alive) or
        # in a log dir their broker does not have online (KIP-858)
        if image is None:
            return []
        return [
            r for r in p.replicas
            if r not in image.brokers or image.brokers[r].fenced
            or not D.replica_dir_online(image, p, r)
        ]

    return [
        {
            # a partition without a leader (no live ISR member) answers as Kafka does
            "error_code": E.LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
            "partition_index": p.partition,
            "leader_id": p.leader,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "offline_replicas": offline(p),
            # KIP-966 (metadata/elr.py); the Java admin client reads these
            # lists without a null check, so never null
            "eligible_leader_replicas": list(p.elr),
            "last_known_elr": list(p.last_known_elr),
        }
        for _, p in sorted(topic.partitions.items())
    ]


def topic_entry(topic: TopicImage, image: MetadataImage | None = None) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partition_entries(topic, image),
        "topic_authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED,
    }


# Metadata v12 (KIP-516) is the first to look topics up by id and name them nullable.
TOPIC_IDS_VERSION = 12


def error_topic(name: str | None, code: int, topic_id: uuid.UUID = ZERO_UUID) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED,
    }


async def handle_metadata(broker: MetadataServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = broker.image
    version = ctx.api_version
    requested = req.topics
    if version == 0 and requested is not None and len(requested) == 0:
        requested = None  # v0: an empty list means all topics
    allow_auto_create = getattr(req, "allow_auto_topic_creation", True)
    topics: list[dict[str, Any]] = []
    if requested is None:
        # Kafka hides the topics the principal may not DESCRIBE
        visible = authz.topics_allowed(ctx, Op.DESCRIBE, image.topics_by_name)
        topics = [topic_entry(t, image) for n, t in sorted(image.topics_by_name.items())
                  if n in visible]
    elif version < TOPIC_IDS_VERSION and any(
        t.name is None or getattr(t, "topic_id", None) not in (None, ZERO_UUID)
        for t in requested
    ):
        # Kafka: topic ids need v12, and v10-11 responses cannot carry a null name;
        # the whole request is INVALID_REQUEST, a null name answered as "".
        topics = [error_topic(t.name or "", E.INVALID_REQUEST,
                              getattr(t, "topic_id", ZERO_UUID) or ZERO_UUID) for t in requested]
    else:
        by_id = [image.topics_by_id[t.topic_id] for t in requested
                 if getattr(t, "name", None) is None
                 and getattr(t, "topic_id", None) in image.topics_by_id]
        described = authz.topics_allowed(
            ctx, Op.DESCRIBE, [t.name for t in requested if getattr(t, "name", None) is not None]
            + [t.name for t in by_id])
        to_create: list[str] = []
        may_create: bool | None = None
        for t in requested:
            name = getattr(t, "name", None)
            topic_id = getattr(t, "topic_id", None)
            if name is None and topic_id is not None and topic_id != ZERO_UUID:
                found = image.topics_by_id.get(topic_id)
                if found is not None and found.name not in described:
                    # unknown and unauthorized look alike, as in Kafka
                    topics.append(error_topic(None, E.TOPIC_AUTHORIZATION_FAILED, topic_id))
                    continue
                topics.append(
                    topic_entry(found, image) if found
                    else error_topic(None, E.UNKNOWN_TOPIC_ID, topic_id)
                )
                continue
            if name is None:
                topics.append(error_topic(None, E.INVALID_REQUEST))
                continue
            if name not in described:
                topics.append(error_topic(name, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            found = image.topics_by_name.get(name)
            if found is not None:
                topics.append(topic_entry(found, image))
            elif validate_topic_name(name) is not None:
                topics.append(error_topic(name, E.INVALID_TOPIC_EXCEPTION))
            elif allow_auto_create and broker.config.get("auto.create.topics.enable"):
                # auto-creation needs CREATE on the cluster, else on the topic
                if may_create is None:
                    may_create = authz.cluster_allows(ctx, Op.CREATE)
                if not may_create and not ctx.authorize(Op.CREATE, ResourceType.TOPIC, name):
                    topics.append(error_topic(name, E.TOPIC_AUTHORIZATION_FAILED))
                    continue
                to_create.append(name)
                topics.append({"name": name})  # filled in below
            else:
                topics.append(error_topic(name, E.UNKNOWN_TOPIC_OR_PARTITION))
        if to_create:
            # this broker's own num.partitions and default.replication.factor, sent
            # explicitly as Kafka's AutoTopicCreationManager does (a -1 would take
            # the active controller's values)
            partitions = broker.config.get("num.partitions")
            rf = broker.config.get("default.replication.factor")
            results = await create_topics(
                broker, [NewTopic(n, partitions, rf, {}, {}) for n in to_create],
                validate_only=False)
            image = broker.image
            for i, entry in enumerate(topics):
                if len(entry) == 1 and "name" in entry:
                    name = entry["name"]
                    res = results[name]
                    found = image.topics_by_name.get(name)
                    if res.error_code in (0, 36) and found is not None:
                        topics[i] = topic_entry(found, image)
                    else:
                        topics[i] = error_topic(name, res.error_code or E.LEADER_NOT_AVAILABLE)
    if getattr(req, "include_topic_authorized_operations", False):
        for entry in topics:
            if entry["error_code"] == 0:
                entry["topic_authorized_operations"] = authz.operations(
                    ctx, ResourceType.TOPIC, entry["name"], True)
    return {
        "brokers": brokers_for(image, ctx.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "topics": topics,
        "cluster_authorized_operations": _metadata_cluster_operations(ctx, req),
        "error_code": 0,
    }


def _metadata_cluster_operations(ctx: RequestContext, req: Any) -> int:
    """Metadata v8-v10 (KIP-430; DescribeCluster took it over in v11): the
    cluster's authorized operations when asked, 0 without DESCRIBE on the
    cluster (Kafka's KafkaApis), INT32_MIN when not asked."""
    if not getattr(req, "include_cluster_authorized_operations", False):
        return E.AUTHORIZED_OPERATIONS_OMITTED
    if not authz.cluster_allows(ctx, Op.DESCRIBE):
        return 0
    return authz.operations(ctx, ResourceType.CLUSTER, "kafka-cluster", True)


BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS = 1, 2  # DescribeCluster v1 endpoint_type
_ENDPOINT_NAMES = {BROKER_ENDPOINTS: "BROKER", CONTROLLER_ENDPOINTS: "CONTROLLER"}
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115


async def handle_describe_cluster(
    broker: MetadataServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """KIP-919, as Kafka: a broker listener describes the brokers (endpoint
    type 1); a controller listener (`--bootstrap-controller` clients) the
    controllers, here the voters with their endpoints, and the active
    controller, and it needs ALTER on the cluster there. The other type is
    MISMATCHED_ENDPOINT_TYPE, an unknown one UNSUPPORTED_ENDPOINT_TYPE (both
    INVALID_REQUEST in v0)."""
    endpoint_type = getattr(req, "endpoint_type", BROKER_ENDPOINTS)
    quorum = broker.quorum
    on_controller = (isinstance(quorum, RaftMetadataQuorum) and ctx.controller_listener
                     and bool(ctx.listener))
    expected = CONTROLLER_ENDPOINTS if on_controller else BROKER_ENDPOINTS

    def refused(code: int, message: str) -> dict[str, Any]:
        return {"error_code": E.INVALID_REQUEST if ctx.api_version == 0 else code,
                "error_message": message, "endpoint_type": endpoint_type,
                "cluster_id": broker.cluster_id, "controller_id": -1, "brokers": [],
                "cluster_authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED}

    if endpoint_type not in (BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS):
        return refused(UNSUPPORTED_ENDPOINT_TYPE, f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != expected:
        return refused(MISMATCHED_ENDPOINT_TYPE, (
            f"The request was sent to an endpoint of type {_ENDPOINT_NAMES[expected]}, "
            f"but we wanted an endpoint of type {_ENDPOINT_NAMES[endpoint_type]}"))
    if on_controller and isinstance(quorum, RaftMetadataQuorum):
        if not ctx.authorize(Op.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
            return refused(E.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed")
        return {
            "error_code": 0, "error_message": None, "endpoint_type": CONTROLLER_ENDPOINTS,
            "cluster_id": broker.cluster_id, "controller_id": quorum.leader_id,
            "brokers": [{"broker_id": node, "host": a.host, "port": a.port, "rack": None,
                         "is_fenced": False}
                        for node, a in sorted(quorum.voters.addresses.items()) if a.port > 0],
            "cluster_authorized_operations": authz.operations(
                ctx, ResourceType.CLUSTER, "kafka-cluster",
                bool(getattr(req, "include_cluster_authorized_operations", False))),
        }
    return {
        "error_code": 0,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.node_id,
        "brokers": brokers_for(broker.image, ctx.listener,
                               bool(getattr(req, "include_fenced_brokers", False))),
        "cluster_authorized_operations": authz.operations(
            ctx, ResourceType.CLUSTER, "kafka-cluster",
            bool(getattr(req, "include_cluster_authorized_operations", False))),
    }


async def handle_describe_topic_partitions(
    broker: MetadataServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    image = broker.image
    limit = max(1, min(req.response_partition_limit, 2000))
    if req.topics:
        names = sorted({t.name for t in req.topics})
        described = authz.topics_allowed(ctx, Op.DESCRIBE, names)
    else:  # every topic the principal may describe; the others are hidden
        described = authz.topics_allowed(ctx, Op.DESCRIBE, image.topics_by_name)
        names = sorted(described)
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    out: list[dict[str, Any]] = []
    budget = limit
    next_cursor = None
    for name in names:
        topic = image.topics_by_name.get(name)
        if name not in described:
            out.append(error_topic(name, E.TOPIC_AUTHORIZATION_FAILED))
            continue
        if topic is None:
            out.append(error_topic(name, E.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        entry = topic_entry(topic, image)
        entry["topic_authorized_operations"] = authz.operations(
            ctx, ResourceType.TOPIC, name,
            getattr(req, "include_topic_authorized_operations", True))
        parts = entry["partitions"]
        if cursor is not None and name == cursor.topic_name:
            parts = [p for p in parts if p["partition_index"] >= cursor.partition_index]
        if budget <= 0:
            next_cursor = {"topic_name": name, "partition_index": parts[0]["partition_index"] if parts else 0}
            break
        if len(parts) > budget:
            next_cursor = {"topic_name": name, "partition_index": parts[budget]["partition_index"]}
            parts = parts[:budget]
        entry["partitions"] = parts
        out.append(entry)
        budget -= len(parts)
        if next_cursor is not None:
            break
    return {"topics": out, "next_cursor": next_cursor}
