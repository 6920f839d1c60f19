"""Group APIs: FindCoordinator, the classic group protocol, offsets, group admin.

Size (about 600 lines): one translation layer for one coordinator. The seam
for a split is the offset APIs (OffsetCommit, OffsetFetch, OffsetDelete and
their helpers) into a module of their own; it is not made yet.

KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe are in
consumer_groups.py, over the helpers here (`_ready`, `_replicated`, `_may_read`).

A thin translation between kio requests and the coordinator core
(`odradek/coordinator/`): requests become plain calls, the core's answers
become version-neutral dicts. JoinGroup and SyncGroup may have to wait for
other members; they await a future the coordinator shell resolves, so the
event loop never blocks (the connection still answers its requests in order).

A successful answer that rests on the group's state (everything but Heartbeat,
DescribeGroups and ListGroups) is sent only once the ISR has the group's
`__consumer_offsets` partition up to its log end (`_replicated`,
coordinator/replicated.py); a failed wait becomes Kafka's coordinator error.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from ...coordinator import errors as CE
from ...coordinator.classic import JoinRequest, SyncRequest, join_error, sync_error
from ...coordinator.core import OFFSETS_TOPIC, OffsetCommit, Out
from ...coordinator.replicated import GROUP_ERRORS, OFFSET_COMMIT_ERRORS, mapped
from ...coordinator.service import GroupCoordinatorService
from ...coordinator.share_coordinator import SHARE_STATE_TOPIC, parse_key
from ...coordinator.transaction import TRANSACTION_STATE_TOPIC
from ...protocol import errors as E
from ...security.resources import CLUSTER_NAME, ResourceType
from ...security.resources import AclOperation as Op
from ..context import RequestContext
from ..services import GroupServices
from . import authz
from .metadata import brokers_for

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2  # KIP-932: "group:topicId:partition", for brokers (CLUSTER_ACTION)
ZERO_UUID = uuid.UUID(int=0)
MAX_WAIT_SLACK_S = 5.0  # a parked request is answered at most this long after its own timeout


def _service(broker: GroupServices) -> GroupCoordinatorService:
    service: GroupCoordinatorService | None = getattr(broker, "group_coordinator", None)
    assert service is not None, "the broker wires the group coordinator in start()"
    return service


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.client_host


async def _ready(broker: GroupServices) -> GroupCoordinatorService:
    service = _service(broker)
    await service.ensure_offsets_topic()
    return service


async def _replicated(
    service: GroupCoordinatorService, group_id: str, *, write: bool = True
) -> int:
    """NONE once the ISR has the group's partition up to its log end offset,
    else Kafka's answer for the group (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)."""
    return mapped(GROUP_ERRORS, await service.replicated(group_id, write=write))


# -- FindCoordinator ----------------------------------------------------------------------


