"""Transactional offset commits (TxnOffsetCommit) in the group coordinator.

Offsets a transactional producer commits for a group are *pending* until the
transaction's marker reaches the group's `__consumer_offsets` partition: on
COMMIT they become the group's committed offsets, on ABORT they are dropped.
They are written to `__consumer_offsets` right away as a transactional batch
carrying the producer id and epoch (as Kafka does), so a coordinator that
loads the partition replays them the same way: records of a transactional
batch are held per producer id until that producer's marker.

While an offset is pending, OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for it (KIP-447), so a consumer that takes over a
partition waits for the outcome instead of reading a stale offset.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..protocol.records import BatchHeader, InvalidRecords, Record, parse_control_record
from .records import OffsetKey, OffsetValue, decode_key, decode_offset_value
from .state import GroupState, TopicPartition

MAX_PENDING_PRODUCERS = 100_000


class PendingTxnOffsets:
    """producer id -> group -> (topic, partition) -> offset, until the marker."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetValue]]] = {}

    def add(self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetValue) -> bool:
        if producer_id not in self.pending and len(self.pending) >= MAX_PENDING_PRODUCERS:
            return False
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = value
        return True

    def is_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in groups.get(group_id, {}) for groups in self.pending.values())

    def complete(self, producer_id: int, commit: bool, core: GroupState) -> int:
        """Apply (commit) or drop (abort) a producer's pending offsets; returns how many."""
        groups = self.pending.pop(producer_id, {})
        if not commit:
            return 0
        count = 0
        for group_id, offsets in groups.items():
            core.materialize_offsets(group_id, offsets)
            count += len(offsets)
        return count

    def drop_partition(self, core: GroupState, partition: int) -> None:
        for groups in self.pending.values():
            for group_id in [g for g in groups if core.partition_for(g) == partition]:
                del groups[group_id]


def replay_batch(
    header: BatchHeader,
    records: list[Record],
    held: dict[int, list[tuple[bytes | None, bytes | None]]],
) -> Iterator[tuple[bytes | None, bytes | None]]:
    """The (key, value) records of one batch to apply now, holding transactional
    ones in ``held`` until their producer's marker (COMMIT releases, ABORT drops)."""
    if header.is_control:
        entries = held.pop(header.producer_id, [])
        if records:
            try:
                kind, _ = parse_control_record(records[0])
            except InvalidRecords:
                return
            if int(kind) == 1:
                yield from entries
        return
    if header.is_transactional:
        held.setdefault(header.producer_id, []).extend((r.key, r.value) for r in records)
        return
    for r in records:
        yield r.key, r.value


def held_to_pending(
    held: dict[int, list[tuple[bytes | None, bytes | None]]], pending: PendingTxnOffsets
) -> None:
    """Transactional offsets still open at the end of a load become pending."""
    for pid, entries in held.items():
        for key, value in entries:
            if key is None or value is None:
                continue
            k = decode_key(key)
            if isinstance(k, OffsetKey):
                pending.add(pid, k.group, (k.topic, k.partition), decode_offset_value(value))
