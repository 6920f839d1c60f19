"""One classic group: JoinGroup / SyncGroup / Heartbeat / LeaveGroup as a state machine.

Theory of operation. A group moves through Kafka's states

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
                                                                   (and Dead when deleted)

PreparingRebalance collects JoinGroups until every known member has rejoined
(or the rebalance timeout ends; members that did not rejoin are dropped, static
ones kept). Completing the join bumps the generation, picks the protocol every
member supports with the most first-choice votes, and answers every waiting
JoinGroup: the leader gets every member's metadata, the others an empty list.
CompletingRebalance waits for the leader's SyncGroup, whose assignments are
stored (and written to `__consumer_offsets`) and handed to every member's
SyncGroup. The broker never looks inside the assignment: eager and cooperative
rebalances are the client assignors' business.

Nothing here reads a clock or does I/O. Requests that must wait (JoinGroup,
SyncGroup) carry a *token*; the answer for a token is appended to
`Effects.replies`, now or during a later call (another member's request, or
`tick(now_ms)` when a timer ends). Groups whose metadata changed are listed in
`Effects.dirty` so that the coordinator writes their GroupMetadata record.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from . import errors as E
from .classic_types import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicMember,
    Effects,
    GroupLimits,
    JoinRequest,
    SyncRequest,
    Token,
    join_error,
    sync_error,
)
from .consumer_protocol import subscribed_topics
from .records import GroupValue, MemberValue

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "PREPARING_REBALANCE",
    "STABLE",
    "ClassicGroup",
    "ClassicMember",
    "Effects",
    "GroupLimits",
    "JoinRequest",
    "SyncRequest",
    "Token",
    "join_error",
    "sync_error",
]


class ClassicGroup:
    def __init__(self, group_id: str, limits: GroupLimits, now_ms: int) -> None:
        self.group_id = group_id
        self.limits = limits
        self.state = EMPTY
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> deadline (MEMBER_ID_REQUIRED)
        self.join_deadline_ms: int | None = None
        self.sync_deadline_ms: int | None = None
        # group.initial.rebalance.delay.ms: the delayed first join of an empty group
        self._initial_delay_until_ms: int | None = None
        self._initial_budget_end_ms = 0
        self._joined_during_delay = False

    # -- queries -----------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None if the protocol is not "consumer"."""
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = subscribed_topics(m.metadata_for(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    def _is_full(self, extra: int = 1) -> bool:
        return len(self.members) + len(self.pending_members) + extra > self.limits.max_size

    def _supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        return bool(common & names)

    def _member_for(
        self, member_id: str, instance_id: str | None
    ) -> tuple[int, ClassicMember | None]:
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is not None and current != member_id:
                return E.FENCED_INSTANCE_ID, None
        member = self.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID, None
        return E.NONE, member

    # -- JoinGroup ---------------------------------------------------------------------

    def join(self, req: JoinRequest, token: Token, now_ms: int, fx: Effects) -> None:
        if self.state == DEAD:
            fx.reply(token, join_error(E.COORDINATOR_NOT_AVAILABLE, req.member_id))
            return
        if req.member_id == "":
            self._join_new(req, token, now_ms, fx)
        else:
            self._join_known(req, token, now_ms, fx)

    def _join_new(self, req: JoinRequest, token: Token, now_ms: int, fx: Effects) -> None:
        if not self._supports(req.protocol_type, req.protocols):
            fx.reply(token, join_error(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = self.static_members.get(req.group_instance_id)
            if old_id is not None and old_id in self.members:
                self._replace_static_member(old_id, new_id, req, token, now_ms, fx)
                return
        if self._is_full():
            fx.reply(token, join_error(E.GROUP_MAX_SIZE_REACHED))
            return
        if req.group_instance_id is None and req.api_version >= 4:
            # KIP-394: hand out the member id first, the member joins with it.
            self.pending_members[new_id] = now_ms + req.session_timeout_ms
            fx.reply(token, join_error(E.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member(new_id, req, token, now_ms, fx)

    def _join_known(self, req: JoinRequest, token: Token, now_ms: int, fx: Effects) -> None:
        if req.member_id in self.pending_members:
            del self.pending_members[req.member_id]
            if not self._supports(req.protocol_type, req.protocols):
                fx.reply(token, join_error(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
                self._maybe_complete_join(now_ms, fx)
                return
            self._add_member(req.member_id, req, token, now_ms, fx)
            return
        code, member = self._member_for(req.member_id, req.group_instance_id)
        if member is None:
            fx.reply(token, join_error(code, req.member_id))
            return
        if not self._supports(req.protocol_type, req.protocols):
            fx.reply(token, join_error(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return
        changed = member.protocols != req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == PREPARING_REBALANCE:
            member.protocols = req.protocols
            self._await_join(member, token, fx)
            self._maybe_complete_join(now_ms, fx)
        elif self.state == COMPLETING_REBALANCE:
            if changed:
                member.protocols = req.protocols
                self._await_join(member, token, fx)
                self._prepare_rebalance(now_ms, fx)
            else:
                fx.reply(token, self._join_response(member, req.api_version, False))
        elif self.state == STABLE:
            if changed or member.member_id == self.leader_id:
                member.protocols = req.protocols
                self._await_join(member, token, fx)
                self._prepare_rebalance(now_ms, fx)
            else:
                fx.reply(token, self._join_response(member, req.api_version, False))
        else:
            fx.reply(token, join_error(E.UNKNOWN_MEMBER_ID, req.member_id))

    def _await_join(self, member: ClassicMember, token: Token, fx: Effects) -> None:
        if member.join_token is not None:
            fx.reply(member.join_token, join_error(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_token = token

    def _add_member(
        self, member_id: str, req: JoinRequest, token: Token, now_ms: int, fx: Effects
    ) -> None:
        member = ClassicMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocols,
            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
        )
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = member
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        member.join_token = token
        self._joined_during_delay = True
        if self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)
        else:
            self._prepare_rebalance(now_ms, fx)

    def _replace_static_member(
        self, old_id: str, new_id: str, req: JoinRequest, token: Token, now_ms: int, fx: Effects
    ) -> None:
        """KIP-345: a static member that restarts takes its old place under a new id."""
        member = self.members.pop(old_id)
        fx.reply(member.join_token, join_error(E.FENCED_INSTANCE_ID, old_id))
        fx.reply(member.sync_token, sync_error(E.FENCED_INSTANCE_ID))
        member.join_token = member.sync_token = None
        member.member_id = new_id
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms
        self.members[new_id] = member
        assert req.group_instance_id is not None
        self.static_members[req.group_instance_id] = new_id
        was_leader = self.leader_id == old_id
        if was_leader:
            self.leader_id = new_id
        same = member.metadata_for(self.protocol_name) == dict(req.protocols).get(
            self.protocol_name or "", None
        )
        if self.state == STABLE and same:
            # No rebalance: the member gets the current generation and, at SyncGroup,
            # the assignment it had. A leader of v9+ learns the members but skips
            # the assignment (KIP-814); older leaders are answered as followers.
            member.protocols = req.protocols
            fx.dirty.add(self.group_id)
            skip = was_leader and req.api_version >= 9
            resp = self._join_response(member, req.api_version, skip)
            if was_leader and not skip:
                resp["members"] = []
            fx.reply(token, resp)
            return
        member.protocols = req.protocols
        member.join_token = token
        if self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)
        else:
            self._prepare_rebalance(now_ms, fx)

    def _join_response(self, member: ClassicMember, api_version: int, skip: bool) -> dict[str, Any]:
        is_leader = member.member_id == self.leader_id
        members = []
        if is_leader:
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata_for(self.protocol_name),
                }
                for m in self.members.values()
            ]
        return {
            "error_code": E.NONE,
            "generation_id": self.generation,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocol_name,
            "leader": self.leader_id or "",
            "skip_assignment": skip,
            "member_id": member.member_id,
            "members": members,
        }

    # -- rebalance ------------------------------------------------------------------------

    def _max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _transition(self, state: str, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def rebalance(self, now_ms: int, fx: Effects) -> None:
        """Start a rebalance from outside (a group downgraded from KIP-848, migration.py)."""
        self._prepare_rebalance(now_ms, fx)

    def _prepare_rebalance(self, now_ms: int, fx: Effects) -> None:
        if self.state == COMPLETING_REBALANCE:
            for m in self.members.values():
                m.assignment = b""
                if m.sync_token is not None:
                    fx.reply(m.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
                    m.sync_token = None
            self.sync_deadline_ms = None
        max_timeout = self._max_rebalance_timeout_ms()
        delay = min(self.limits.initial_rebalance_delay_ms, max_timeout)
        if self.state == EMPTY and delay > 0:
            self._initial_delay_until_ms = now_ms + delay
            self._initial_budget_end_ms = now_ms + max_timeout
            self._joined_during_delay = False
            self.join_deadline_ms = self._initial_delay_until_ms
        else:
            self._initial_delay_until_ms = None
            self.join_deadline_ms = now_ms + max_timeout
        self._transition(PREPARING_REBALANCE, now_ms)
        self._maybe_complete_join(now_ms, fx)

    def _maybe_complete_join(self, now_ms: int, fx: Effects) -> None:
        if self.state != PREPARING_REBALANCE or self._initial_delay_until_ms is not None:
            return
        if self.pending_members:
            return
        if all(m.join_token is not None for m in self.members.values()):
            self._complete_join(now_ms, fx)

    def _complete_join(self, now_ms: int, fx: Effects) -> None:
        for m in list(self.members.values()):
            if m.join_token is None and m.group_instance_id is None:
                self._remove(m.member_id, fx)
        self.join_deadline_ms = None
        self._initial_delay_until_ms = None
        self.generation += 1
        fx.dirty.add(self.group_id)
        if not self.members:
            self.protocol_name = None
            self.protocol_type = self.protocol_type  # kept: Kafka keeps it for an empty group
            self.leader_id = None
            self._transition(EMPTY, now_ms)
            return
        self.protocol_name = self._vote()
        joined = [m for m in self.members.values() if m.join_token is not None]
        if self.leader_id not in self.members or self.members[self.leader_id].join_token is None:
            self.leader_id = joined[0].member_id if joined else next(iter(self.members))
        self._transition(COMPLETING_REBALANCE, now_ms)
        for m in joined:
            fx.reply(m.join_token, self._join_response(m, 9, False))
            m.join_token = None
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        self.sync_deadline_ms = now_ms + self._max_rebalance_timeout_ms()

    def _vote(self) -> str:
        candidates = set.intersection(*({n for n, _ in m.protocols} for m in self.members.values()))
        votes: Counter[str] = Counter()
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] += 1
        first = next(iter(self.members.values()))
        order = {n: i for i, (n, _) in enumerate(first.protocols)}
        return max(votes, key=lambda n: (votes[n], -order.get(n, 0)))

    def _remove(self, member_id: str, fx: Effects) -> None:
        m = self.members.pop(member_id)
        if (
            m.group_instance_id is not None
            and self.static_members.get(m.group_instance_id) == member_id
        ):
            del self.static_members[m.group_instance_id]
        fx.reply(m.join_token, join_error(E.UNKNOWN_MEMBER_ID, member_id))
        fx.reply(m.sync_token, sync_error(E.UNKNOWN_MEMBER_ID))
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _remove_and_rebalance(self, member_id: str, now_ms: int, fx: Effects) -> None:
        self._remove(member_id, fx)
        if self.state in (STABLE, COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        elif self.state == PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)

    # -- SyncGroup / Heartbeat / LeaveGroup -----------------------------------------------

    def sync(self, req: SyncRequest, token: Token, now_ms: int, fx: Effects) -> None:
        code, member = self._member_for(req.member_id, req.group_instance_id)
        if member is None or self.state in (EMPTY, DEAD):
            fx.reply(token, sync_error(code or E.UNKNOWN_MEMBER_ID))
            return
        if req.generation_id != self.generation:
            fx.reply(token, sync_error(E.ILLEGAL_GENERATION))
            return
        if (req.protocol_type is not None and req.protocol_type != self.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != self.protocol_name
        ):
            fx.reply(token, sync_error(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == PREPARING_REBALANCE:
            fx.reply(token, sync_error(E.REBALANCE_IN_PROGRESS))
        elif self.state == STABLE:
            fx.reply(token, self._sync_response(member))
        else:  # COMPLETING_REBALANCE
            if member.sync_token is not None:
                fx.reply(member.sync_token, sync_error(E.REBALANCE_IN_PROGRESS))
            member.sync_token = token
            if member.member_id == self.leader_id:
                for m in self.members.values():
                    m.assignment = req.assignments.get(m.member_id, b"")
                fx.dirty.add(self.group_id)
                self.sync_deadline_ms = None
                self._transition(STABLE, now_ms)
                for m in self.members.values():
                    if m.sync_token is not None:
                        fx.reply(m.sync_token, self._sync_response(m))
                        m.sync_token = None
                        m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def _sync_response(self, member: ClassicMember) -> dict[str, Any]:
        return {
            "error_code": E.NONE,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocol_name,
            "assignment": member.assignment,
        }

    def heartbeat(
        self, member_id: str, instance_id: str | None, generation_id: int, now_ms: int
    ) -> int:
        code, member = self._member_for(member_id, instance_id)
        if member is None or self.state in (EMPTY, DEAD):
            return code or E.UNKNOWN_MEMBER_ID
        if generation_id != self.generation:
            return E.ILLEGAL_GENERATION
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, member_id: str, instance_id: str | None, now_ms: int, fx: Effects) -> int:
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if member_id and current != member_id:
                return E.FENCED_INSTANCE_ID
            member_id = current
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
            self._maybe_complete_join(now_ms, fx)
            return E.NONE
        if member_id not in self.members:
            return E.UNKNOWN_MEMBER_ID
        self._remove_and_rebalance(member_id, now_ms, fx)
        return E.NONE

    def member_heartbeat_from_commit(self, member_id: str, now_ms: int) -> None:
        member = self.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    # -- timers ------------------------------------------------------------------------------

    def tick(self, now_ms: int, fx: Effects) -> None:
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now_ms:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms, fx)
        for m in list(self.members.values()):
            if m.member_id not in self.members:
                continue
            waiting = m.join_token is not None or m.sync_token is not None
            if not waiting and m.heartbeat_deadline_ms <= now_ms:
                self._remove_and_rebalance(m.member_id, now_ms, fx)
        if self.state == PREPARING_REBALANCE and self.join_deadline_ms is not None:
            if self.join_deadline_ms <= now_ms:
                if self._initial_delay_until_ms is not None:
                    remaining = self._initial_budget_end_ms - now_ms
                    if self._joined_during_delay and remaining > 0:
                        self._joined_during_delay = False
                        step = min(self.limits.initial_rebalance_delay_ms, remaining)
                        self._initial_delay_until_ms = self.join_deadline_ms = now_ms + step
                        return
                self._complete_join(now_ms, fx)
        elif (
            self.state == COMPLETING_REBALANCE
            and self.sync_deadline_ms is not None
            and self.sync_deadline_ms <= now_ms
        ):
            # the leader's SyncGroup did not come: drop who did not sync, start over
            self.sync_deadline_ms = None
            for m in list(self.members.values()):
                if m.sync_token is None:
                    self._remove(m.member_id, fx)
            self._prepare_rebalance(now_ms, fx)

    # -- persistence and description -------------------------------------------------------

    def to_value(self) -> GroupValue:
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(self.protocol_name),
                    m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_value(
        cls, group_id: str, value: GroupValue, limits: GroupLimits, now_ms: int
    ) -> ClassicGroup:
        group = cls(group_id, limits, now_ms)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp_ms >= 0:
            group.state_timestamp_ms = value.current_state_timestamp_ms
        for mv in value.members:
            protocols = [(value.protocol or "", mv.subscription)]
            member = ClassicMember(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.session_timeout_ms,
                mv.rebalance_timeout_ms,
                protocols,
                mv.assignment,
                heartbeat_deadline_ms=now_ms + mv.session_timeout_ms,
            )
            group.members[mv.member_id] = member
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        group.state = STABLE if group.members else EMPTY
        return group

    def describe(self) -> dict[str, Any]:
        stable = self.state == STABLE
        return {
            "error_code": E.NONE,
            "error_message": None,
            "group_id": self.group_id,
            "group_state": self.state,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata_for(self.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
            "authorized_operations": -(2**31),
        }

    def mark_dead(self, fx: Effects) -> None:
        for m in list(self.members.values()):
            fx.reply(m.join_token, join_error(E.COORDINATOR_NOT_AVAILABLE, m.member_id))
            fx.reply(m.sync_token, sync_error(E.COORDINATOR_NOT_AVAILABLE))
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.state = DEAD

    def fail_waiting(self, code: int, fx: Effects) -> None:
        """Answer every waiting JoinGroup/SyncGroup with `code` (the partition was unloaded)."""
        for m in self.members.values():
            fx.reply(m.join_token, join_error(code, m.member_id))
            fx.reply(m.sync_token, sync_error(code))
            m.join_token = m.sync_token = None
