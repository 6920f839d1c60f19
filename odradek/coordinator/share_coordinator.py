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
once the ISR has it; the in-memory state is always the replay of the log.

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
from dataclasses import dataclass, field

from . import errors as E
from .share_state_records import (
    SNAPSHOT,
    UPDATE,
    Batch,
    Key,
    ShareSnapshot,
    ShareUpdate,
    encode_key,
    encode_snapshot,
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


def overlay(old: Iterable[Batch], new: Iterable[Batch], start_offset: int) -> tuple[Batch, ...]:
    """`new` laid over `old` (a new batch wins where they overlap), cut below
    `start_offset`; sorted by first offset."""
    new = sorted(new)
    kept: list[Batch] = []
    for first, last, count, state in old:
        pieces = [(first, last)]
        for nf, nl, _, _ in new:
            nxt = []
            for a, b in pieces:
                if nl < a or nf > b:
                    nxt.append((a, b))
                    continue
                if a < nf:
                    nxt.append((a, nf - 1))
                if nl < b:
                    nxt.append((nl + 1, b))
            pieces = nxt
        kept.extend((a, b, count, state) for a, b in pieces)
    out = []
    for first, last, count, state in sorted(kept + new):
        if last < start_offset:
            continue
        out.append((max(first, start_offset), last, count, state))
    return tuple(out)


@dataclass(slots=True)
class ShareCoordinator:
    num_partitions: int
    states: dict[Key, ShareSnapshot] = field(default_factory=dict)
    loaded: set[int] = field(default_factory=set)
    loading: set[int] = field(default_factory=set)

    def partition_for(self, key: Key) -> int:
        return partition_for(key, self.num_partitions)

    def coordinator_error(self, key: Key) -> int:
        p = self.partition_for(key)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE if p in self.loaded else E.NOT_COORDINATOR

    # -- loading ----------------------------------------------------------------------
    def load(self, partition: int, records: Iterable[tuple[int, Key, object | None]]) -> int:
        """Replay (record type, key, decoded value or None) of one partition."""
        n = 0
        for record_type, key, value in records:
            n += 1
            if value is None:
                if record_type == SNAPSHOT:
                    self.states.pop(key, None)
                continue
            if record_type == SNAPSHOT and isinstance(value, ShareSnapshot):
                self.states[key] = value
            elif record_type == UPDATE and isinstance(value, ShareUpdate):
                old = self.states.get(key)
                if old is None:
                    continue  # an update without its snapshot: nothing to lay it over
                start = value.start_offset if value.start_offset >= 0 else old.start_offset
                self.states[key] = ShareSnapshot(
                    old.snapshot_epoch, old.state_epoch, max(old.leader_epoch,
                                                             value.leader_epoch),
                    start, overlay(old.batches, value.batches, start),
                    old.create_ms, old.write_ms)
        self.loaded.add(partition)
        self.loading.discard(partition)
        return n

    def unload(self, partition: int) -> None:
        self.loaded.discard(partition)
        self.loading.discard(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]

    def keys_of(self, group: str) -> list[Key]:
        return sorted((k for k in self.states if k[0] == group),
                      key=lambda k: (str(k[1]), k[2]))

    # -- requests ---------------------------------------------------------------------
    def _put(self, key: Key, state: ShareSnapshot, out: list[Record]) -> None:
        self.states[key] = state
        out.append((self.partition_for(key), encode_key(SNAPSHOT, key), encode_snapshot(state)))

    def initialize(self, key: Key, state_epoch: int, start_offset: int, now_ms: int,
                   out: list[Record]) -> int:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return FENCED_STATE_EPOCH
        self._put(key, ShareSnapshot(
            (old.snapshot_epoch + 1) if old else 0, state_epoch,
            old.leader_epoch if old else -1, start_offset, (),
            old.create_ms if old else now_ms, now_ms), out)
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
            self._put(key, ShareSnapshot(old.snapshot_epoch + 1, old.state_epoch, leader_epoch,
                                         old.start_offset, old.batches, old.create_ms,
                                         now_ms), out)
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
        kept = () if old is None or state_epoch > old.state_epoch else old.batches
        merged = overlay(kept, batches, start_offset)
        self._put(key, ShareSnapshot(
            (old.snapshot_epoch + 1) if old else 0, state_epoch,
            max(leader_epoch, old.leader_epoch if old else -1), start_offset, merged,
            old.create_ms if old else now_ms, now_ms), out)
        return E.NONE

    def delete(self, key: Key, out: list[Record]) -> int:
        code = self.coordinator_error(key)
        if code != E.NONE:
            return code
        if self.states.pop(key, None) is not None:
            out.append((self.partition_for(key), encode_key(SNAPSHOT, key), None))
        return E.NONE
