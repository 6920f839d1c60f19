"""KIP-848 online migration: a classic group becomes a consumer group, and back.

Theory of operation (KIP-848's "Online migration", Kafka's GroupMetadataManager):

- Upgrade. A ConsumerGroupHeartbeat that joins a classic group with members
  turns it into a consumer group, if `group.consumer.migration.policy` allows
  upgrades, the group uses the embedded "consumer" protocol and its size fits
  `group.consumer.max.size`; otherwise the heartbeat is answered
  GROUP_ID_NOT_FOUND. Each classic member becomes a consumer-group member that
  keeps speaking the classic protocol (classic_members.py): its epoch is the
  classic generation, its assignment (and target) what the leader gave it, its
  subscription what its JoinGroup metadata says. The group epoch starts at the
  generation; the joining member then bumps it, so every classic member is told
  REBALANCE_IN_PROGRESS at its next heartbeat and rejoins into the new target.
- Downgrade. When members remain but all of them speak the classic protocol
  after a KIP-848 member left (LeaveGroup epoch -1, session or revocation
  timeout), the group turns back into a classic group, if the policy allows
  downgrades: generation = group epoch, every member's assignment as it owns it
  now, and a rebalance starts at once so the members rejoin under the classic
  protocol.
- Empty groups convert either way whatever the policy (core.py).

The committed offsets are records of their own and are not touched: a switch
writes the tombstones of the old group's records and the new group's records.
Nothing here reads a clock; `now_ms` and the topic view are arguments.
"""

from __future__ import annotations

from . import consumer_state
from . import errors as E
from .classic import STABLE, ClassicGroup, ClassicMember, Effects, GroupLimits
from .consumer import ConsumerConfig, ConsumerGroup, ConsumerMember, TopicsView
from .consumer_protocol import assigned_partitions, encode_assignment, parse_subscription
from .records import group_key

BIDIRECTIONAL = "bidirectional"
UPGRADE = "upgrade"
DOWNGRADE = "downgrade"
DISABLED = "disabled"
POLICIES = (BIDIRECTIONAL, UPGRADE, DOWNGRADE, DISABLED)

RecordOut = list[tuple[int, bytes, bytes | None]]


def upgrade_enabled(policy: str) -> bool:
    return policy in (BIDIRECTIONAL, UPGRADE)


def downgrade_enabled(policy: str) -> bool:
    return policy in (BIDIRECTIONAL, DOWNGRADE)


def upgrade_refusal(policy: str, group: ClassicGroup, max_size: int) -> str | None:
    """Why `group` may not become a consumer group now; None when it may."""
    if not upgrade_enabled(policy):
        return "the online upgrade is disabled"
    if group.subscribed_topics() is None:
        return "the group does not use the consumer embedded protocol"
    if len(group.members) > max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def to_consumer_group(
    classic: ClassicGroup,
    config: ConsumerConfig,
    topics: TopicsView,
    partition: int,
    now_ms: int,
    fx: Effects,
    records: RecordOut,
) -> ConsumerGroup:
    """The consumer group `classic` becomes (its members stay classic ones). The
    caller writes the new group's records (consumer_state.persist)."""
    classic.fail_waiting(E.REBALANCE_IN_PROGRESS, fx)
    records.append((partition, group_key(classic.group_id), None))
    group = ConsumerGroup(classic.group_id, config)
    group.group_epoch = group.assignment_epoch = classic.generation
    for cm in classic.members.values():
        parsed = parse_subscription(cm.metadata_for(classic.protocol_name))
        names, _, rack = parsed if parsed is not None else ([], {}, None)
        owned = assigned_partitions(cm.assignment) or {}
        assigned = {topics[t][0]: set(ps) for t, ps in owned.items() if t in topics and ps}
        m = ConsumerMember(
            cm.member_id,
            cm.group_instance_id,
            rack,
            cm.client_id,
            cm.client_host,
            cm.rebalance_timeout_ms,
            sorted(set(names)),
            None,
            None,
            member_epoch=classic.generation,
            previous_member_epoch=classic.generation,
            assigned=assigned,
            session_deadline_ms=now_ms + cm.session_timeout_ms,
            classic_session_timeout_ms=cm.session_timeout_ms,
            classic_protocols=list(cm.protocols),
        )
        group.members[m.member_id] = m
        if m.instance_id is not None:
            group.static_members[m.instance_id] = m.member_id
        group.target[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
        group.touched.add(m.member_id)
    return group


def _common_protocol(group: ConsumerGroup) -> str | None:
    """The first protocol of the first member that every member supports."""
    members = list(group.members.values())
    common = set.intersection(*({n for n, _ in m.classic_protocols or []} for m in members))
    for name, _ in members[0].classic_protocols or []:
        if name in common:
            return name
    return None


def to_classic_group(
    group: ConsumerGroup,
    limits: GroupLimits,
    topics: TopicsView,
    partition: int,
    now_ms: int,
    fx: Effects,
    records: RecordOut,
) -> ClassicGroup | None:
    """The classic group a consumer group of classic members only becomes, in a
    rebalance; None when they share no protocol or are too many (no downgrade)."""
    assert group.classic_only
    protocol = _common_protocol(group)
    if protocol is None or len(group.members) > limits.max_size:
        return None
    names = {tid: name for name, (tid, _) in topics.items()}
    consumer_state.tombstones(group, partition, records)
    classic = ClassicGroup(group.group_id, limits, now_ms)
    classic.generation = group.group_epoch
    classic.protocol_type = "consumer"
    classic.protocol_name = protocol
    classic.state = STABLE
    for m in group.members.values():
        session_ms = m.classic_session_timeout_ms or limits.min_session_timeout_ms
        assignment = {names[t]: sorted(ps) for t, ps in m.assigned.items() if t in names}
        classic.members[m.member_id] = ClassicMember(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            session_ms,
            m.rebalance_timeout_ms,
            list(m.classic_protocols or []),
            encode_assignment(assignment),
            heartbeat_deadline_ms=now_ms + session_ms,
        )
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    classic.leader_id = next(iter(classic.members))
    fx.dirty.add(group.group_id)
    classic.rebalance(now_ms, fx)
    return classic
