"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe.

A thin translation to the coordinator core's new-protocol calls
(`coordinator/consumer.py`), as groups.py is for the classic protocol: the
heartbeat's answer is sent once the group's new state is replicated
(`groups._replicated`); authorization is READ on the group (and DESCRIBE on the
subscribed topics) for the heartbeat, DESCRIBE on each group for the describe.
"""

from __future__ import annotations

from typing import Any

from ...coordinator import errors as CE
from ...coordinator.consumer import HeartbeatRequest, heartbeat_error
from ...coordinator.core import Out
from ...protocol import errors as E
from ...protocol.entities import ms
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ..context import RequestContext
from ..services import GroupServices
from . import authz

# The group family's shared steps (coordinator ready, replication wait, READ check);
# kept private to groups.py, whose handlers use them most.
from .groups import _client_host, _may_read, _ready, _replicated


def heartbeat_checks(ctx: RequestContext, req: Any, min_epoch: int
                     ) -> tuple[int, str | None] | None:
    """A KIP-848 or KIP-932 heartbeat's epoch, READ on the group and DESCRIBE on
    its subscribed topics: the (error, message) to answer, or None."""
    if req.member_epoch < min_epoch:
        return CE.INVALID_REQUEST, f"MemberEpoch {req.member_epoch} is invalid."
    if not _may_read(ctx, req.group_id):
        return E.GROUP_AUTHORIZATION_FAILED, None
    if req.subscribed_topic_names:
        names = list(req.subscribed_topic_names)
        if len(authz.topics_allowed(ctx, Op.DESCRIBE, names)) < len(set(names)):
            return E.TOPIC_AUTHORIZATION_FAILED, None
    return None


async def handle_consumer_group_heartbeat(
    broker: GroupServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = await _ready(broker)
    if not req.group_id:
        return heartbeat_error(CE.INVALID_REQUEST, "GroupId can't be empty.")
    if ctx.api_version >= 1 and not req.member_id:
        return heartbeat_error(CE.INVALID_REQUEST, "MemberId can't be empty.")
    bad = heartbeat_checks(ctx, req, min_epoch=-2)
    if bad is not None:
        return heartbeat_error(*bad)
    if req.group_id in service.share_groups.groups:  # a share group's id (KIP-932)
        return heartbeat_error(CE.GROUP_ID_NOT_FOUND,
                               f"Group {req.group_id} is not a consumer group.")
    owned = None
    if req.topic_partitions is not None:
        owned = {tp.topic_id: set(tp.partitions) for tp in req.topic_partitions}
    hr = HeartbeatRequest(
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=ms(req.rebalance_timeout),
        subscribed_topic_names=list(req.subscribed_topic_names)
        if req.subscribed_topic_names is not None
        else None,
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor,
        topic_partitions=owned,
        client_id=ctx.client_id or "",
        client_host=_client_host(ctx),
        api_version=ctx.api_version,
    )
    out = Out()
    resp = service.core.consumer_heartbeat(
        req.group_id, hr, service.topics(), service.clock_ms(), out
    )
    if not service.apply(out) and resp["error_code"] == E.NONE:
        # The group's new state is not in the log: the member retries.
        return heartbeat_error(CE.COORDINATOR_NOT_AVAILABLE, "The group state was not written.")
    if resp["error_code"] == E.NONE:
        code = await _replicated(service, req.group_id)
        if code != E.NONE:
            return heartbeat_error(code, "The group state is not replicated yet.")
    return resp


async def handle_consumer_group_describe(
    broker: GroupServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = await _ready(broker)
    image = broker.image
    names = {tid: t.name for tid, t in image.topics_by_id.items()}
    described = authz.allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, req.group_ids)
    groups = []
    for g in req.group_ids:
        if g not in described:
            groups.append({"error_code": E.GROUP_AUTHORIZATION_FAILED, "error_message": None,
                           "group_id": g, "group_state": "", "group_epoch": -1,
                           "assignment_epoch": -1, "assignor_name": "", "members": [],
                           "authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED})
            continue
        entry = service.core.consumer_describe(g, names, service.topics())
        entry["authorized_operations"] = authz.operations(
            ctx, ResourceType.GROUP, g,
            req.include_authorized_operations and entry["error_code"] == E.NONE)
        groups.append(entry)
    return {"groups": groups}
