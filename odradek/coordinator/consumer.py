"""One KIP-848 consumer group: ConsumerGroupHeartbeat as a state machine.

Theory of operation. The group has a *group epoch*, bumped whenever what the
assignment depends on changes (a member joins or leaves, a subscription
changes, a subscribed topic gains partitions). When the group epoch is ahead
of the *assignment epoch*, the server-side assignor computes a new target
assignment at once. Each member then reconciles towards its target on its own
heartbeats, with no group-wide barrier:

1. partitions it owns but the target does not give it are revoked first: the
   member keeps its epoch and is answered with its assignment minus those
   (state UNREVOKED_PARTITIONS) until a heartbeat reports it no longer owns
   them;
2. then it moves to the target epoch and gets the target partitions that no
   other member still owns; those still owned elsewhere come on a later
   heartbeat, once released (state UNRELEASED_PARTITIONS).

So a partition is never owned by two members at once. Time is an input: a
member whose heartbeats stop for `group.consumer.session.timeout.ms`, or that
does not revoke within its rebalance timeout, is removed.

Persistence. The group's epochs, members, target and current assignments are
records in `__consumer_offsets` (consumer_records.py), written by
consumer_state.py after each change. The group only says which members'
records may have changed (`touched`); consumer_state.py diffs against what it
last wrote (`persisted`), so a heartbeat that changes nothing writes nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors as E
from .assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment

STABLE = "STABLE"
UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MAX_REGEX_LENGTH = 1000

Partitions = dict[uuid.UUID, set[int]]
TopicsView = Mapping[str, tuple[uuid.UUID, int]]  # topic name -> (topic id, partitions)


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(slots=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: Partitions | None  # what the member owns now; None = unchanged
    client_id: str
    client_host: str
    api_version: int


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    left_static: bool = False
    # A member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a
    # consumer group during a migration (classic_members.py): its session timeout
    # and its JoinGroup protocols (name, subscription bytes). None for KIP-848 members.
    classic_session_timeout_ms: int | None = None
    classic_protocols: list[tuple[str, bytes]] | None = None

    @property
    def is_classic(self) -> bool:
        return self.classic_protocols is not None


def _copy(p: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in p.items() if ps}


def _minus(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


def _contains(a: Partitions, b: Partitions) -> bool:
    return all(ps <= a.get(t, set()) for t, ps in b.items())


def _wire(p: Partitions) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(p.items(), key=str) if ps]


def heartbeat_error(
    code: int, message: str | None = None, member_id: str | None = None
) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "member_id": member_id,
        "member_epoch": -1,
        "heartbeat_interval": 0,
        "assignment": None,
    }


class ConsumerGroup:
    def __init__(self, group_id: str, config: ConsumerConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: Assignment = {}
        self.assignor_name = DEFAULT_ASSIGNOR
        self.metadata_fingerprint: tuple[Any, ...] = ()
        # For consumer_state.py: members whose records may have changed since the
        # last write, the last written value of each key, and the written epochs.
        self.touched: set[str] = set()
        self.persisted: dict[bytes, bytes] = {}
        self.persisted_head: tuple[Any, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state != STABLE
            for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    # -- subscriptions ------------------------------------------------------------------

    def _member_topics(self, m: ConsumerMember, topics: TopicsView) -> frozenset[str]:
        names = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            try:
                pattern = re.compile(m.subscribed_topic_regex)
            except re.error:
                pattern = None
            if pattern is not None:
                names |= {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
        return frozenset(names)

    def subscribed_topics(self, topics: TopicsView) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out |= self._member_topics(m, topics)
        return out

    def _fingerprint(self, topics: TopicsView) -> tuple[Any, ...]:
        return tuple(sorted((n, *topics[n]) for n in self.subscribed_topics(topics) if n in topics))

    def _refresh_target(self, topics: TopicsView) -> None:
        fingerprint = self._fingerprint(topics)
        if fingerprint != self.metadata_fingerprint:
            self.metadata_fingerprint = fingerprint
            if self.group_epoch == self.assignment_epoch:
                self.group_epoch += 1
        if self.group_epoch <= self.assignment_epoch:
            return
        self.assignor_name = self.pick_assignor()
        subs = {mid: self._member_topics(m, topics) for mid, m in self.members.items()}
        self.target = ASSIGNORS[self.assignor_name](subs, topics, self.target)
        self.assignment_epoch = self.group_epoch

    def pick_assignor(self) -> str:
        preferred = [m.server_assignor for m in self.members.values() if m.server_assignor]
        name = preferred[0] if preferred else self.config.assignors[0]
        return name if name in ASSIGNORS else DEFAULT_ASSIGNOR

    # -- ownership ----------------------------------------------------------------------

    def _owned_elsewhere(self, member_id: str) -> Partitions:
        out: Partitions = {}
        for mid, m in self.members.items():
            if mid == member_id:
                continue
            for part in (m.assigned, m.pending_revocation):
                for t, ps in part.items():
                    out.setdefault(t, set()).update(ps)
        return out

    def waiting_on_unreleased(self, m: ConsumerMember) -> bool:
        """Whether a partition of `m`'s target is still owned by another member."""
        wanted = _minus(self.target.get(m.member_id, {}), m.assigned)
        return bool(_and(wanted, self._owned_elsewhere(m.member_id)))

    def _reconcile(self, m: ConsumerMember, owned: Partitions | None, now_ms: int) -> None:
        """Move `m` towards its target (see the module docstring)."""
        target = self.target.get(m.member_id, {})
        if m.state == UNREVOKED_PARTITIONS:
            if owned is None or _and(owned, m.pending_revocation):
                return
            m.pending_revocation = {}
            m.revocation_deadline_ms = None
            m.state = STABLE
        if m.member_epoch == self.assignment_epoch and m.state == STABLE:
            return
        revoke = _minus(m.assigned, target)
        if revoke and (owned is None or _and(owned, revoke)):
            m.assigned = _and(m.assigned, target)
            m.pending_revocation = revoke
            m.state = UNREVOKED_PARTITIONS
            m.revocation_deadline_ms = now_ms + max(m.rebalance_timeout_ms, 0)
            return
        # nothing to revoke, or the member says it no longer owns it (a classic
        # member that rejoined after an eager revocation): on to the target epoch
        m.assigned = _and(m.assigned, target)
        busy = self._owned_elsewhere(m.member_id)
        wanted = _minus(target, m.assigned)
        free = _minus(wanted, busy)
        for t, ps in free.items():
            m.assigned.setdefault(t, set()).update(ps)
        if m.member_epoch != self.assignment_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = self.assignment_epoch
        m.state = UNRELEASED_PARTITIONS if _minus(wanted, free) else STABLE

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest, topics: TopicsView, now_ms: int) -> dict[str, Any]:
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            return heartbeat_error(
                E.UNSUPPORTED_ASSIGNOR, f"Unsupported assignor {req.server_assignor}."
            )
        if (
            req.subscribed_topic_regex is not None
            and len(req.subscribed_topic_regex) > MAX_REGEX_LENGTH
        ):
            return heartbeat_error(E.INVALID_REQUEST, "SubscribedTopicRegex is too long.")
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, now_ms)
        full = False
        if req.member_epoch == 0:
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                return heartbeat_error(
                    E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set."
                )
            found = self._join(req, now_ms)
            if isinstance(found, dict):
                return found
            m = found
            full = True
        else:
            m_or_none = self.members.get(req.member_id)
            if m_or_none is None or m_or_none.left_static:
                return heartbeat_error(
                    E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group."
                )
            m = m_or_none
            if req.member_epoch > m.member_epoch:
                return heartbeat_error(
                    E.FENCED_MEMBER_EPOCH, "The member epoch is larger than the group's."
                )
            if req.member_epoch < m.member_epoch and not (
                req.member_epoch == m.previous_member_epoch
                and (req.topic_partitions is None or _contains(m.assigned, req.topic_partitions))
            ):
                return heartbeat_error(E.FENCED_MEMBER_EPOCH, "The member epoch is stale.")
        self.touched.add(m.member_id)
        before = (m.member_epoch, _copy(m.assigned))
        m.session_deadline_ms = now_ms + self.config.session_timeout_ms
        if req.rebalance_timeout_ms >= 0:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        changed = False
        if (
            req.subscribed_topic_names is not None
            and req.subscribed_topic_names != m.subscribed_topic_names
        ):
            m.subscribed_topic_names = list(req.subscribed_topic_names)
            changed = True
        if req.subscribed_topic_regex is not None and req.subscribed_topic_regex != (
            m.subscribed_topic_regex or ""
        ):
            m.subscribed_topic_regex = req.subscribed_topic_regex or None
            changed = True
        if req.server_assignor is not None and req.server_assignor != m.server_assignor:
            m.server_assignor = req.server_assignor
            changed = True
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if changed:
            self.group_epoch += 1
        self._refresh_target(topics)
        self._reconcile(m, req.topic_partitions, now_ms)
        after = (m.member_epoch, m.assigned)
        send = full or req.topic_partitions is not None or before != after
        return {
            "error_code": E.NONE,
            "error_message": None,
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "heartbeat_interval": self.config.heartbeat_interval_ms,
            "assignment": {"topic_partitions": _wire(m.assigned)} if send else None,
        }

    def _join(self, req: HeartbeatRequest, now_ms: int) -> ConsumerMember | dict[str, Any]:
        member_id = req.member_id or str(uuid.uuid4())
        if req.instance_id is not None:
            old_id = self.static_members.get(req.instance_id)
            old = self.members.get(old_id) if old_id else None
            if old is not None:
                if not old.left_static:
                    return heartbeat_error(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {req.instance_id} is still in use by {old_id}.",
                    )
                # KIP-345 under KIP-848: the new member takes over the old one's place.
                del self.members[old.member_id]
                self.touched.add(old.member_id)
                old.member_id = member_id
                old.left_static = False
                self.members[member_id] = old
                self.static_members[req.instance_id] = member_id
                if old_id in self.target:
                    self.target[member_id] = self.target.pop(old_id)
                return old
        existing = self.members.get(member_id)
        if existing is not None:
            # A member rejoining with epoch 0 gives up what it had (Kafka fences it and
            # starts over); keep it simple: the same member restarts from nothing.
            existing.assigned = {}
            existing.pending_revocation = {}
            existing.state = STABLE
            existing.member_epoch = 0
            return existing
        if len(self.members) >= self.config.max_size:
            return heartbeat_error(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members.",
            )
        m = ConsumerMember(
            member_id,
            req.instance_id,
            req.rack_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            list(req.subscribed_topic_names or []),
            req.subscribed_topic_regex or None,
            req.server_assignor,
            session_deadline_ms=now_ms + self.config.session_timeout_ms,
        )
        self.members[member_id] = m
        if req.instance_id is not None:
            self.static_members[req.instance_id] = member_id
        self.group_epoch += 1
        return m

    def _leave(self, req: HeartbeatRequest, now_ms: int) -> dict[str, Any]:
        m = self.members.get(req.member_id)
        if m is None and req.instance_id is not None:
            m = self.members.get(self.static_members.get(req.instance_id, ""))
        if m is None:
            return heartbeat_error(
                E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of the group."
            )
        if req.member_epoch == STATIC_LEAVE_EPOCH and m.instance_id is not None:
            # A static member leaving temporarily keeps its assignment until its session ends.
            m.left_static = True
            self.touched.add(m.member_id)
            m.session_deadline_ms = now_ms + self.config.session_timeout_ms
        else:
            self.remove_member(m.member_id)
        return {
            "error_code": E.NONE,
            "error_message": None,
            "member_id": req.member_id,
            "member_epoch": req.member_epoch,
            "heartbeat_interval": 0,
            "assignment": None,
        }

    def remove_member(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is None:
            return
        self.touched.add(member_id)
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1

    # -- timers and offsets ------------------------------------------------------------------

    def tick(self, now_ms: int, topics: TopicsView) -> list[ConsumerMember]:
        """Remove members whose session or revocation time ran out; returns them."""
        expired = [
            m.member_id
            for m in self.members.values()
            if m.session_deadline_ms <= now_ms
            or (m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms)
        ]
        removed = [self.members[mid] for mid in expired]
        for member_id in expired:
            self.remove_member(member_id)
        if expired or self._fingerprint(topics) != self.metadata_fingerprint:
            self._refresh_target(topics)
        return removed

    @property
    def classic_only(self) -> bool:
        """Members left, all of them classic: a downgrade candidate (migration.py)."""
        return bool(self.members) and all(m.is_classic for m in self.members.values())

    def validate_offset_commit(self, member_id: str, member_epoch: int) -> int:
        if member_epoch < 0 and not member_id:
            return E.NONE if not self.members else E.UNKNOWN_MEMBER_ID
        m = self.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            # a classic member commits with its generation (= its member epoch)
            return E.ILLEGAL_GENERATION if m.is_classic else E.STALE_MEMBER_EPOCH
        return E.NONE

    # -- description ----------------------------------------------------------------------

    def describe(self, names_by_id: Mapping[uuid.UUID, str], topics: TopicsView) -> dict[str, Any]:
        def named(p: Partitions) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": t, "topic_name": names_by_id.get(t, ""), "partitions": sorted(ps)}
                    for t, ps in sorted(p.items(), key=str)
                    if ps
                ]
            }

        return {
            "error_code": E.NONE,
            "error_message": None,
            "group_id": self.group_id,
            "group_state": self.state,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor_name": self.assignor_name,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.member_epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": sorted(self._member_topics(m, topics)),
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "assignment": named(m.assigned),
                    "target_assignment": named(self.target.get(m.member_id, {})),
                    "member_type": 0 if m.is_classic else 1,
                }
                for m in self.members.values()
            ],
            "authorized_operations": -(2**31),
        }
