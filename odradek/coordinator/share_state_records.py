"""The records of `__share_group_state` (KIP-932's share coordinator), in
Kafka's ShareSnapshot formats.

Every record's key starts with an INT16 record type, as in Kafka's coordinator
records: 0 ShareSnapshot, 1 ShareUpdate. Big-endian throughout.

    key (type 0 or 1, key version 0, not flexible):
        type INT16, GroupId STRING (INT16 length + UTF-8),
        TopicId UUID (16 bytes), Partition INT32

    ShareSnapshotValue (INT16 value version 0, flexible):
        SnapshotEpoch INT32, StateEpoch INT32, LeaderEpoch INT32,
        StartOffset INT64, CreateTimestamp INT64, WriteTimestamp INT64,
        StateBatches COMPACT_ARRAY of
            (FirstOffset INT64, LastOffset INT64, DeliveryState INT8,
             DeliveryCount INT16, tagged fields),
        tagged fields

    ShareUpdateValue (INT16 value version 0, flexible):
        SnapshotEpoch INT32, LeaderEpoch INT32, StartOffset INT64 (-1: not
        changed), StateBatches as above, tagged fields

A COMPACT_ARRAY is an unsigned varint count + 1; a tagged-field section is an
unsigned varint count followed by (tag, size, bytes) triples: odradek writes
an empty section and skips the fields it does not know (Kafka 4.2's
DeliveryCompleteCount is tag 0). A null value is a tombstone: the state of the
share partition was deleted (DeleteShareGroupState). DeliveryState: 0
AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED.

The coordinator (share_coordinator.py) writes a ShareSnapshot, the whole state
of a share partition, for a key's first state, a reset and every
`share.coordinator.snapshot.update.records.per.snapshot` updates; between them
a ShareUpdate with the batches one write changed, combined over the state
before it on replay (share_state_batches.py).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from ..protocol.framing import encode_uvarint
from .consumer_records import _Reader as FlexibleReader
from .records import CorruptRecord

SNAPSHOT = 0
UPDATE = 1
KEY_VERSION = 0
VALUE_VERSION = 0
MAX_BATCHES = 100_000  # a bound on what one record may claim (guard against a corrupt count)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")

Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition)
Batch = tuple[int, int, int, int]  # (first offset, last offset, delivery count, state)


CorruptShareRecord = CorruptRecord


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[Batch, ...]
    create_ms: int = 0
    write_ms: int = 0


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[Batch, ...]


class _Reader(FlexibleReader):
    __slots__ = ()

    def batches(self) -> tuple[Batch, ...]:
        n = self.count()
        if n > MAX_BATCHES:
            raise CorruptShareRecord(f"bad batch count {n}")
        out = []
        for _ in range(n):
            first, last, state, count = _BATCH.unpack(self.raw(_BATCH.size))
            self.skip_tags()
            out.append((first, last, count, state))
        return tuple(out)


def encode_key(record_type: int, key: Key) -> bytes:
    group, topic_id, partition = key
    g = group.encode()
    return (_I16.pack(record_type) + _I16.pack(len(g)) + g + topic_id.bytes
            + _I32.pack(partition))


def decode_key(data: bytes) -> tuple[int, Key]:
    r = _Reader(data)
    record_type = r.i16()
    if record_type not in (SNAPSHOT, UPDATE):
        raise CorruptShareRecord(f"unknown record type {record_type}")
    group = r.required_string()
    return record_type, (group, r.uuid(), r.i32())


def _encode_batches(batches: tuple[Batch, ...]) -> bytes:
    out = bytearray(encode_uvarint(len(batches) + 1))
    for first, last, count, state in batches:
        out += _BATCH.pack(first, last, state, count)
        out += b"\x00"
    return bytes(out)


def encode_snapshot(s: ShareSnapshot) -> bytes:
    return (_I16.pack(VALUE_VERSION) + _I32.pack(s.snapshot_epoch) + _I32.pack(s.state_epoch)
            + _I32.pack(s.leader_epoch) + _I64.pack(s.start_offset) + _I64.pack(s.create_ms)
            + _I64.pack(s.write_ms) + _encode_batches(s.batches) + b"\x00")


def encode_update(u: ShareUpdate) -> bytes:
    return (_I16.pack(VALUE_VERSION) + _I32.pack(u.snapshot_epoch) + _I32.pack(u.leader_epoch)
            + _I64.pack(u.start_offset) + _encode_batches(u.batches) + b"\x00")


def decode_snapshot(data: bytes) -> ShareSnapshot:
    r = _Reader(data)
    if r.i16() != VALUE_VERSION:
        raise CorruptShareRecord("unknown ShareSnapshotValue version")
    snapshot_epoch, state_epoch, leader_epoch = r.i32(), r.i32(), r.i32()
    start, create_ms, write_ms = r.i64(), r.i64(), r.i64()
    batches = r.batches()
    r.skip_tags()
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start, batches,
                         create_ms, write_ms)


def decode_update(data: bytes) -> ShareUpdate:
    r = _Reader(data)
    if r.i16() != VALUE_VERSION:
        raise CorruptShareRecord("unknown ShareUpdateValue version")
    snapshot_epoch, leader_epoch, start = r.i32(), r.i32(), r.i64()
    batches = r.batches()
    r.skip_tags()
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches)
