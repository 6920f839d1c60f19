"""Partition reassignment (KIP-455): the controller's side, pure.

A reassignment moves a partition's replicas to a target list in three steps,
as Kafka's ``ReplicationControlManager`` does:

1. AlterPartitionReassignments writes a PartitionChangeRecord with
   ``replicas = target + removing`` (the target in its order, then the
   replicas leaving, ascending), ``adding_replicas = target - current`` and
   ``removing_replicas = current - target`` (both ascending). Brokers that
   became replicas create the partition and fetch from the leader.
2. The leader adds each new replica to the ISR when it has caught up
   (AlterPartition, `cluster_control.py`).
3. When the ISR minus the removing replicas holds every replica of the
   target, the change that made it so also completes the reassignment:
   ``replicas = target``, the removing replicas leave the ISR, both lists
   empty. A leader that is being removed hands leadership to the first target
   replica in the ISR that may lead. Brokers that are no longer replicas stop
   and delete their copy (the replica manager follows the image).

A change whose target is already in the ISR completes at once (a reorder, a
shrink). Whenever the replica list loses a broker the leader epoch goes up,
even with the same leader, so the leaving replica's fetches are fenced.

Cancelling (a null target) reverts: the adding replicas leave ``replicas``
and the ISR; should that empty the ISR, the first remaining replica becomes
the ISR, which is an unclean election and refused unless the topic allows
``unclean.leader.election.enable``.

A new target while a reassignment is in progress starts from the current
``replicas`` (the merged list), as Kafka does: a replica the previous target
was adding and the new one does not name is removed.

Errors are Kafka's: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT
(empty, duplicates, a broker that never registered; like Kafka a fenced but
registered broker is accepted, and the reassignment waits for it),
NO_REASSIGNMENT_IN_PROGRESS when cancelling none, and from v1
INVALID_REPLICATION_FACTOR when the target changes the replica count but the
request does not allow it (KIP-860).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import records as R
from .image import MetadataImage, PartitionImage, apply

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42
NO_REASSIGNMENT_IN_PROGRESS = 85
NO_LEADER = -1

# Kafka's bound on the records one user operation may write (MAX_RECORDS_PER_USER_OP).
MAX_PARTITIONS_PER_REQUEST = 10_000

UncleanPolicy = Callable[[MetadataImage, str], bool]
# (error code, error message or None)
Outcome = tuple[int, str | None]


def acceptable_leader(image: MetadataImage, broker_id: int) -> bool:
    """Kafka's LeaderAcceptor: registered, unfenced, not shutting down."""
    b = image.brokers.get(broker_id)
    return b is not None and not b.fenced and not b.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class ReplicaSets:
    """What a partition change aims at (Kafka's PartitionChangeBuilder targets)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def merge(current: Sequence[int], target: Sequence[int]) -> ReplicaSets:
    """Step 1's replica lists (Kafka's PartitionReassignmentReplicas); the ISR
    is left empty for the caller to fill."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return ReplicaSets(tuple(target) + removing, (), adding, removing)


def maybe_complete(sets: ReplicaSets) -> ReplicaSets:
    """Step 3: the sets after completion if the ISR allows it, else `sets`."""
    if not sets.adding and not sets.removing:
        return sets
    isr = tuple(r for r in sets.isr if r not in sets.removing)
    replicas = tuple(r for r in sets.replicas if r not in sets.removing)
    if not isr or not replicas or any(r not in isr for r in replicas):
        return sets
    return ReplicaSets(replicas, isr, (), ())


def revert(part: PartitionImage) -> tuple[ReplicaSets, bool]:
    """A cancel's target (Kafka's PartitionReassignmentRevert) and whether it
    needs an unclean election (every ISR member was being added)."""
    replicas = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r not in part.adding_replicas)
    unclean = not isr
    if unclean:
        assert replicas, "a reassignment never adds every replica"
        isr = (replicas[0],)
    return ReplicaSets(replicas, isr, (), ()), unclean


