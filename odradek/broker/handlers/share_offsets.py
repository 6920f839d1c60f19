"""Share-group offsets (KIP-932): DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets.

Sent to the group's coordinator, as in Kafka. The state they read and change is
the share partitions' (their start offsets, SPSO), kept by the share
coordinator (`__share_group_state`); the group coordinator reaches it through
the persister for every partition, whichever broker leads it, as Kafka's
GroupCoordinatorService does:

- Describe: the share partition held in memory here when this broker leads it
  (exact), else ReadShareGroupStateSummary: start offset, leader epoch and the
  records acknowledged or archived above the start; the lag (v1) is the
  partition's high watermark (ListOffsets to its leader when that is another
  broker) less the start offset less those records (KIP-1226's lag). -1 where
  the group has no state.
- Alter (the group must be empty: NON_EMPTY_GROUP): InitializeShareGroupState
  with the offset given (-1: not initialized, the leader applies
  `share.auto.offset.reset` on its next fetch) and a state epoch above the
  stored one and at least the group epoch (Kafka sends the group epoch). A
  leader still holding the old state drops it when its last share session of
  the group ends (which an empty group implies), or when its next write is
  FENCED_STATE_EPOCH (coordinator/share_partitions.py).
- Delete (the group must be empty): DeleteShareGroupState for each partition of
  each named topic; a topic the group has no state for is
  UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...coordinator import errors as CE
from ...coordinator.share_partition import ACKNOWLEDGED, ARCHIVED, SharePartition
from ...protocol import api
from ...protocol import errors as E
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ..context import RequestContext
from ..services import ShareServices
from . import authz
from .groups import _ready

NO_PERSISTER = "This broker has no share-state persister."
NO_OFFSETS = "There is no offset information to delete."
LATEST = -1
LIST_OFFSETS_TIMEOUT_S = 10.0


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


async def _remote_high_watermarks(broker: ShareServices, node: int,
                                  wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The high watermarks of partitions led by `node` (ListOffsets, latest,
    read_uncommitted); the partitions it did not answer are left out."""
    persister = broker.share.persister
    if persister is None:
        return {}
    topics: dict[str, list[int]] = {}
    for name, index in wanted:
        topics.setdefault(name, []).append(index)
    resp = await persister.peers.request(node, api.ApiKey.LIST_OFFSETS, 4, {
        "replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": i, "current_leader_epoch": -1,
                                           "timestamp": LATEST} for i in indexes]}
            for name, indexes in topics.items()]}, LIST_OFFSETS_TIMEOUT_S, "ListOffsets")
    out: dict[tuple[str, int], int] = {}
    for t in resp.topics if resp is not None else ():
        for p in t.partitions:
            if p.error_code.value == E.NONE and p.offset >= 0:
                out[(t.name, p.partition_index)] = p.offset
    return out


