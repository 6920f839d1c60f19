"""A KIP-848 consumer group as records in `__consumer_offsets`, and back.

`persist` appends the records that bring the log's view of a group up to its
state in memory; `tombstones` deletes the group from the log; `rebuild` makes
a group from the latest value of each of its keys (what a replay of the
partition leaves). Formats: consumer_records.py.

Rules:
- What the log holds for a group is `group.persisted` (key -> last written
  value). `persist` writes a key only when its value differs, and a tombstone
  only for a key it had written, so a heartbeat that changes nothing writes
  nothing and a group that never had a member writes nothing.
- Member records are rechecked only for `group.touched` members; target
  assignment records of every member are rechecked when the assignment epoch
  moved (the assignor ran).
- Order within one write, as Kafka's: tombstones of members that left
  (current assignment, target, metadata); then member metadata, group epoch,
  subscription metadata, target members, assignment epoch, current
  assignments. Replay takes the latest value per key, so a crash between two
  batches of one write leaves at worst a mix of two consecutive states.
- Session deadlines are not persisted: a loaded member gets a full
  `group.consumer.session.timeout.ms` from the load (Kafka does the same on
  coordinator failover), and a member loaded mid-revocation a full rebalance
  timeout to finish.
"""

from __future__ import annotations

import logging
from typing import Any

from . import consumer_records as R
from .consumer import (
    STATIC_LEAVE_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerConfig,
    ConsumerGroup,
    ConsumerMember,
)
from .records import CorruptRecord

log = logging.getLogger(__name__)

RecordOut = list[tuple[int, bytes, bytes | None]]
# Member record kinds in the order their tombstones are written.
MEMBER_TOMBSTONE_ORDER = (
    R.CURRENT_MEMBER_ASSIGNMENT,
    R.TARGET_ASSIGNMENT_MEMBER,
    R.MEMBER_METADATA,
)
GROUP_TOMBSTONE_ORDER = (R.TARGET_ASSIGNMENT_METADATA, R.PARTITION_METADATA, R.GROUP_METADATA)


def _head(group: ConsumerGroup) -> tuple[Any, ...]:
    return (group.group_epoch, group.assignment_epoch, group.metadata_fingerprint)


def _topics(group: ConsumerGroup) -> tuple[R.TopicMetadata, ...]:
    return tuple(R.TopicMetadata(tid, name, n) for name, tid, n in group.metadata_fingerprint)


def _member_value(m: ConsumerMember) -> bytes:
    return R.member_metadata_value(
        R.MemberMetadata(
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            tuple(m.subscribed_topic_names),
            m.subscribed_topic_regex,
            m.rebalance_timeout_ms,
            m.server_assignor,
            m.classic_session_timeout_ms,
            tuple(m.classic_protocols) if m.classic_protocols is not None else None,
        )
    )


def _current_value(m: ConsumerMember) -> bytes:
    # A static member that left for now is written with epoch -2, as Kafka
    # writes it; its real epoch goes in the previous epoch.
    epoch, previous = m.member_epoch, m.previous_member_epoch
    if m.left_static:
        epoch, previous = STATIC_LEAVE_EPOCH, m.member_epoch
    return R.current_assignment_value(
        R.CurrentAssignment(epoch, previous, m.state, m.assigned, m.pending_revocation)
    )


def persist(group: ConsumerGroup, partition: int, out: RecordOut) -> int:
    """Append to `out` what changed since the last call; returns how many records."""
    if not group.touched and group.persisted_head == _head(group):
        return 0
    if not group.members and not group.persisted:
        group.touched.clear()
        return 0  # never written, nothing to write yet
    written = group.persisted
    gid = group.group_id
    before = len(out)

    def put(kind: int, value: bytes | None, member_id: str | None = None) -> None:
        key = R.consumer_key(kind, gid, member_id)
        if value is None:
            if written.pop(key, None) is not None:
                out.append((partition, key, None))
        elif written.get(key) != value:
            written[key] = value
            out.append((partition, key, value))

    touched = sorted(group.touched)
    present = [group.members[mid] for mid in touched if mid in group.members]
    for mid in touched:
        if mid not in group.members:
            for kind in MEMBER_TOMBSTONE_ORDER:
                put(kind, None, mid)
    for m in present:
        put(R.MEMBER_METADATA, _member_value(m), m.member_id)
    put(R.GROUP_METADATA, R.group_metadata_value(group.group_epoch))
    put(R.PARTITION_METADATA, R.partition_metadata_value(_topics(group)))
    epoch_value = R.target_assignment_metadata_value(group.assignment_epoch)
    retarget = written.get(R.consumer_key(R.TARGET_ASSIGNMENT_METADATA, gid)) != epoch_value
    for m in group.members.values() if retarget else present:
        target = group.target.get(m.member_id, {})
        put(R.TARGET_ASSIGNMENT_MEMBER, R.target_assignment_member_value(target), m.member_id)
    put(R.TARGET_ASSIGNMENT_METADATA, epoch_value)
    for m in present:
        put(R.CURRENT_MEMBER_ASSIGNMENT, _current_value(m), m.member_id)
    group.touched.clear()
    group.persisted_head = _head(group)
    return len(out) - before


