"""The share coordinator (KIP-932): the durable state of share partitions,
kept in `__share_group_state`. Sans-I/O: the shell is
share_coordinator_service.py, the records share_state_records.py.

Theory of operation. A share partition, keyed (group, topic id, partition),
is coordinated by the leader of partition
`abs(java hashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions`
of `__share_group_state` (topic id in Kafka's base64 form, as Kafka's
SharePartitionKey). The coordinator holds, for the partitions of that topic it
leads, the latest state of every share partition: its start offset (SPSO), its
state batches (first, last, delivery count, state), its state epoch and the
leader epoch of the share-partition leader that last wrote or read it. Every
change is a record returned to the shell, which appends it and answers only
once the ISR has it; the in-memory state is always the replay of the log (the
coordinator's writes are applied by the same `apply` that replays a load).

The records, as Kafka's share coordinator writes them (share_state_records.py):
a ShareSnapshot holds a key's whole state; a ShareUpdate holds what one write
changed (the state batches whose count or state changed, the start offset if it
moved, else -1, the leader epoch) and is combined with the state before it on
replay (share_state_batches.combine). A key's first state, an Initialize, a
write with a higher state epoch (a reset) and every write after
`share.coordinator.snapshot.update.records.per.snapshot` updates of the key
write a snapshot; the other writes, and a Read that records a higher leader
epoch, write an update; a write that changes nothing writes nothing. So a
write's record is as small as its change, not as large as the state, and a load
replays a key's last snapshot and at most that many updates after it.

`__share_group_state` is not compacted (cleanup.policy=delete, as KIP-932):
all updates of a key share one record key, so a cleaner would keep only the
last. The shell instead deletes, every
`share.coordinator.state.topic.prune.interval.ms`, the records below the
earliest last snapshot of the partition's keys (`redundant_offset`, as Kafka's
ShareCoordinatorOffsetsManager); every
`share.coordinator.cold.partition.snapshot.interval.ms` it snapshots again the
keys whose last snapshot is that old (`cold_snapshots`), so a quiet key does not
hold that offset back. A topic an older odradek created compacted gets snapshots
only (`snapshots_only`).

The requests (inter-broker, from share-partition leaders):

    Initialize(state epoch, start offset)  -- a new state (or a reset: a higher
                                              state epoch replaces the old one)
    Read(leader epoch)                     -- the state; a higher leader epoch
                                              is recorded (fences the old leader)
    Write(state epoch, leader epoch, start offset, batches)
                                           -- batches laid over the stored ones
    Delete                                 -- a tombstone
    ReadSummary(leader epoch)              -- start offset and epochs only

Fencing, as Kafka's share coordinator: a Read or Write with a leader epoch
below the stored one is FENCED_LEADER_EPOCH (a deposed leader cannot fork the
state), a Write with a state epoch below the stored one FENCED_STATE_EPOCH
(the state was reset meanwhile). A key whose partition is not loaded here is
NOT_COORDINATOR; one being loaded COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from . import errors as E
from .share_state_batches import changed, combine, prune
from .share_state_records import (
    SNAPSHOT,
    UPDATE,
    Batch,
    Key,
    ShareSnapshot,
    ShareUpdate,
    decode_key,
    encode_key,
    encode_snapshot,
    encode_update,
)
from .state import java_string_hashcode

SHARE_STATE_TOPIC = "__share_group_state"
FENCED_LEADER_EPOCH = 74
FENCED_STATE_EPOCH = 124
UNINITIALIZED = -1  # the start offset of a share partition with no state

Record = tuple[int, bytes, bytes | None]  # (partition of the topic, key, value)


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_key(text: str) -> Key | None:
    """A FindCoordinator key of type SHARE, "group:topicId:partition" (Kafka's
    SharePartitionKey string); None when malformed."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        return parts[0], uuid.UUID(bytes=raw), int(parts[2])
    except ValueError:
        return None


def partition_for(key: Key, num_partitions: int) -> int:
    group, topic_id, partition = key
    h = java_string_hashcode(f"{group}:{kafka_uuid(topic_id)}:{partition}")
    return (0 if h == -(2**31) else abs(h)) % num_partitions


