"""The group coordinator core: groups and committed offsets over `__consumer_offsets`.

Theory of operation. Group `g` lives in partition
`abs(java_string_hashcode(g)) % offsets.topic.num.partitions` of
`__consumer_offsets`. The coordinator serves the groups of the partitions it
has *loaded* (those this broker leads): loading replays the partition's
records (`records.py`) into groups and offsets; unloading forgets them and
fails waiting requests with NOT_COORDINATOR. Every change is returned as
records to append to the group's partition (`Effects.records`), and replies
to waiting JoinGroup/SyncGroup requests as `Effects.replies`.

What the coordinator holds (loaded partitions, groups, offsets, where a group
lives) is `state.py`'s GroupState, which GroupCoordinator extends; a partition's
replay (`group_load.py`) and pending transactional offsets (`txn_offsets.py`)
work on a GroupState, so they never import this module.

The core never reads a clock or touches a file: `now_ms` and the topic view
(name -> (topic id, partition count)) are arguments. The shell in
`service.py` appends the records, resolves the waiting requests and calls
`tick` on a timer.

Committed offsets (commit, fetch, delete, expiry) are `offsets.py`'s OffsetsState,
which GroupCoordinator extends with the group protocols.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from . import classic_members, consumer_state, migration
from . import errors as E
from .classic import (
    DEAD,
    ClassicGroup,
    JoinRequest,
    SyncRequest,
    join_error,
    sync_error,
)
from .consumer import (
    ConsumerConfig,
    ConsumerGroup,
    HeartbeatRequest,
    TopicsView,
    heartbeat_error,
)
from .consumer_protocol import encode_assignment, encode_subscription
from .group_load import GroupLoad
from .offsets import OffsetCommit, OffsetsState, Out
from .records import group_key, group_value
from .state import (
    MAX_GROUPS,
    OFFSETS_TOPIC,
    CoordinatorConfig,
    Group,
    java_string_hashcode,
    partition_for,
)
from .txn_offsets import PendingTxnOffsets

__all__ = [
    "MAX_GROUPS",
    "OFFSETS_TOPIC",
    "CoordinatorConfig",
    "Group",
    "GroupCoordinator",
    "OffsetCommit",
    "Out",
    "java_string_hashcode",
    "partition_for",
]

log = logging.getLogger(__name__)


class GroupCoordinator(OffsetsState):
    """The protocol over the state (`state.py`): every method takes time and requests
    and leaves its records in an `Out`."""

    def __init__(self, config: CoordinatorConfig) -> None:
        super().__init__(config)
        # TxnOffsetCommit offsets waiting for their transaction's marker.
        self.txn_offsets = PendingTxnOffsets()
        # KIP-848 group configs (GROUP config resources): group id -> its settings,
        # read at each heartbeat as Kafka's GroupConfigManager is
        self.consumer_configs: Mapping[str, ConsumerConfig] = {}

    # -- loading --------------------------------------------------------------------

    def begin_load(self, partition: int) -> GroupLoad:
        """Start loading `partition`: its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until `GroupLoad.install`."""
        self.loading.add(partition)
        return GroupLoad(partition)

    def load(
        self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int
    ) -> int:
        """Replay a partition's (key, value) records at once; returns how many were applied."""
        loader = self.begin_load(partition)
        for key, value in records:
            loader.feed(key, value)
        loader.install(self, now_ms)
        return loader.count

    def cancel_load(self, partition: int) -> None:
        self.loading.discard(partition)

    def unload(self, partition: int, out: Out) -> None:
        self.loaded.discard(partition)
        self.loading.discard(partition)
        self.txn_offsets.drop_partition(self, partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            if isinstance(group, ClassicGroup):
                group.fail_waiting(E.NOT_COORDINATOR, out)
            self.offsets.pop(group_id, None)

    # -- records ------------------------------------------------------------------------------

    def flush_dirty(self, out: Out) -> None:
        for group_id in sorted(out.dirty):
            group = self.groups.get(group_id)
            if isinstance(group, ClassicGroup) and group.state != DEAD:
                out.records.append(
                    (
                        self.partition_for(group_id),
                        group_key(group_id),
                        group_value(group.to_value()),
                    )
                )
        out.dirty.clear()

    def _classic(self, group_id: str, create: bool, now_ms: int, out: Out) -> ClassicGroup | int:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return E.UNKNOWN_MEMBER_ID
            if len(self.groups) >= MAX_GROUPS:
                log.warning("refusing group %r: %d groups is the limit", group_id, MAX_GROUPS)
                return E.COORDINATOR_NOT_AVAILABLE
            group = ClassicGroup(group_id, self.config.limits, now_ms)
            self.groups[group_id] = group
        if not isinstance(group, ClassicGroup):
            return (
                E.INCONSISTENT_GROUP_PROTOCOL
                if not group.is_empty
                else self._convert(group_id, now_ms, out)
            )
        return group

    def _convert(self, group_id: str, now_ms: int, out: Out) -> ClassicGroup:
        old = self.groups.get(group_id)
        if isinstance(old, ConsumerGroup):
            consumer_state.tombstones(old, self.partition_for(group_id), out.records)
        group = ClassicGroup(group_id, self.config.limits, now_ms)
        self.groups[group_id] = group
        return group

    # -- classic protocol ----------------------------------------------------------------------

    def join_group(
        self,
        req: JoinRequest,
        token: int,
        now_ms: int,
        out: Out,
        topics: TopicsView | None = None,
    ) -> None:
        code = self.check(req.group_id)
        if code == E.NONE:
            limits = self.config.limits
            if (
                not limits.min_session_timeout_ms
                <= req.session_timeout_ms
                <= limits.max_session_timeout_ms
            ):
                code = E.INVALID_SESSION_TIMEOUT
        if code != E.NONE:
            out.reply(token, join_error(code, req.member_id))
            return
        current = self.groups.get(req.group_id)
        if isinstance(current, ConsumerGroup) and not current.is_empty:
            # a classic member of a consumer group (classic_members.py)
            out.reply(token, classic_members.join(current, req, topics or {}, now_ms))
            consumer_state.persist(current, self.partition_for(req.group_id), out.records)
            return
        found = self._classic(req.group_id, req.member_id == "", now_ms, out)
        if isinstance(found, int):
            out.reply(token, join_error(found, req.member_id))
            return
        found.join(req, token, now_ms, out)
        self.flush_dirty(out)

    def sync_group(
        self,
        group_id: str,
        req: SyncRequest,
        token: int,
        now_ms: int,
        out: Out,
        topics: TopicsView | None = None,
    ) -> None:
        code = self.check(group_id)
        group = self.groups.get(group_id) if code == E.NONE else None
        if isinstance(group, ConsumerGroup):
            out.reply(token, classic_members.sync(group, req, topics or {}, now_ms))
            return
        if code == E.NONE and not isinstance(group, ClassicGroup):
            code = E.UNKNOWN_MEMBER_ID
        if code != E.NONE or not isinstance(group, ClassicGroup):
            out.reply(token, sync_error(code))
            return
        group.sync(req, token, now_ms, out)
        self.flush_dirty(out)

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int, now_ms: int
    ) -> int:
        code = self.check(group_id)
        if code != E.NONE:
            return code
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return classic_members.heartbeat(group, member_id, instance_id, generation, now_ms)
        if not isinstance(group, ClassicGroup):
            return E.UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id, instance_id, generation, now_ms)

    def leave_group(
        self,
        group_id: str,
        members: list[tuple[str, str | None]],
        now_ms: int,
        out: Out,
        topics: TopicsView | None = None,
    ) -> tuple[int, list[int]]:
        code = self.check(group_id)
        if code != E.NONE:
            return code, [code] * len(members)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            results = [classic_members.leave(group, mid, iid) for mid, iid in members]
            if E.NONE in results and not self._maybe_downgrade(group, topics or {}, now_ms, out):
                consumer_state.persist(group, self.partition_for(group_id), out.records)
            return E.NONE, results
        if not isinstance(group, ClassicGroup):
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        results = [group.leave(mid, iid, now_ms, out) for mid, iid in members]
        self.flush_dirty(out)
        return E.NONE, results

    # -- admin ------------------------------------------------------------------------------------

    def describe_group(self, group_id: str, topics: TopicsView | None = None) -> dict[str, Any]:
        code = self.check(group_id)
        group = self.groups.get(group_id) if code == E.NONE else None
        if isinstance(group, ClassicGroup) and group.state != DEAD:
            return group.describe()
        if isinstance(group, ConsumerGroup):
            names = {tid: name for name, (tid, _) in (topics or {}).items()}
            return {
                "error_code": E.NONE,
                "error_message": None,
                "group_id": group_id,
                "group_state": group.state,
                "protocol_type": "consumer",
                "protocol_data": "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        # a classic member's own subscription bytes, as it sent them
                        "member_metadata": m.classic_protocols[0][1]
                        if m.classic_protocols
                        else encode_subscription(m.subscribed_topic_names),
                        "member_assignment": encode_assignment(
                            {names[t]: sorted(ps) for t, ps in m.assigned.items() if t in names}
                        ),
                    }
                    for m in group.members.values()
                ],
                "authorized_operations": -(2**31),
            }
        return {
            "error_code": code,
            "error_message": None,
            "group_id": group_id,
            "group_state": DEAD,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": -(2**31),
        }

    def list_groups(self) -> list[dict[str, str]]:
        out = []
        for group_id, group in sorted(self.groups.items()):
            if isinstance(group, ClassicGroup):
                if group.state == DEAD:
                    continue
                out.append(
                    {
                        "group_id": group_id,
                        "protocol_type": group.protocol_type or "",
                        "group_state": group.state,
                        "group_type": "classic",
                    }
                )
            else:
                out.append(
                    {
                        "group_id": group_id,
                        "protocol_type": "consumer",
                        "group_state": group.state,
                        "group_type": "consumer",
                    }
                )
        return out

    def delete_group(self, group_id: str, out: Out) -> int:
        code = self.check(group_id)
        if code != E.NONE:
            return code
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.state == DEAD):
            return E.GROUP_ID_NOT_FOUND
        if not group.is_empty:
            return E.NON_EMPTY_GROUP
        self._delete(group_id, out)
        return E.NONE

    # -- KIP-848 ------------------------------------------------------------------------------

    def consumer_heartbeat(
        self, group_id: str, req: HeartbeatRequest, topics: TopicsView, now_ms: int, out: Out
    ) -> dict[str, Any]:
        """ConsumerGroupHeartbeat; the group's changed records go to `out.records`."""
        code = self.check(group_id)
        if code != E.NONE:
            return heartbeat_error(code, None)
        group = self.groups.get(group_id)
        partition = self.partition_for(group_id)
        if isinstance(group, ClassicGroup):
            if group.is_empty and group.state != DEAD:
                # An empty classic group (offsets only) becomes a consumer group.
                if req.member_epoch == 0:
                    out.records.append((partition, group_key(group_id), None))
                group = None
            else:
                refusal = (
                    migration.upgrade_refusal(
                        self.config.migration_policy, group, self.config.consumer.max_size
                    )
                    if req.member_epoch == 0 and group.state != DEAD
                    else "the member is not joining"
                )
                if refusal is not None:
                    return heartbeat_error(
                        E.GROUP_ID_NOT_FOUND,
                        f"Cannot upgrade classic group {group_id} to consumer group "
                        f"because {refusal}.",
                    )
                group = migration.to_consumer_group(
                    group,
                    self.consumer_configs.get(group_id, self.config.consumer),
                    topics,
                    partition,
                    now_ms,
                    out,
                    out.records,
                )
                self.groups[group_id] = group
        if group is None:
            if req.member_epoch != 0:
                return heartbeat_error(E.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
            if len(self.groups) >= MAX_GROUPS:
                return heartbeat_error(E.COORDINATOR_NOT_AVAILABLE, "Too many groups.")
            group = ConsumerGroup(group_id, self.config.consumer)
            self.groups[group_id] = group
        group.config = self.consumer_configs.get(group_id, self.config.consumer)
        response = group.heartbeat(req, topics, now_ms)
        left = req.member_epoch == -1 and response["error_code"] == E.NONE
        if not (left and self._maybe_downgrade(group, topics, now_ms, out)):
            consumer_state.persist(group, partition, out.records)
        return response

    def _maybe_downgrade(
        self, group: ConsumerGroup, topics: TopicsView, now_ms: int, out: Out
    ) -> bool:
        """After members left: a group of classic members only becomes a classic
        group when the policy allows (migration.py); True if it did."""
        if not group.classic_only or not migration.downgrade_enabled(self.config.migration_policy):
            return False
        partition = self.partition_for(group.group_id)
        classic = migration.to_classic_group(
            group, self.config.limits, topics, partition, now_ms, out, out.records
        )
        if classic is None:
            return False
        self.groups[group.group_id] = classic
        self.flush_dirty(out)
        return True

    def consumer_describe(
        self, group_id: str, names_by_id: Mapping[Any, str], topics: TopicsView
    ) -> dict[str, Any]:
        code = self.check(group_id)
        group = self.groups.get(group_id) if code == E.NONE else None
        if isinstance(group, ConsumerGroup):
            return group.describe(names_by_id, topics)
        if code == E.NONE:
            code = E.GROUP_ID_NOT_FOUND
        message = (
            f"Group {group_id} is not a consumer group."
            if group is not None
            else f"Group {group_id} not found."
        )
        return {
            "error_code": code,
            "error_message": message if code == E.GROUP_ID_NOT_FOUND else None,
            "group_id": group_id,
            "group_state": "Dead",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": -(2**31),
        }

    # -- timers --------------------------------------------------------------------------------

    def tick(self, now_ms: int, topics: TopicsView, out: Out) -> None:
        for group in list(self.groups.values()):
            if isinstance(group, ClassicGroup):
                group.tick(now_ms, out)
            else:
                removed = group.tick(now_ms, topics)
                if not (removed and self._maybe_downgrade(group, topics, now_ms, out)):
                    consumer_state.persist(group, self.partition_for(group.group_id), out.records)
        self.flush_dirty(out)