def tombstones(group: ConsumerGroup, partition: int, out: RecordOut) -> None:
    """Delete every record the group has in the log (group deleted or converted)."""
    keys = [R.decode_consumer_key(k) for k in group.persisted]
    members = sorted({k.member_id for k in keys if k is not None and k.member_id is not None})
    for mid in members:
        for kind in MEMBER_TOMBSTONE_ORDER:
            key = R.consumer_key(kind, group.group_id, mid)
            if key in group.persisted:
                out.append((partition, key, None))
    for kind in GROUP_TOMBSTONE_ORDER:
        key = R.consumer_key(kind, group.group_id)
        if key in group.persisted:
            out.append((partition, key, None))
    group.persisted = {}
    group.persisted_head = ()


def rebuild(
    group_id: str,
    values: dict[tuple[int, str | None], bytes],
    config: ConsumerConfig,
    now_ms: int,
) -> ConsumerGroup | None:
    """The group the latest values of its keys describe; None if it has no group
    epoch (deleted, or only stray member records)."""
    raw = values.get((R.GROUP_METADATA, None))
    if raw is None:
        return None
    group = ConsumerGroup(group_id, config)
    group.group_epoch = R.decode_epoch_value(raw)
    epoch_raw = values.get((R.TARGET_ASSIGNMENT_METADATA, None))
    group.assignment_epoch = R.decode_epoch_value(epoch_raw) if epoch_raw is not None else 0
    topics_raw = values.get((R.PARTITION_METADATA, None))
    if topics_raw is not None:
        group.metadata_fingerprint = tuple(
            sorted(
                (t.name, t.topic_id, t.num_partitions)
                for t in R.decode_partition_metadata_value(topics_raw)
            )
        )
    member_ids = {mid for (_, mid) in values if mid is not None}
    for mid in sorted(member_ids):
        try:
            found = _member(mid, values, config, now_ms)
        except (CorruptRecord, UnicodeDecodeError) as e:
            log.warning("group %r member %r: a record does not parse: %s", group_id, mid, e)
            found = None
        if found is None:
            group.touched.add(mid)  # stray or bad records: tombstoned at the next write
            continue
        m, target = found
        if target is not None:
            group.target[mid] = target
        group.members[mid] = m
        if m.instance_id is not None:
            group.static_members[m.instance_id] = mid
    group.assignor_name = group.pick_assignor()
    group.persisted = {R.consumer_key(kind, group_id, mid): v for (kind, mid), v in values.items()}
    group.persisted_head = _head(group)
    return group


def _member(
    mid: str, values: dict[tuple[int, str | None], bytes], config: ConsumerConfig, now_ms: int
) -> tuple[ConsumerMember, dict[Any, set[int]] | None] | None:
    """A member and its target from its records; None without member metadata."""
    meta_raw = values.get((R.MEMBER_METADATA, mid))
    if meta_raw is None:
        return None
    md = R.decode_member_metadata_value(meta_raw)
    m = ConsumerMember(
        mid,
        md.instance_id,
        md.rack_id,
        md.client_id,
        md.client_host,
        md.rebalance_timeout_ms,
        list(md.subscribed_topic_names),
        md.subscribed_topic_regex,
        md.server_assignor,
        session_deadline_ms=now_ms + (md.classic_session_timeout_ms or config.session_timeout_ms),
        classic_session_timeout_ms=md.classic_session_timeout_ms,
        classic_protocols=list(md.classic_protocols) if md.classic_protocols is not None else None,
    )
    current_raw = values.get((R.CURRENT_MEMBER_ASSIGNMENT, mid))
    if current_raw is not None:
        a = R.decode_current_assignment_value(current_raw)
        m.member_epoch, m.previous_member_epoch = a.member_epoch, a.previous_member_epoch
        if a.member_epoch == STATIC_LEAVE_EPOCH:
            m.left_static = True
            m.member_epoch = a.previous_member_epoch
        m.state = a.state
        m.assigned = a.assigned
        m.pending_revocation = a.pending_revocation
        if m.state == UNREVOKED_PARTITIONS:
            m.revocation_deadline_ms = now_ms + max(m.rebalance_timeout_ms, 0)
    target_raw = values.get((R.TARGET_ASSIGNMENT_MEMBER, mid))
    target = R.decode_target_assignment_member_value(target_raw) if target_raw else None
    return m, target
