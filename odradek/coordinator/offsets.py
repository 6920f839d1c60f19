"""Committed offsets of the groups: commit, fetch, delete and expire, over `GroupState`.

`GroupCoordinator` (`core.py`) adds the group protocols (classic and KIP-848) on top of
this class; both sides record their changes in an `Out`, as records for the group's
`__consumer_offsets` partition. Like the rest of the core, nothing here reads a clock or
touches a file.

Offsets retention (Kafka's rule): offsets of an empty group expire
`offsets.retention.minutes` after the later of the commit and the moment the group became
empty (for a group without a protocol, after the commit); in a group with members, offsets
of topics no member subscribes to expire after the commit. An empty group with no offsets
left is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import consumer_state
from . import errors as E
from .classic import DEAD, EMPTY, ClassicGroup, Effects
from .consumer import ConsumerGroup, TopicsView
from .records import OffsetValue, group_key, offset_key, offset_value
from .state import MAX_GROUPS, GroupState


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


class OffsetsState(GroupState):
    """Committed offsets, and the deletion of a group with its offsets."""

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
            if (
                api_version < 9
                and member is not None
                and not member.is_classic
                and code in (E.NONE, E.STALE_MEMBER_EPOCH)
            ):
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