async def handle_find_coordinator(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    key_type = getattr(req, "key_type", KEY_TYPE_GROUP)
    keys = list(req.coordinator_keys) if ctx.api_version >= 4 else [req.key]
    results = []
    service = _service(broker)
    created = E.NONE
    if key_type == KEY_TYPE_GROUP:
        created = await service.ensure_offsets_topic()
    elif key_type == KEY_TYPE_TRANSACTION:
        created = await broker.txn_coordinator.ensure_topic()
    share = getattr(getattr(broker, "share", None), "coordinator", None)
    if key_type == KEY_TYPE_SHARE:
        created = await share.ensure_topic() if share is not None else E.COORDINATOR_NOT_AVAILABLE
    live = {b["node_id"]: b for b in brokers_for(broker.image, ctx.listener)}
    me = live.get(broker.node_id)
    core: Any = service.core if key_type == KEY_TYPE_GROUP else broker.txn_coordinator.core
    internal_name = OFFSETS_TOPIC if key_type == KEY_TYPE_GROUP else TRANSACTION_STATE_TOPIC
    if key_type == KEY_TYPE_SHARE and share is not None:
        core, internal_name = share.core, SHARE_STATE_TOPIC
    internal = broker.image.topics_by_name.get(internal_name)
    for key in keys:
        entry: dict[str, Any] = {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": E.NONE,
            "error_message": None,
        }
        share_key = parse_key(key) if key_type == KEY_TYPE_SHARE else None
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE) or (
                key_type == KEY_TYPE_SHARE and ctx.api_version < 6):
            entry["error_code"] = E.INVALID_REQUEST
            entry["error_message"] = f"Unknown coordinator key type {key_type}."
        elif key_type == KEY_TYPE_SHARE and not ctx.authorize(
                Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            entry["error_code"] = E.CLUSTER_AUTHORIZATION_FAILED
        elif key_type == KEY_TYPE_SHARE and share_key is None:
            entry["error_code"] = E.INVALID_REQUEST
            entry["error_message"] = "A share coordinator key is group:topicId:partition."
        elif key_type == KEY_TYPE_GROUP and not ctx.authorize(
                Op.DESCRIBE, ResourceType.GROUP, key):
            entry["error_code"] = E.GROUP_AUTHORIZATION_FAILED
        elif key_type == KEY_TYPE_TRANSACTION and not ctx.authorize(
                Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            entry["error_code"] = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif created != E.NONE or me is None:
            entry["error_code"] = E.COORDINATOR_NOT_AVAILABLE
        else:
            # Any key, "" included, hashes to a partition (old clients look up "");
            # its coordinator is that partition's leader, here or on another broker.
            hashed = share_key if share_key is not None else key
            part = internal.partitions.get(core.partition_for(hashed)) if internal else None
            leader = live.get(part.leader) if part is not None else None
            code = core.coordinator_error(hashed)
            if code == E.NONE:
                entry.update(node_id=me["node_id"], host=me["host"], port=me["port"])
            elif leader is not None and leader["node_id"] != broker.node_id:
                entry.update(node_id=leader["node_id"], host=leader["host"], port=leader["port"])
            else:
                entry["error_code"] = code
        results.append(entry)
    if ctx.api_version >= 4:
        return {"coordinators": results}
    return dict(results[0])


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------------------


async def _wait(
    service: GroupCoordinatorService,
    token: int,
    fut: asyncio.Future[dict[str, Any]],
    timeout_s: float,
    on_timeout: dict[str, Any],
) -> dict[str, Any]:
    try:
        return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
    except TimeoutError:
        service.forget(token)
        return on_timeout


def _may_read(ctx: RequestContext, group_id: str) -> bool:
    return ctx.authorize(Op.READ, ResourceType.GROUP, group_id)


async def handle_join_group(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not _may_read(ctx, req.group_id):
        return _join_out(join_error(E.GROUP_AUTHORIZATION_FAILED, req.member_id), ctx)
    service = await _ready(broker)
    if req.group_id in service.share_groups.groups:  # a share group's id (KIP-932)
        return _join_out(join_error(CE.INCONSISTENT_GROUP_PROTOCOL, req.member_id), ctx)
    session_ms = _ms(req.session_timeout)
    rebalance_ms = _ms(req.rebalance_timeout) if ctx.api_version >= 1 else session_ms
    jr = JoinRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        api_version=ctx.api_version,
    )
    if jr.group_instance_id is not None and ctx.api_version < 5:
        jr.group_instance_id = None
    waiter = service.new_waiter()
    if waiter is None:
        return _join_out(join_error(CE.COORDINATOR_NOT_AVAILABLE, req.member_id), ctx)
    token, fut = waiter
    out = Out()
    service.core.join_group(jr, token, service.clock_ms(), out, service.topics())
    service.apply(out)
    timeout_s = max(rebalance_ms, session_ms) / 1000 + MAX_WAIT_SLACK_S
    resp = await _wait(
        service, token, fut, timeout_s, join_error(CE.REBALANCE_IN_PROGRESS, req.member_id)
    )
    if resp["error_code"] == E.NONE:
        code = await _replicated(service, req.group_id)
        if code != E.NONE:
            resp = join_error(code, req.member_id)
    return _join_out(resp, ctx)


def _join_out(resp: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
    resp = dict(resp)
    if ctx.api_version < 7 and resp.get("protocol_name") is None:
        resp["protocol_name"] = ""  # a non-nullable string before v7
    return resp


async def handle_sync_group(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not _may_read(ctx, req.group_id):
        return sync_error(E.GROUP_AUTHORIZATION_FAILED)
    service = await _ready(broker)
    sr = SyncRequest(
        member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        generation_id=req.generation_id,
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    waiter = service.new_waiter()
    if waiter is None:
        return sync_error(CE.COORDINATOR_NOT_AVAILABLE)
    token, fut = waiter
    out = Out()
    service.core.sync_group(req.group_id, sr, token, service.clock_ms(), out, service.topics())
    service.apply(out)
    group = service.core.groups.get(req.group_id)
    rebalance_ms = 300_000
    member = getattr(group, "members", {}).get(req.member_id) if group is not None else None
    if member is not None:
        rebalance_ms = getattr(member, "rebalance_timeout_ms", rebalance_ms)
    resp = await _wait(
        service,
        token,
        fut,
        rebalance_ms / 1000 + MAX_WAIT_SLACK_S,
        sync_error(CE.REBALANCE_IN_PROGRESS),
    )
    if resp["error_code"] == E.NONE:
        code = await _replicated(service, req.group_id)
        if code != E.NONE:
            resp = sync_error(code)
    return resp


async def handle_heartbeat(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not _may_read(ctx, req.group_id):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED}
    service = await _ready(broker)
    code = service.core.heartbeat(
        req.group_id,
        req.member_id,
        getattr(req, "group_instance_id", None),
        req.generation_id,
        service.clock_ms(),
    )
    return {"error_code": code}


async def handle_leave_group(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not _may_read(ctx, req.group_id):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "members": []}
    service = await _ready(broker)
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    out = Out()
    top, codes = service.core.leave_group(
        req.group_id, members, service.clock_ms(), out, service.topics())
    service.apply(out)
    if top == E.NONE:
        top = await _replicated(service, req.group_id)
    if ctx.api_version < 3:
        return {"error_code": top if top != E.NONE else codes[0]}
    return {
        "error_code": top,
        "members": [
            {"member_id": mid, "group_instance_id": iid, "error_code": code}
            for (mid, iid), code in zip(members, codes)
        ]
        if top == E.NONE
        else [],
    }


# -- OffsetCommit / OffsetFetch / OffsetDelete ------------------------------------------------------


async def handle_offset_commit(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    by_id = ctx.api_version >= 10
    if not _may_read(ctx, req.group_id):  # every partition answers it
        return {"topics": [
            {**({"topic_id": t.topic_id} if by_id else {"name": t.name}), "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": E.GROUP_AUTHORIZATION_FAILED} for p in t.partitions]}
            for t in req.topics]}
    service = await _ready(broker)
    image = broker.image
    readable = authz.topics_allowed(ctx, Op.READ, [
        t.name for t in ((image.topics_by_id.get(x.topic_id) for x in req.topics) if by_id
                         else req.topics) if t is not None])
    commits: list[OffsetCommit] = []
    answers: list[tuple[Any, list[tuple[int, int | None]]]] = []  # topic ref, [(p, code|None)]
    for t in req.topics:
        if by_id:
            topic = image.topics_by_id.get(t.topic_id)
            name, missing = (topic.name if topic else None), CE.UNKNOWN_TOPIC_ID
        else:
            name, missing = t.name, CE.UNKNOWN_TOPIC_OR_PARTITION
        parts: list[tuple[int, int | None]] = []
        for p in t.partitions:
            if name is not None and name not in readable:
                parts.append((p.partition_index, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            if name is None or name not in image.topics_by_name:
                parts.append((p.partition_index, missing))
                continue
            parts.append((p.partition_index, None))
            commits.append(
                OffsetCommit(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
        answers.append((t.topic_id if by_id else t.name, parts))
    out = Out()
    # acks=all: below min.insync.replicas nothing is written, nor changed in memory.
    refused = service.write_refused(req.group_id) if commits else E.NONE
    codes = (
        service.core.commit_offsets(
            req.group_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
            req.generation_id_or_member_epoch,
            commits,
            ctx.api_version,
            service.clock_ms(),
            out,
        )
        if commits and refused == E.NONE
        else [mapped(OFFSET_COMMIT_ERRORS, refused)] * len(commits)
    )
    if not service.apply(out):
        codes = [CE.COORDINATOR_NOT_AVAILABLE if c == E.NONE else c for c in codes]
    if E.NONE in codes:
        # Acknowledged only once the ISR has the commit (Kafka's acks=-1 append).
        code = mapped(OFFSET_COMMIT_ERRORS, await service.replicated(req.group_id))
        codes = [code if c == E.NONE else c for c in codes]
    it = iter(codes)
    topics = []
    for ref, parts in answers:
        entry: dict[str, Any] = {"topic_id": ref} if by_id else {"name": ref}
        entry["partitions"] = [
            {"partition_index": p, "error_code": next(it) if code is None else code}
            for p, code in parts
        ]
        topics.append(entry)
    return {"topics": topics}


async def _fetch_group(
    broker: GroupServices,
    service: GroupCoordinatorService,
    group_id: str,
    topics: Any,
    by_id: bool,
    member_id: str | None,
    member_epoch: int,
    require_stable: bool = False,
    ctx: RequestContext | None = None,
) -> tuple[int, list[dict[str, Any]]]:
    if ctx is not None and not ctx.authorize(Op.DESCRIBE, ResourceType.GROUP, group_id):
        return E.GROUP_AUTHORIZATION_FAILED, []
    image = broker.image
    # KIP-447: an offset a transaction has committed but not completed is unstable.
    pending = service.core.txn_offsets if require_stable else None
    wanted: list[tuple[str, list[int]]] | None = None
    ids: dict[str, Any] = {}
    if topics is not None:
        wanted = []
        for t in topics:
            if by_id:
                topic = image.topics_by_id.get(t.topic_id)
                name = topic.name if topic else f"\0{t.topic_id}"
                ids[name] = t.topic_id
            else:
                name = t.name
            wanted.append((name, list(t.partition_indexes)))
    code, found = service.core.fetch_offsets(group_id, wanted, member_id, member_epoch)
    if code == E.NONE:
        # Only offsets the ISR has: wait for the commits still being replicated.
        code = await _replicated(service, group_id, write=False)
    out = []
    described = (authz.topics_allowed(ctx, Op.DESCRIBE, found) if ctx is not None
                 else set(found))
    for name, parts in found.items():
        if name not in described:
            if topics is None:
                continue  # all offsets asked: the topics it may not describe are left out
            ref_denied: dict[str, Any] = ({"topic_id": ids.get(name, ZERO_UUID)} if by_id
                                          else {"name": name})
            ref_denied["partitions"] = [
                {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": E.TOPIC_AUTHORIZATION_FAILED} for p, _ in parts]
            out.append(ref_denied)
            continue
        if by_id:
            topic = image.topics_by_name.get(name)
            ref: dict[str, Any] = {
                "topic_id": ids.get(name) or (topic.topic_id if topic else ZERO_UUID)
            }
            if topic is None and topics is None:
                continue  # offsets of a deleted topic have no id to show
        else:
            ref = {"name": name}
        ref["partitions"] = [
            {
                "partition_index": p,
                "committed_offset": v.offset if v else -1,
                "committed_leader_epoch": v.leader_epoch if v else -1,
                "metadata": v.metadata if v else "",
                "error_code": CE.UNKNOWN_TOPIC_ID
                if by_id and name.startswith("\0")
                else E.UNSTABLE_OFFSET_COMMIT
                if pending and pending.is_pending(group_id, (name, p))
                else E.NONE,
            }
            for p, v in parts
        ]
        out.append(ref)
    if code != E.NONE:
        out = []
    return code, out


async def handle_offset_fetch(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    service = await _ready(broker)
    by_id = ctx.api_version >= 10
    if ctx.api_version >= 8:
        groups = []
        for g in req.groups:
            code, topics = await _fetch_group(
                broker,
                service,
                g.group_id,
                g.topics,
                by_id,
                getattr(g, "member_id", None),
                getattr(g, "member_epoch", -1),
                getattr(req, "require_stable", False),
                ctx,
            )
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return {"groups": groups}
    code, topics = await _fetch_group(
        broker,
        service,
        req.group_id,
        req.topics,
        False,
        None,
        -1,
        getattr(req, "require_stable", False),
        ctx,
    )
    if ctx.api_version < 2 and code != E.NONE:
        # v0-1 have no top-level error: it goes on every requested partition.
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": code,
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in (req.topics or [])
        ]
    return {"topics": topics, "error_code": code}


async def handle_offset_delete(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize(Op.DELETE, ResourceType.GROUP, req.group_id):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "topics": []}
    service = await _ready(broker)
    readable = authz.topics_allowed(ctx, Op.READ, [t.name for t in req.topics])
    denied = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics
              if t.name not in readable]
    wanted = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics
              if t.name in readable]
    out = Out()
    code, found = service.core.delete_offsets(req.group_id, wanted, out)
    service.apply(out)
    if code == E.NONE:
        code = await _replicated(service, req.group_id)
    image = broker.image
    topics = []
    if code == E.NONE:
        for name, parts in wanted:
            codes = dict(found.get(name, []))
            topics.append(
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "error_code": codes.get(p, E.NONE)
                            if name in image.topics_by_name
                            else E.UNKNOWN_TOPIC_OR_PARTITION,
                        }
                        for p in parts
                    ],
                }
            )
        topics.extend({"name": name, "partitions": [
            {"partition_index": p, "error_code": E.TOPIC_AUTHORIZATION_FAILED} for p in parts]}
            for name, parts in denied)
    return {"error_code": code, "topics": topics}


# -- DescribeGroups / ListGroups / DeleteGroups ---------------------------------------------------


async def handle_describe_groups(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    service = await _ready(broker)
    groups = []
    described = authz.allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, req.groups)
    asked_ops = bool(getattr(req, "include_authorized_operations", False))
    for group_id in req.groups:
        if group_id not in described:
            groups.append(_group_denied(group_id, ctx))
            continue
        g = service.core.describe_group(group_id, service.topics())
        if ctx.api_version >= 6 and g["error_code"] == E.NONE and g["group_state"] == "Dead":
            g["error_code"] = CE.GROUP_ID_NOT_FOUND
            g["error_message"] = f"Group {group_id} not found."
        # KIP-430: for the groups answered without an error (Kafka's KafkaApis)
        g["authorized_operations"] = authz.operations(
            ctx, ResourceType.GROUP, group_id, asked_ops and g["error_code"] == E.NONE)
        groups.append(g)
    return {"groups": groups}


def _group_denied(group_id: str, ctx: RequestContext) -> dict[str, Any]:
    return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "error_message": None,
            "group_id": group_id, "group_state": "", "protocol_type": "",
            "protocol_data": "", "members": [],
            "authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED}


async def handle_list_groups(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    service = _service(broker)
    states = {s.lower() for s in getattr(req, "states_filter", ())}
    types = {t.lower() for t in getattr(req, "types_filter", ())}
    listed = service.core.list_groups() + [  # KIP-932 share groups, of the loaded partitions
        g for g in service.share_groups.list_groups()
        if service.core.coordinator_error(g["group_id"]) == E.NONE]
    groups = [
        g
        for g in listed
        if (not states or g["group_state"].lower() in states)
        and (not types or g["group_type"] in types)
    ]
    if not authz.cluster_allows(ctx, Op.DESCRIBE):
        # without DESCRIBE on the cluster, only the groups it may DESCRIBE
        visible = authz.allowed(ctx, Op.DESCRIBE, ResourceType.GROUP,
                                [g["group_id"] for g in groups])
        groups = [g for g in groups if g["group_id"] in visible]
    return {"error_code": E.NONE, "groups": groups}


async def handle_delete_groups(broker: GroupServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    service = await _ready(broker)
    out = Out()
    deletable = authz.allowed(ctx, Op.DELETE, ResourceType.GROUP, req.groups_names)
    results = [
        {"group_id": g, "error_code": service.core.delete_group(g, out) if g in deletable
         else E.GROUP_AUTHORIZATION_FAILED} for g in req.groups_names
    ]
    if not service.apply(out):
        for r in results:
            if r["error_code"] == E.NONE:
                r["error_code"] = CE.COORDINATOR_NOT_AVAILABLE
    for r in results:
        if r["error_code"] == E.NONE:
            r["error_code"] = await _replicated(service, r["group_id"])
    return {"results": results}


def _ms(value: Any) -> int:
    from ...protocol.entities import ms

    return ms(value)