def change_record(
    image: MetadataImage,
    topic_id: str,
    part: PartitionImage,
    sets: ReplicaSets,
    unclean: bool = False,
) -> R.MetadataRecord | None:
    """The PartitionChangeRecord that takes `part` to `sets` (completing a
    reassignment the ISR allows), or None when nothing changes.

    Leadership: the current leader stays if it is in the new ISR and may lead;
    else the first replica of the new list in the ISR that may lead; with
    `unclean`, else the first replica that may lead (the ISR becomes just it).
    """
    sets = maybe_complete(sets)
    isr = sets.isr
    leader = part.leader
    if not (leader in isr and acceptable_leader(image, leader)):
        clean = [r for r in sets.replicas if r in isr and acceptable_leader(image, r)]
        if clean:
            leader = clean[0]
        elif unclean and (live := [r for r in sets.replicas if acceptable_leader(image, r)]):
            leader = live[0]
            isr = (leader,)
        else:
            leader = NO_LEADER
    lost_replica = any(r not in sets.replicas for r in part.replicas)
    bump = leader != part.leader or lost_replica
    changed_isr = isr != part.isr
    changed_replicas = sets.replicas != part.replicas
    changed_adding = sets.adding != part.adding_replicas
    changed_removing = sets.removing != part.removing_replicas
    if not (bump or changed_isr or changed_replicas or changed_adding or changed_removing):
        return None
    return R.partition_change_record(
        topic_id,
        part.partition,
        leader=leader if bump else None,
        leader_epoch=part.leader_epoch + 1 if bump else None,
        isr=list(isr) if changed_isr else None,
        replicas=list(sets.replicas) if changed_replicas else None,
        adding_replicas=list(sets.adding) if changed_adding else None,
        removing_replicas=list(sets.removing) if changed_removing else None,
    )


def _check_target(image: MetadataImage, target: Sequence[int]) -> str | None:
    """Kafka's validateManualPartitionAssignment: a message, or None if valid."""
    if not target:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for broker_id in sorted(target):
        if broker_id not in image.brokers:
            return (
                f"The manual partition assignment includes broker {broker_id}, but no "
                "such broker is registered."
            )
        if broker_id in seen:
            return (
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        seen.add(broker_id)
    return None


def alter(
    image: MetadataImage,
    requests: Sequence[tuple[str, int, Sequence[int] | None]],
    unclean_enabled: UncleanPolicy,
    allow_replication_factor_change: bool = True,
) -> tuple[list[Outcome], list[R.MetadataRecord]]:
    """AlterPartitionReassignments: one outcome per (topic, partition, target
    or None to cancel), in request order, and the records to append. Each
    partition's record is computed on the image the earlier ones produced."""
    if len(requests) > MAX_PARTITIONS_PER_REQUEST:
        message = f"More than {MAX_PARTITIONS_PER_REQUEST} partitions in one request."
        return [(INVALID_REQUEST, message)] * len(requests), []
    outcomes: list[Outcome] = []
    records: list[R.MetadataRecord] = []
    for topic_name, index, target in requests:
        topic = image.topics_by_name.get(topic_name)
        part = topic.partitions.get(index) if topic is not None else None
        if topic is None:
            outcomes.append(
                (UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic_name}.")
            )
            continue
        if part is None:
            outcomes.append(
                (UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic_name}:{index}.")
            )
            continue
        tid = str(topic.topic_id)
        if target is None:
            if not part.reassigning:
                outcomes.append(
                    (
                        NO_REASSIGNMENT_IN_PROGRESS,
                        "No partition reassignment is in progress for this topic or partition.",
                    )
                )
                continue
            sets, unclean = revert(part)
            allowed = unclean_enabled(image, topic_name)
            if unclean and not allowed:
                message = (
                    f"Unable to revert partition assignment for {topic_name}:{index} "
                    "because it would require an unclean leader election."
                )
                outcomes.append((INVALID_REPLICA_ASSIGNMENT, message))
                continue
            record = change_record(image, tid, part, sets, unclean=allowed)
        else:
            problem = _check_target(image, target)
            if problem is not None:
                outcomes.append((INVALID_REPLICA_ASSIGNMENT, problem))
                continue
            current_rf = len(part.replicas) - len(part.removing_replicas)
            if not allow_replication_factor_change and len(target) != current_rf:
                message = f"The replication factor is changed from {current_rf} to {len(target)}"
                outcomes.append((INVALID_REPLICATION_FACTOR, message))
                continue
            merged = merge(part.replicas, target)
            sets = ReplicaSets(merged.replicas, part.isr, merged.adding, merged.removing)
            record = change_record(image, tid, part, sets)
        outcomes.append((NONE, None))
        if record is not None:
            records.append(record)
            image = apply(image, [record], image.offset)
    return outcomes, records


@dataclass(frozen=True, slots=True)
class Ongoing:
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def ongoing(
    image: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None
) -> list[tuple[str, list[Ongoing]]]:
    """ListPartitionReassignments: the reassignments in progress, of every
    topic (None) or of the named partitions; unknown names are left out."""
    if topics is None:
        wanted = [(t.name, sorted(t.partitions)) for t in image.topics_by_name.values()]
    else:
        wanted = [(name, list(indexes)) for name, indexes in topics]
    out: list[tuple[str, list[Ongoing]]] = []
    for name, indexes in wanted:
        topic = image.topics_by_name.get(name)
        if topic is None:
            continue
        found = []
        for index in indexes:
            part = topic.partitions.get(index)
            if part is not None and part.reassigning:
                found.append(
                    Ongoing(index, part.replicas, part.adding_replicas, part.removing_replicas)
                )
        if found:
            out.append((name, found))
    return out
