"""Classic-protocol members of a KIP-848 consumer group (during a migration).

A consumer still on `group.protocol=classic` keeps sending JoinGroup,
SyncGroup, Heartbeat and LeaveGroup after its group became a consumer group
(migration.py), or when it joins a consumer group that has members. The
coordinator translates, as Kafka's does:

- JoinGroup is a ConsumerGroupHeartbeat of the member: its subscription and
  the partitions it still owns come from the embedded consumer protocol
  metadata of its first protocol; the member is reconciled towards its target
  at once and answered right away, generation = its member epoch, as a
  follower (no leader, no member list: the broker assigns). A new dynamic
  member of JoinGroup v4+ is first handed its member id (MEMBER_ID_REQUIRED).
- SyncGroup answers the member's current assignment (what reconciliation gave
  it) in the consumer protocol's assignment format; REBALANCE_IN_PROGRESS if
  the group moved on since it joined, unless it still has to revoke.
- Heartbeat keeps the session (the member's own session timeout) and answers
  REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch is ahead
  of its epoch, it has partitions to revoke, or partitions it waits for are
  free now.
- LeaveGroup removes the member.

Generation mismatches answer ILLEGAL_GENERATION; a KIP-848 member sending
classic requests is an UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import uuid
from typing import Any

from . import errors as E
from .classic_types import JoinRequest, SyncRequest, join_error, sync_error
from .consumer import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    TopicsView,
)
from .consumer_protocol import encode_assignment, parse_subscription

CONSUMER_PROTOCOL = "consumer"


def supports(group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols."""
    names = {n for n, _ in protocols}
    if protocol_type != CONSUMER_PROTOCOL or not names:
        return False
    classic = [m for m in group.members.values() if m.is_classic]
    if not classic:
        return True
    common = set.intersection(*({n for n, _ in m.classic_protocols or []} for m in classic))
    return bool(common & names)


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember | int:
    if instance_id is not None:
        mid = group.static_members.get(instance_id)
        if mid is None:
            return E.UNKNOWN_MEMBER_ID
        if mid != member_id:
            return E.FENCED_INSTANCE_ID
    m = group.members.get(member_id)
    if m is None or not m.is_classic:
        return E.UNKNOWN_MEMBER_ID
    return m


def join(group: ConsumerGroup, req: JoinRequest, topics: TopicsView, now_ms: int) -> dict[str, Any]:
    member_id = req.member_id or str(uuid.uuid4())
    if member_id not in group.members and len(group.members) >= group.config.max_size:
        return join_error(E.GROUP_MAX_SIZE_REACHED, req.member_id)
    if not supports(group, req.protocol_type, req.protocols):
        return join_error(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
    if not req.member_id and req.group_instance_id is None and req.api_version >= 4:
        return join_error(E.MEMBER_ID_REQUIRED, member_id)
    parsed = parse_subscription(req.protocols[0][1])
    if parsed is None:
        return join_error(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
    names, owned_names, rack = parsed
    owned = {topics[t][0]: set(ps) for t, ps in owned_names.items() if t in topics and ps}
    existing = group.members.get(member_id)
    if existing is None and req.group_instance_id is not None:
        old = group.static_members.get(req.group_instance_id)
        if old is not None and old in group.members:
            if req.member_id and req.member_id != old:
                return join_error(E.FENCED_INSTANCE_ID, req.member_id)
            member_id, existing = old, group.members[old]
    if existing is not None and not existing.is_classic:
        return join_error(E.UNKNOWN_MEMBER_ID, req.member_id)
    hb = HeartbeatRequest(
        member_id=member_id,
        member_epoch=existing.member_epoch if existing is not None else 0,
        instance_id=req.group_instance_id,
        rack_id=rack,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=sorted(set(names)),
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=owned,
        client_id=req.client_id,
        client_host=req.client_host,
        api_version=0,
    )
    resp = group.heartbeat(hb, topics, now_ms)
    if resp["error_code"] != E.NONE:
        code = resp["error_code"]
        if code == E.INVALID_REQUEST:
            code = E.INCONSISTENT_GROUP_PROTOCOL  # e.g. a subscription to no topic
        return join_error(code, req.member_id)
    m = group.members[resp["member_id"]]
    m.classic_session_timeout_ms = req.session_timeout_ms
    m.classic_protocols = list(req.protocols)
    m.session_deadline_ms = now_ms + req.session_timeout_ms
    group.touched.add(m.member_id)
    return {
        "error_code": E.NONE,
        "generation_id": m.member_epoch,
        "protocol_type": CONSUMER_PROTOCOL,
        "protocol_name": req.protocols[0][0],
        "leader": "",
        "skip_assignment": False,
        "member_id": m.member_id,
        "members": [],
    }


def sync(group: ConsumerGroup, req: SyncRequest, topics: TopicsView, now_ms: int) -> dict[str, Any]:
    found = _member(group, req.member_id, req.group_instance_id)
    if isinstance(found, int):
        return sync_error(found)
    m = found
    if req.generation_id != m.member_epoch:
        return sync_error(E.ILLEGAL_GENERATION)
    protocol = (m.classic_protocols or [("", b"")])[0][0]
    if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL) or (
        req.protocol_name is not None and req.protocol_name != protocol
    ):
        return sync_error(E.INCONSISTENT_GROUP_PROTOCOL)
    if group.group_epoch > m.member_epoch and m.state != UNREVOKED_PARTITIONS:
        return sync_error(E.REBALANCE_IN_PROGRESS)
    m.session_deadline_ms = now_ms + (m.classic_session_timeout_ms or 0)
    names = {tid: name for name, (tid, _) in topics.items()}
    assignment = {names[t]: sorted(ps) for t, ps in m.assigned.items() if t in names}
    return {
        "error_code": E.NONE,
        "protocol_type": CONSUMER_PROTOCOL,
        "protocol_name": protocol,
        "assignment": encode_assignment(assignment),
    }


def heartbeat(
    group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int, now_ms: int
) -> int:
    found = _member(group, member_id, instance_id)
    if isinstance(found, int):
        return found
    m = found
    if generation != m.member_epoch:
        return E.ILLEGAL_GENERATION
    m.session_deadline_ms = now_ms + (m.classic_session_timeout_ms or 0)
    if (
        m.member_epoch < group.group_epoch
        or m.state == UNREVOKED_PARTITIONS
        or (m.state == UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(m))
    ):
        return E.REBALANCE_IN_PROGRESS
    return E.NONE


def leave(group: ConsumerGroup, member_id: str, instance_id: str | None) -> int:
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return E.UNKNOWN_MEMBER_ID
        if member_id and current != member_id:
            return E.FENCED_INSTANCE_ID
        member_id = current
    if member_id not in group.members:
        return E.UNKNOWN_MEMBER_ID
    group.remove_member(member_id)
    return E.NONE
