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

Offsets retention (Kafka's rule): offsets of an empty group expire
`offsets.retention.minutes` after the later of the commit and the moment the
group became empty (for a group without a protocol, after the commit); in a
group with members, offsets of topics no member subscribes to expire after the
commit. An empty group with no offsets left is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import classic_members, consumer_state, migration
from . import errors as E
from .classic import (
    DEAD,
    EMPTY,
    ClassicGroup,
    Effects,
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
from .records import OffsetValue, group_key, group_value, offset_key, offset_value
from .state import (
    MAX_GROUPS,
    OFFSETS_TOPIC,
    CoordinatorConfig,
    Group,
    GroupState,
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

MAX_GROUP_ID_LENGTH = 32767


@dataclass(slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class Out(Effects):
    records: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)


class GroupCoordinator(GroupState):
    """The protocol over the state (`state.py`): every method takes time and requests
    and leaves its records in an `Out`."""

    def __init__(self, config: CoordinatorConfig) -> None:
        super().__init__(config)
        # TxnOffsetCommit offsets waiting for their transaction's marker.
        self.txn_offsets = PendingTxnOffsets()
        # KIP-848 group configs (GROUP config resources): group id -> its settings,
        # read at each heartbeat as Kafka's GroupConfigManager is
        self.consumer_configs: Mapping[str, ConsumerConfig] = {}

    # -- ownership -----------------------------------------------------------------------

    def coordinator_error(self, key: str) -> int:
        """NONE when this broker coordinates `key`'s partition (loaded or loading),
        else NOT_COORDINATOR: FindCoordinator answers this broker during a load."""
        p = self.partition_for(key)
        return E.NONE if p in self.loaded or p in self.loading else E.NOT_COORDINATOR

    def check(self, group_id: str | None) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        if len(group_id) > MAX_GROUP_ID_LENGTH:
            return E.INVALID_GROUP_ID
        p = self.partition_for(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.loaded:
            return E.NOT_COORDINATOR
        return E.NONE

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

    # -- offsets ----------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        commits: list[OffsetCommit],
        api_version: int,
        now_ms: int,
        out: Out,
    ) -> list[int]:
        code = self.check(group_id)
        if code == E.NONE:
            code = self._validate_commit(
                group_id, member_id, instance_id, generation, api_version, now_ms
            )
        if code != E.NONE:
            return [code] * len(commits)
        partition = self.partition_for(group_id)
        stored = self.offsets.setdefault(group_id, {})
        codes = []
        for c in commits:
            metadata = c.metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                codes.append(E.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetValue(c.offset, c.leader_epoch, metadata, now_ms)
            stored[(c.topic, c.partition)] = value
            out.records.append(
                (partition, offset_key(group_id, c.topic, c.partition), offset_value(value))
            )
            codes.append(E.NONE)
        return codes

    def _validate_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        api_version: int,
        now_ms: int,
    ) -> int:
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION
            if len(self.groups) >= MAX_GROUPS:
                return E.COORDINATOR_NOT_AVAILABLE
            self.groups[group_id] = ClassicGroup(group_id, self.config.limits, now_ms)
            return E.NONE
        if isinstance(group, ConsumerGroup):
            code = group.validate_offset_commit(member_id, generation)
            member = group.members.get(member_id)
            if api_version < 9 and member is not None and not member.is_classic and code in (
                    E.NONE, E.STALE_MEMBER_EPOCH):
                # a consumer-protocol member must commit with OffsetCommit v9+
                # (STALE_MEMBER_EPOCH came with v9); TxnOffsetCommit passes 9
                return E.UNSUPPORTED_VERSION
            return code
        if group.state == DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state == EMPTY:
            return E.NONE  # an admin commit: no member, no generation
        if group.state == "CompletingRebalance":
            return E.REBALANCE_IN_PROGRESS
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is not None and current != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        group.member_heartbeat_from_commit(member_id, now_ms)
        return E.NONE

    def fetch_offsets(
        self,
        group_id: str,
        wanted: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, dict[str, list[tuple[int, OffsetValue | None]]]]:
        """(group error, topic -> [(partition, committed offset or None)])."""
        code = self.check(group_id)
        if code != E.NONE:
            return code, {}
        group = self.groups.get(group_id)
        if member_id is not None and isinstance(group, ConsumerGroup):
            m = group.members.get(member_id)
            if m is None:
                return E.UNKNOWN_MEMBER_ID, {}
            if member_epoch != m.member_epoch:
                return E.STALE_MEMBER_EPOCH, {}
        stored = self.offsets.get(group_id, {})
        result: dict[str, list[tuple[int, OffsetValue | None]]] = {}
        if wanted is None:
            for (topic, p), value in sorted(stored.items()):
                result.setdefault(topic, []).append((p, value))
        else:
            for topic, parts in wanted:
                result.setdefault(topic, []).extend((p, stored.get((topic, p))) for p in parts)
        return E.NONE, result

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
                        "member_metadata": m.classic_protocols[0][1] if m.classic_protocols
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

    def _delete(self, group_id: str, out: Out) -> None:
        partition = self.partition_for(group_id)
        for topic, p in sorted(self.offsets.pop(group_id, {})):
            out.records.append((partition, offset_key(group_id, topic, p), None))
        group = self.groups.pop(group_id, None)
        if isinstance(group, ConsumerGroup):
            consumer_state.tombstones(group, partition, out.records)
            return
        if isinstance(group, ClassicGroup):
            group.mark_dead(out)
        out.records.append((partition, group_key(group_id), None))

    def delete_offsets(
        self, group_id: str, wanted: list[tuple[str, list[int]]], out: Out
    ) -> tuple[int, dict[str, list[tuple[int, int]]]]:
        code = self.check(group_id)
        if code != E.NONE:
            return code, {}
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.state == DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_empty:
            if isinstance(group, ClassicGroup):
                found = group.subscribed_topics()
                if found is None:
                    return E.NON_EMPTY_GROUP, {}
                subscribed = found
            else:
                subscribed = {t for m in group.members.values() for t in m.subscribed_topic_names}
        partition = self.partition_for(group_id)
        stored = self.offsets.get(group_id, {})
        result: dict[str, list[tuple[int, int]]] = {}
        for topic, parts in wanted:
            for p in parts:
                if topic in subscribed:
                    result.setdefault(topic, []).append((p, E.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if stored.pop((topic, p), None) is not None:
                    out.records.append((partition, offset_key(group_id, topic, p), None))
                result.setdefault(topic, []).append((p, E.NONE))
        return E.NONE, result

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

    def expire_offsets(self, now_ms: int, topics: TopicsView, out: Out) -> int:
        retention = self.config.offsets_retention_ms
        expired = 0
        for group_id in list(self.groups):
            group = self.groups[group_id]
            stored = self.offsets.get(group_id, {})
            if isinstance(group, ClassicGroup):
                if group.state == DEAD:
                    continue
                subscribed = None if group.is_empty else group.subscribed_topics()
                if not group.is_empty and subscribed is None:
                    continue  # not a consumer protocol: offsets stay while it has members
                since = group.state_timestamp_ms if group.is_empty and group.protocol_type else 0
            else:
                subscribed = None if group.is_empty else group.subscribed_topics(topics)
                since = 0
            partition = self.partition_for(group_id)
            for (topic, p), value in list(stored.items()):
                if subscribed is not None and topic in subscribed:
                    continue
                if max(value.commit_timestamp_ms, since) + retention <= now_ms:
                    del stored[(topic, p)]
                    out.records.append((partition, offset_key(group_id, topic, p), None))
                    expired += 1
            if not stored:
                self.offsets.pop(group_id, None)
                if group.is_empty and (not isinstance(group, ClassicGroup) or group.state == EMPTY):
                    self._delete(group_id, out)
        return expired
