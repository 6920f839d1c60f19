"""Share-group offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets.

Sent to the group's coordinator, as in Kafka. The state they read and change is
the share partitions' (their start offsets, SPSO), which the share-partition
leaders keep with the share coordinator (`__share_group_state`). Alter and
Delete change it through the partition leader's path, so they answer for the
partitions this node leads, and a partition led by another broker answers
NOT_LEADER_OR_FOLLOWER (docs/share_groups.md; on one broker, or when the
group coordinator leads the partitions, that never happens).

Describe gives each partition's start offset and lag (records from the start
offset to the high watermark not yet acknowledged or archived), or -1 where the
group never read it; for a partition led by another broker, the start offset
and leader epoch from the share coordinator's ReadShareGroupStateSummary, lag -1. Alter and Delete need the group empty (NON_EMPTY_GROUP):
Alter starts each named partition again at the offset given, Delete forgets
the group's state of each named topic.
"""

from __future__ import annotations

import functools
from typing import Any

from ...coordinator import errors as CE
from ...coordinator.share_partition import ACKNOWLEDGED, ARCHIVED, SharePartition
from ...protocol import errors as E
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ..context import RequestContext
from ..services import ShareServices
from . import authz
from .groups import _ready

NOT_LEADER = "The share state of this partition is kept by its leader, another broker."


def _group_error(service: Any, ctx: RequestContext, group: str, op: Op) -> int:
    if not ctx.authorize(op, ResourceType.GROUP, group):
        return E.GROUP_AUTHORIZATION_FAILED
    code = service.core.check(group)
    if code != CE.NONE:
        return int(code)
    if group in service.core.groups:
        return CE.GROUP_ID_NOT_FOUND  # a classic or consumer group of that name
    return E.NONE


def _lag(sp: SharePartition, high_watermark: int) -> int:
    done = sum(1 for r in sp.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
    return max(0, high_watermark - sp.start_offset - done)


def _led(broker: ShareServices, name: str, index: int) -> Any:
    part = broker.replica_manager.partitions.get((name, index))
    return part if part is not None and part.leader == broker.node_id else None


async def _summary(broker: ShareServices, key: tuple[str, Any, int]) -> dict[str, Any]:
    persister = broker.share.persister
    if persister is None:
        return {"error_code": E.NOT_LEADER_OR_FOLLOWER, "error_message": NOT_LEADER}
    code, state = await persister.summary(key)
    if code != E.NONE:
        return {"error_code": code, "error_message": None}
    if state is None:
        return {}
    return {"start_offset": state.start_offset, "leader_epoch": state.leader_epoch}


async def handle_describe_share_group_offsets(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = await _ready(broker)
    image = broker.image
    groups = []
    for g in req.groups:
        code = _group_error(service, ctx, g.group_id, Op.DESCRIBE)
        if code != E.NONE:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": code,
                           "error_message": None})
            continue
        wanted: dict[str, list[int]] = {}
        if g.topics is None:  # every topic the group has state for
            keys = set(broker.share.partitions.keys_of(g.group_id))
            if broker.share.coordinator is not None:  # the state this node coordinates
                keys.update(broker.share.coordinator.core.keys_of(g.group_id))
            for _, topic_id, index in sorted(keys, key=lambda k: (str(k[1]), k[2])):
                topic = image.topics_by_id.get(topic_id)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(index)
        else:
            for t in g.topics:
                wanted.setdefault(t.topic_name, []).extend(t.partitions)
        visible = authz.topics_allowed(ctx, Op.DESCRIBE, list(wanted))
        topics = []
        for name, indexes in wanted.items():
            topic = image.topics_by_name.get(name)
            if topic is None or name not in visible:
                continue  # Kafka leaves out unknown and unauthorized topics
            parts = []
            for index in sorted(set(indexes)):
                entry: dict[str, Any] = {"partition_index": index, "start_offset": -1, "leader_epoch": -1,
                         "lag": -1, "error_code": E.NONE, "error_message": None}
                part = _led(broker, name, index)
                if index not in topic.partitions:
                    entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
                elif part is None:
                    # led elsewhere: the share coordinator's summary (no lag: the
                    # high watermark is the leader's)
                    entry.update(await _summary(broker, (g.group_id, topic.topic_id, index)))
                else:
                    sp = await broker.share.partitions.read_stored(
                        (g.group_id, topic.topic_id, index), part.leader_epoch)
                    if sp is not None:
                        entry.update(start_offset=sp.start_offset,
                                     leader_epoch=part.leader_epoch,
                                     lag=_lag(sp, part.log.high_watermark))
                parts.append(entry)
            topics.append({"topic_name": name, "topic_id": topic.topic_id, "partitions": parts})
        groups.append({"group_id": g.group_id, "topics": topics, "error_code": E.NONE,
                       "error_message": None})
    return {"groups": groups}