async def _high_watermarks(broker: ShareServices,
                           wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each partition's high watermark, from its leader wherever it is."""
    out: dict[tuple[str, int], int] = {}
    remote: dict[int, list[tuple[str, int]]] = {}
    for name, index in wanted:
        part = _led(broker, name, index)
        if part is not None:
            out[(name, index)] = part.log.high_watermark
            continue
        topic = broker.image.topics_by_name.get(name)
        info = topic.partitions.get(index) if topic is not None else None
        if info is not None and info.leader >= 0:
            remote.setdefault(info.leader, []).append((name, index))
    for answer in await asyncio.gather(*(_remote_high_watermarks(broker, node, tps)
                                         for node, tps in remote.items())):
        out.update(answer)
    return out


async def _describe_partition(broker: ShareServices, group: str, topic: Any, index: int,
                              entry: dict[str, Any]) -> int | None:
    """Fill `entry` (start offset, leader epoch, lag if known here); the records
    delivered for good above the start when the lag needs the leader's high
    watermark, else None."""
    key = (group, topic.topic_id, index)
    part = _led(broker, topic.name, index)
    sp = broker.share.partitions.peek(key) if part is not None else None
    if sp is not None:  # served here: the live state, which every write reaches
        entry.update(start_offset=sp.start_offset, leader_epoch=part.leader_epoch,
                     lag=_lag(sp, part.log.high_watermark))
        return None
    persister = broker.share.persister
    if persister is None:
        entry.update(error_code=CE.COORDINATOR_NOT_AVAILABLE, error_message=NO_PERSISTER)
        return None
    code, summary = await persister.summary(key)
    if code != E.NONE:
        entry["error_code"] = code
        return None
    if summary is None:
        return None
    entry.update(start_offset=summary.start_offset, leader_epoch=summary.leader_epoch)
    if summary.start_offset < 0 or summary.delivery_complete_count < 0:
        return None
    return summary.delivery_complete_count


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
            share_group = service.share_groups.groups.get(g.group_id)
            for topic_id in share_group.state_topics if share_group is not None else ():
                known = image.topics_by_id.get(topic_id)  # the state coordinated elsewhere
                if known is not None:
                    keys.update((g.group_id, topic_id, i) for i in known.partitions)
            for _, topic_id, index in sorted(keys, key=lambda k: (str(k[1]), k[2])):
                topic = image.topics_by_id.get(topic_id)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(index)
        else:
            for t in g.topics:
                wanted.setdefault(t.topic_name, []).extend(t.partitions)
        visible = authz.topics_allowed(ctx, Op.DESCRIBE, list(wanted))
        topics = []
        lag_wanted: dict[tuple[str, int], tuple[dict[str, Any], int]] = {}
        for name, indexes in wanted.items():
            topic = image.topics_by_name.get(name)
            if topic is None or name not in visible:
                continue  # Kafka leaves out unknown and unauthorized topics
            parts = []
            for index in sorted(set(indexes)):
                entry: dict[str, Any] = {"partition_index": index, "start_offset": -1,
                                         "leader_epoch": -1, "lag": -1,
                                         "error_code": E.NONE, "error_message": None}
                if index not in topic.partitions:
                    entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    done = await _describe_partition(broker, g.group_id, topic, index, entry)
                    if done is not None and ctx.api_version >= 1:
                        lag_wanted[(name, index)] = (entry, done)
                    if g.topics is None and entry["start_offset"] < 0 and not entry["error_code"]:
                        continue  # listing the state there is: none here
                parts.append(entry)
            if parts or g.topics is not None:
                topics.append({"topic_name": name, "topic_id": topic.topic_id,
                               "partitions": parts})
        if lag_wanted:
            hws = await _high_watermarks(broker, list(lag_wanted))
            for tp, (entry, done) in lag_wanted.items():
                hw = hws.get(tp)
                if hw is not None:
                    entry["lag"] = max(0, hw - entry["start_offset"] - done)
        groups.append({"group_id": g.group_id, "topics": topics, "error_code": E.NONE,
                       "error_message": None})
    return {"groups": groups}


async def _changeable(broker: ShareServices, ctx: RequestContext, req: Any,
                      op: Op) -> tuple[int, set[str], int]:
    """Alter and Delete: the group's error (authorization, coordinator, a member
    still in it: NON_EMPTY_GROUP), the request's topics the principal may READ,
    and the group's epoch (0 for a group that never had a member)."""
    service = await _ready(broker)
    code = _group_error(service, ctx, req.group_id, op)
    share_group = service.share_groups.groups.get(req.group_id)
    if code == E.NONE and share_group is not None and share_group.members:
        code = CE.NON_EMPTY_GROUP
    if code == E.NONE and broker.share.persister is None:
        code = CE.COORDINATOR_NOT_AVAILABLE
    epoch = share_group.group_epoch if share_group is not None else 0
    return code, authz.topics_allowed(ctx, Op.READ, [t.topic_name for t in req.topics]), epoch


async def _state_topics(broker: ShareServices, group: str) -> set[Any]:
    """The group's topics with state (kept on its ShareGroup, if there is one)."""
    share_group = (await _ready(broker)).share_groups.groups.get(group)
    return share_group.state_topics if share_group is not None else set()


async def _reset(broker: ShareServices, key: Any, start_offset: int, group_epoch: int) -> int:
    """InitializeShareGroupState for one share partition, with a state epoch
    that fences any copy a leader holds; the copy held here is dropped."""
    persister = broker.share.persister
    assert persister is not None
    code, summary = await persister.summary(key)
    if code != E.NONE:
        return code
    state_epoch = max(group_epoch, summary.state_epoch + 1 if summary is not None else 0)
    code = await persister.initialize(key, state_epoch, start_offset)
    broker.share.partitions.drop(key)
    return code


async def handle_alter_share_group_offsets(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    code, readable, group_epoch = await _changeable(broker, ctx, req, Op.READ)
    if code != E.NONE:
        return {"error_code": code, "error_message": None, "responses": []}
    image = broker.image
    responses = []
    for t in req.topics:
        topic = image.topics_by_name.get(t.topic_name)
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "error_code": E.NONE, "error_message": None}
            if t.topic_name not in readable:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or p.partition_index not in topic.partitions:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < -1:
                entry.update(error_code=CE.INVALID_REQUEST,
                             error_message=f"Invalid start offset {p.start_offset}.")
            else:
                entry["error_code"] = await _reset(
                    broker, (req.group_id, topic.topic_id, p.partition_index),
                    p.start_offset, group_epoch)
                (await _state_topics(broker, req.group_id)).add(topic.topic_id)
            parts.append(entry)
        responses.append({"topic_name": t.topic_name,
                          "topic_id": topic.topic_id if topic else None, "partitions": parts})
    return {"error_code": E.NONE, "error_message": None, "responses": responses}


async def handle_delete_share_group_offsets(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    code, readable, _ = await _changeable(broker, ctx, req, Op.DELETE)
    if code != E.NONE:
        return {"error_code": code, "error_message": None, "responses": []}
    persister = broker.share.persister
    assert persister is not None
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
            found = False
            for index in sorted(topic.partitions):
                key = (req.group_id, topic.topic_id, index)
                code, summary = await persister.summary(key)
                if code == E.NONE and summary is None:
                    broker.share.partitions.drop(key)
                    continue
                found = True
                if code == E.NONE:
                    code = await broker.share.partitions.forget(key)
                if code != E.NONE:
                    entry["error_code"] = code
            if not found:
                entry.update(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, error_message=NO_OFFSETS)
            if entry["error_code"] in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
                (await _state_topics(broker, req.group_id)).discard(topic.topic_id)
        responses.append(entry)
    return {"error_code": E.NONE, "error_message": None, "responses": responses}