@dataclass(slots=True)
class ShareCoordinator:
    num_partitions: int
    # share.coordinator.snapshot.update.records.per.snapshot: ShareUpdate records
    # written for a key before its next write is a ShareSnapshot again
    updates_per_snapshot: int = 500
    states: dict[Key, ShareSnapshot] = field(default_factory=dict)
    loaded: set[int] = field(default_factory=set)
    loading: set[int] = field(default_factory=set)
    update_count: dict[Key, int] = field(default_factory=dict)  # updates since the last snapshot
    # (offset, is a tombstone) of a key's snapshot records from its last committed
    # one on: the ones above the high watermark may yet be lost with the leader
    snapshot_offsets: dict[Key, list[tuple[int, bool]]] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)  # partition: offset after its last record
    # the topic is compacted (made so by an older odradek): the cleaner keeps only the
    # last ShareUpdate of a key, so only snapshots are written
    snapshots_only: bool = False

    def partition_for(self, key: Key) -> int:
        return partition_for(key, self.num_partitions)

    def coordinator_error(self, key: Key) -> int:
        p = self.partition_for(key)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE if p in self.loaded else E.NOT_COORDINATOR

    # -- replay -----------------------------------------------------------------------
    def apply(self, record_type: int, key: Key, value: object | None) -> None:
        """One record of `__share_group_state` applied to the state, as Kafka's
        ShareCoordinatorShard replays it: a snapshot replaces the key's state, an
        update is combined with it (share_state_batches.combine), a null snapshot
        deletes it. The coordinator's own writes go through here too, so the state
        in memory is always the replay of the log."""
        if record_type == SNAPSHOT:
            if value is None:
                self.states.pop(key, None)
                self.update_count.pop(key, None)
            elif isinstance(value, ShareSnapshot):
                self.states[key] = value
                self.update_count[key] = 0
            return
        if record_type != UPDATE or not isinstance(value, ShareUpdate):
            return
        old = self.states.get(key)
        if old is None:
            return  # an update without its snapshot: nothing to lay it over
        start = value.start_offset if value.start_offset != -1 else old.start_offset
        leader = value.leader_epoch if value.leader_epoch != -1 else old.leader_epoch
        self.states[key] = ShareSnapshot(
            old.snapshot_epoch, old.state_epoch, leader, start,
            combine(old.batches, value.batches, start), old.create_ms, old.write_ms)
        self.update_count[key] = self.update_count.get(key, 0) + 1

    def _seen(self, partition: int, offset: int, record_type: int, key: Key,
              deleted: bool) -> None:
        if record_type == SNAPSHOT:
            self.snapshot_offsets.setdefault(key, []).append((offset, deleted))
        self.next_offsets[partition] = offset + 1

    def _committed(self, key: Key, high_watermark: int) -> int | None:
        """Forget the key's snapshots that a committed later one (below the high
        watermark) replaces; the offset its records are needed from, None when a
        committed tombstone ended it."""
        seen = self.snapshot_offsets[key]
        last = max((i for i, (o, _) in enumerate(seen) if o < high_watermark), default=0)
        del seen[:last]
        if len(seen) == 1 and seen[0][1] and seen[0][0] < high_watermark:
            del self.snapshot_offsets[key]
            return None
        return seen[0][0]

    def load(self, partition: int,
             records: Iterable[tuple[int, int, Key, object | None]]) -> int:
        """Replay (offset, record type, key, decoded value or None) of one partition."""
        n = 0
        for offset, record_type, key, value in records:
            n += 1
            self.apply(record_type, key, value)
            self._seen(partition, offset, record_type, key, value is None)
        self.loaded.add(partition)
        self.loading.discard(partition)
        return n

    def appended(self, partition: int, first_offset: int, out: list[Record],
                 high_watermark: int) -> None:
        """The records of `out` are in the log from `first_offset` on."""
        for i, (_, k, v) in enumerate(out):
            record_type, key = decode_key(k)
            self._seen(partition, first_offset + i, record_type, key, v is None)
            if record_type == SNAPSHOT:
                self._committed(key, high_watermark)  # keeps the list short

    def redundant_offset(self, partition: int, high_watermark: int) -> int:
        """The offset below which the partition's records are not needed to rebuild
        its states (Kafka's ShareCoordinatorOffsetsManager): the earliest, over
        its keys, of the last snapshot below the high watermark -- a later one
        may still be lost with this leader -- and never above the high
        watermark; -1 when nothing is known."""
        needed = [self._committed(k, high_watermark) for k in list(self.snapshot_offsets)
                  if self.partition_for(k) == partition]
        offsets = [o for o in needed if o is not None]
        upto = min(offsets) if offsets else self.next_offsets.get(partition, -1)
        return min(upto, high_watermark)

    def unload(self, partition: int) -> None:
        self.loaded.discard(partition)
        self.loading.discard(partition)
        self.next_offsets.pop(partition, None)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]
        for keyed in (self.update_count, self.snapshot_offsets):
            for key in [k for k in keyed if self.partition_for(k) == partition]:
                del keyed[key]

    def keys_of(self, group: str) -> list[Key]:
        return sorted((k for k in self.states if k[0] == group),
                      key=lambda k: (str(k[1]), k[2]))

    # -- writing ----------------------------------------------------------------------
    def _snapshot(self, key: Key, state: ShareSnapshot, out: list[Record]) -> None:
        out.append((self.partition_for(key), encode_key(SNAPSHOT, key), encode_snapshot(state)))
        self.apply(SNAPSHOT, key, state)

    def _change(self, key: Key, old: ShareSnapshot, leader_epoch: int, start_offset: int,
                batches: Iterable[Batch], now_ms: int, out: list[Record]) -> None:
        """A change of a stored state within its state epoch: a ShareUpdate record
        holding what changed, or a ShareSnapshot of the whole state when the key
        has had `updates_per_snapshot` updates since its last snapshot."""
        merged = combine(old.batches, batches, start_offset)
        if self.snapshots_only or self.update_count.get(key, 0) >= self.updates_per_snapshot:
            self._snapshot(key, ShareSnapshot(
                old.snapshot_epoch + 1, old.state_epoch, leader_epoch, start_offset, merged,
                now_ms, now_ms), out)
            return
        delta = changed(prune(old.batches, start_offset), merged)
        start = start_offset if start_offset != old.start_offset else -1
        if not delta and start == -1 and leader_epoch == old.leader_epoch:
            return  # nothing changed: nothing to write
        update = ShareUpdate(old.snapshot_epoch, leader_epoch, start, delta)
        out.append((self.partition_for(key), encode_key(UPDATE, key), encode_update(update)))
        self.apply(UPDATE, key, update)

    # -- requests ---------------------------------------------------------------------
    def initialize(self, key: Key, state_epoch: int, start_offset: int, now_ms: int,
                   out: list[Record]) -> int:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return FENCED_STATE_EPOCH
        self._snapshot(key, ShareSnapshot(
            (old.snapshot_epoch + 1) if old else 0, state_epoch,
            old.leader_epoch if old else -1, start_offset, (), now_ms, now_ms), out)
        return E.NONE

    def read(self, key: Key, leader_epoch: int, now_ms: int,
             out: list[Record]) -> tuple[int, ShareSnapshot | None]:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code, None
        old = self.states.get(key)
        if old is None:
            return E.NONE, None
        if leader_epoch >= 0 and leader_epoch < old.leader_epoch:
            return FENCED_LEADER_EPOCH, None
        if leader_epoch > old.leader_epoch:
            self._change(key, old, leader_epoch, old.start_offset, (), now_ms, out)
        return E.NONE, self.states[key]

    def summary(self, key: Key) -> tuple[int, ShareSnapshot | None]:
        code = self.coordinator_error(key)
        return code, (self.states.get(key) if code == E.NONE else None)

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Iterable[Batch], now_ms: int, out: list[Record]) -> int:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code
        old = self.states.get(key)
        if old is not None:
            if leader_epoch >= 0 and leader_epoch < old.leader_epoch:
                return FENCED_LEADER_EPOCH
            if state_epoch < old.state_epoch:
                return FENCED_STATE_EPOCH
        if start_offset < 0:
            if old is None:
                return E.INVALID_REQUEST  # no start offset and none stored
            start_offset = old.start_offset
        leader = max(leader_epoch, old.leader_epoch if old else -1)
        if old is None or state_epoch > old.state_epoch:
            # the first state of the key, or a reset (a higher state epoch): a
            # snapshot of the request's batches alone
            self._snapshot(key, ShareSnapshot(
                (old.snapshot_epoch + 1) if old else 0, state_epoch, leader, start_offset,
                combine((), batches, start_offset), now_ms, now_ms), out)
        else:
            self._change(key, old, leader, start_offset, batches, now_ms, out)
        return E.NONE

    def cold_snapshots(self, partition: int, now_ms: int, interval_ms: int,
                       out: list[Record]) -> int:
        """Kafka's snapshotColdPartitions: a new snapshot (the same state, the
        next snapshot epoch, written now) of each key of the partition whose last
        snapshot is `interval_ms` old, so that a quiet key does not hold the
        redundant offset back for ever; nothing when every key's last snapshot
        already is such a one (its create and write times differ): the partition
        is quiet. The number of snapshots."""
        keys = [k for k in self.states if self.partition_for(k) == partition]
        if all(self.states[k].create_ms != self.states[k].write_ms for k in keys):
            return 0
        n = 0
        for key in keys:
            s = self.states[key]
            if now_ms - s.write_ms >= interval_ms:
                self._snapshot(key, replace(s, snapshot_epoch=s.snapshot_epoch + 1,
                                            write_ms=now_ms), out)
                n += 1
        return n

    def delete(self, key: Key, out: list[Record]) -> int:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code
        if key in self.states:
            out.append((self.partition_for(key), encode_key(SNAPSHOT, key), None))
            self.apply(SNAPSHOT, key, None)
        return E.NONE