async def _changeable(broker: ShareServices, ctx: RequestContext, req: Any,
                      op: Op) -> tuple[int, set[str]]:
    """Alter and Delete: the group's error (authorization, coordinator, a member
    still in it: NON_EMPTY_GROUP), and the request's topics the principal may READ."""
    service = await _ready(broker)
    code = _group_error(service, ctx, req.group_id, op)
    share_group = service.share_groups.groups.get(req.group_id)
    if code == E.NONE and share_group is not None and share_group.members:
        code = CE.NON_EMPTY_GROUP
    return code, authz.topics_allowed(ctx, Op.READ, [t.topic_name for t in req.topics])


async def handle_alter_share_group_offsets(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    code, readable = await _changeable(broker, ctx, req, Op.READ)
    if code != E.NONE:
        return {"error_code": code, "error_message": None, "responses": []}
    image = broker.image
    responses = []
    for t in req.topics:
        topic = image.topics_by_name.get(t.topic_name)
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index, "error_code": E.NONE,
                     "error_message": None}
            part = _led(broker, t.topic_name, p.partition_index)
            if t.topic_name not in readable:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif part is None:
                entry.update(error_code=E.NOT_LEADER_OR_FOLLOWER, error_message=NOT_LEADER)
            elif p.start_offset < -1:
                entry.update(error_code=CE.INVALID_REQUEST,
                             error_message=f"Invalid start offset {p.start_offset}.")
            else:
                key = (req.group_id, topic.topic_id, p.partition_index)
                log = part.log
                start = p.start_offset
                if start == -1 or start > log.high_watermark:  # -1: latest, as Kafka
                    start = log.high_watermark
                start = max(start, log.log_start_offset)
                got, sp = await broker.share.partitions.get(
                    key, functools.partial(int, start), part.leader_epoch)
                if sp is None:
                    entry["error_code"] = got if got != E.NONE else E.UNKNOWN_SERVER_ERROR
                else:
                    sp.reset(start)
                    entry["error_code"] = await broker.share.partitions.persist(key, sp)
            parts.append(entry)
        responses.append({"topic_name": t.topic_name,
                          "topic_id": topic.topic_id if topic else None, "partitions": parts})
    return {"error_code": E.NONE, "error_message": None, "responses": responses}


async def handle_delete_share_group_offsets(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    code, readable = await _changeable(broker, ctx, req, Op.DELETE)
    if code != E.NONE:
        return {"error_code": code, "error_message": None, "responses": []}
    image = broker.image
    responses = []
    for t in req.topics:
        topic = image.topics_by_name.get(t.topic_name)
        entry: dict[str, Any] = {
            "topic_name": t.topic_name, "topic_id": topic.topic_id if topic else None,
                 "error_code": E.NONE, "error_message": None}
        if t.topic_name not in readable:
            entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            for index in topic.partitions:
                if _led(broker, t.topic_name, index) is None:
                    entry.update(error_code=E.NOT_LEADER_OR_FOLLOWER, error_message=NOT_LEADER)
                    continue
                code = await broker.share.partitions.forget(
                    (req.group_id, topic.topic_id, index))
                if code != E.NONE:
                    entry["error_code"] = code
        responses.append(entry)
    return {"error_code": E.NONE, "error_message": None, "responses": responses}
