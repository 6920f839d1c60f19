"""Share groups (KIP-932): membership and assignment, ShareGroupHeartbeat as a
state machine.

Theory of operation. A share group's members heartbeat with the topics they
subscribe to; the coordinator assigns them partitions. Unlike a consumer group,
a share-group partition may be assigned to several members at once: records,
not partitions, are what a member owns (share_partition.py locks them), so an
assignment never has to be revoked before it is given elsewhere and a member
moves to a new epoch on its next heartbeat.

- The *group epoch* is bumped whenever the assignment's inputs change (a member
  joins, leaves or times out, a subscription changes, a subscribed topic gains
  partitions); the assignment is then recomputed at once (`_assign`).
- The assignor is Kafka's "simple" one in spirit: per topic, with no more
  members than partitions each partition goes to one member (round robin); with
  more members than partitions each member gets one partition and partitions
  are shared (round robin over partitions). Every member thus gets work.
- Each member has the epoch it was last told; its next heartbeat must carry
  exactly that epoch (else FENCED_MEMBER_EPOCH), and is answered with the new
  epoch and assignment when they changed.
- A member whose heartbeats stop for `share.session.timeout.ms` is removed
  (`expire`, called on every heartbeat and by the coordinator's timer).

Membership is not written to a log: after a coordinator restart the members
rejoin (their heartbeats answer UNKNOWN_MEMBER_ID and the client joins again
with epoch 0). What must survive, the share-partition state, is kept by the
share coordinator in `__share_group_state` (share_coordinator.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors as E

EMPTY = "Empty"
STABLE = "Stable"
LEAVE_EPOCH = -1
MAX_SHARE_GROUPS = 100_000  # a bound on the groups one coordinator holds
MAX_SUBSCRIBED_TOPICS = 10_000

TopicsView = Mapping[str, tuple[uuid.UUID, int]]  # topic name -> (topic id, partitions)
Assignment = dict[uuid.UUID, list[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0  # the epoch last sent to the member
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    deadline_ms: int = 0
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    topic_sizes: dict[str, int] = field(default_factory=dict)  # what the assignment used
    # topics ever assigned or given offsets (in memory; DescribeShareGroupOffsets
    # without topics lists them, as Kafka lists the group's initialized topics)
    state_topics: set[uuid.UUID] = field(default_factory=set)

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str = ""
    client_host: str = ""


def heartbeat_error(code: int, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def assign(members: list[ShareMember], topics: TopicsView) -> dict[str, Assignment]:
    """The simple assignor: every subscribed partition to someone, every
    subscriber something (partitions shared when members outnumber them)."""
    out: dict[str, Assignment] = {m.member_id: {} for m in members}
    names = sorted({t for m in members for t in m.subscribed if t in topics})
    for name in names:
        topic_id, count = topics[name]
        subs = sorted(m.member_id for m in members if name in m.subscribed)
        if count <= 0 or not subs:
            continue
        if len(subs) <= count:
            for p in range(count):
                out[subs[p % len(subs)]].setdefault(topic_id, []).append(p)
        else:
            for i, member_id in enumerate(subs):
                out[member_id].setdefault(topic_id, []).append(i % count)
    return out


class ShareGroups:
    """The share groups of one coordinator (every partition of
    `__consumer_offsets` it leads: the caller checks coordinatorship)."""

    def __init__(self, config: ShareGroupConfig | None = None) -> None:
        self.config = config or ShareGroupConfig()
        self.group_configs: dict[str, ShareGroupConfig] = {}  # per-group overrides
        self.groups: dict[str, ShareGroup] = {}
        # told (group, member) when a member's session times out: the node's share
        # partitions release what it held at once (else its locks run out)
        self.departure_listeners: list[Callable[[str, str], None]] = []

    def _departed(self, group_id: str, member_id: str) -> None:
        for listener in self.departure_listeners:
            listener(group_id, member_id)

    def _config(self, group_id: str) -> ShareGroupConfig:
        return self.group_configs.get(group_id, self.config)

    # -- time ------------------------------------------------------------------------

    def expire(self, now_ms: int, topics: TopicsView) -> list[tuple[str, str]]:
        """Remove members whose session ran out; (group, member) of each."""
        gone = []
        for group in self.groups.values():
            dead = [m for m in group.members.values() if m.deadline_ms <= now_ms]
            for m in dead:
                del group.members[m.member_id]
                gone.append((group.group_id, m.member_id))
                self._departed(group.group_id, m.member_id)
            if dead:
                group.group_epoch += 1
                self._assign(group, topics)
        return gone

    # -- ShareGroupHeartbeat ---------------------------------------------------------

    def heartbeat(self, group_id: str, hb: ShareHeartbeat, topics: TopicsView,
                  now_ms: int) -> dict[str, Any]:
        config = self._config(group_id)
        self.expire(now_ms, topics)
        group = self.groups.get(group_id)
        if hb.member_epoch == LEAVE_EPOCH:
            if group is None or hb.member_id not in group.members:
                return heartbeat_error(E.UNKNOWN_MEMBER_ID, None)
            del group.members[hb.member_id]
            group.group_epoch += 1
            self._assign(group, topics)
            # not _departed: a leaving member's last acknowledgements may still be on
            # their way to the leaders; its final ShareAcknowledge closes its sessions
            return {"error_code": E.NONE, "error_message": None, "member_id": hb.member_id,
                    "member_epoch": LEAVE_EPOCH, "heartbeat_interval": 0,
                    "assignment": None}
        if hb.member_epoch == 0:
            if not hb.subscribed_topic_names:
                return heartbeat_error(
                    E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if group is None:
                if len(self.groups) >= MAX_SHARE_GROUPS:
                    return heartbeat_error(E.COORDINATOR_NOT_AVAILABLE, "Too many groups.")
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(hb.member_id)
            if member is None:
                if len(group.members) >= config.max_size:
                    return heartbeat_error(
                        E.GROUP_MAX_SIZE_REACHED,
                        f"The share group has reached its maximum capacity of "
                        f"{config.max_size} members.")
                member = group.members[hb.member_id] = ShareMember(hb.member_id)
                group.group_epoch += 1
            member.member_epoch = 0  # a rejoin: gets the current assignment
        else:
            member = group.members.get(hb.member_id) if group is not None else None
            if group is None or member is None:
                return heartbeat_error(
                    E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of the group.")
            if hb.member_epoch != member.member_epoch:
                return heartbeat_error(
                    E.FENCED_MEMBER_EPOCH,
                    f"The share group member has a member epoch ({hb.member_epoch}) "
                    f"different from the one the coordinator has ({member.member_epoch}).")
        member.deadline_ms = now_ms + config.session_timeout_ms
        member.client_id = hb.client_id
        member.client_host = hb.client_host
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.subscribed_topic_names is not None:
            subscribed = tuple(sorted(set(hb.subscribed_topic_names)))
            if subscribed != member.subscribed:
                member.subscribed = subscribed
                group.group_epoch += 1
        sizes = {t: topics[t][1] for t in group.subscribed() if t in topics}
        if sizes != group.topic_sizes:
            group.group_epoch += 1
        if group.group_epoch != group.assignment_epoch:
            self._assign(group, topics)
        answer = None
        if member.member_epoch != group.assignment_epoch:
            member.member_epoch = group.assignment_epoch
            answer = {"topic_partitions": [
                {"topic_id": tid, "partitions": sorted(ps)}
                for tid, ps in sorted(member.assignment.items(), key=lambda kv: str(kv[0]))]}
        return {"error_code": E.NONE, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval": config.heartbeat_interval_ms, "assignment": answer}

    def _assign(self, group: ShareGroup, topics: TopicsView) -> None:
        members = list(group.members.values())
        plan = assign(members, topics)
        for m in members:
            m.assignment = plan[m.member_id]
            group.state_topics.update(m.assignment)
        group.topic_sizes = {t: topics[t][1] for t in group.subscribed() if t in topics}
        group.assignment_epoch = group.group_epoch

    # -- ShareGroupDescribe / ListGroups ---------------------------------------------

    def describe(self, group_id: str, names: Mapping[uuid.UUID, str]) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": E.GROUP_ID_NOT_FOUND,
                    "error_message": f"Group {group_id} not found.",
                    "group_id": group_id, "group_state": "Dead", "group_epoch": -1,
                    "assignment_epoch": -1, "assignor_name": "", "members": []}
        members = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            members.append({
                "member_id": m.member_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed),
                "assignment": {"topic_partitions": [
                    {"topic_id": tid, "topic_name": names.get(tid, ""),
                     "partitions": sorted(ps)}
                    for tid, ps in sorted(m.assignment.items(), key=lambda kv: str(kv[0]))]},
            })
        return {"error_code": E.NONE, "error_message": None, "group_id": group_id,
                "group_state": group.state, "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch, "assignor_name": "simple",
                "members": members}

    def list_groups(self) -> list[dict[str, str]]:
        return [{"group_id": g.group_id, "protocol_type": "share", "group_state": g.state,
                 "group_type": "share"} for _, g in sorted(self.groups.items())]

    def delete(self, group_id: str) -> int:
        """DeleteGroups: only an empty share group can go."""
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        return E.NONE
