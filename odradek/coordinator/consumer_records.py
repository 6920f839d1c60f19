"""KIP-848 consumer group records of `__consumer_offsets`, in Kafka's formats.

A consumer group (ConsumerGroupHeartbeat) is six kinds of record. The key
version says which; keys are non-flexible (int16 version, then STRING = int16
length + UTF-8), as in Kafka's `ConsumerGroup*Key.json`:

    key 3  ConsumerGroupMetadataKey:              group STRING
    key 4  ConsumerGroupPartitionMetadataKey:     group STRING
    key 5  ConsumerGroupMemberMetadataKey:        group STRING, memberId STRING
    key 6  ConsumerGroupTargetAssignmentMetadataKey: group STRING
    key 7  ConsumerGroupTargetAssignmentMemberKey: group STRING, memberId STRING
    key 8  ConsumerGroupCurrentMemberAssignmentKey: group STRING, memberId STRING

Values are int16 value version 0, then the struct in Kafka's *flexible*
encoding: UVARINT = unsigned LEB128; COMPACT_STRING = UVARINT(len + 1) +
UTF-8, 0 for null; COMPACT_ARRAY = UVARINT(count + 1) + items; UUID = 16
bytes; every struct (the value itself and each nested one) ends with its
tagged fields, UVARINT(count) then (UVARINT tag, UVARINT size, bytes) each.
odradek writes one tagged field, the classic member metadata of record 5
(below), and skips any other it reads (Kafka 4.1's MetadataHash, KIP-1251's
AssignmentEpochs).

    3 ConsumerGroupMetadataValue:        epoch INT32 (the group epoch)
    4 ConsumerGroupPartitionMetadataValue: topics COMPACT_ARRAY of
          (topicId UUID, topicName COMPACT_STRING, numPartitions INT32,
           partitionMetadata COMPACT_ARRAY of (partition INT32, racks []COMPACT_STRING))
    5 ConsumerGroupMemberMetadataValue:  instanceId, rackId COMPACT_NULLABLE_STRING,
          clientId, clientHost COMPACT_STRING, subscribedTopicNames []COMPACT_STRING,
          subscribedTopicRegex COMPACT_NULLABLE_STRING, rebalanceTimeoutMs INT32,
          serverAssignor COMPACT_NULLABLE_STRING,
          tag 0 (classic members only, KIP-848 migration): ClassicMemberMetadata,
          a nullable struct: INT8 1 (present), sessionTimeoutMs INT32,
          supportedProtocols COMPACT_ARRAY of (name COMPACT_STRING,
          metadata COMPACT_BYTES, tags), tags
    6 ConsumerGroupTargetAssignmentMetadataValue: assignmentEpoch INT32
    7 ConsumerGroupTargetAssignmentMemberValue: topicPartitions []TopicPartitions
    8 ConsumerGroupCurrentMemberAssignmentValue: memberEpoch INT32,
          previousMemberEpoch INT32, state INT8 (0 STABLE, 1 UNREVOKED_PARTITIONS,
          2 UNRELEASED_PARTITIONS), assignedPartitions []TopicPartitions,
          partitionsPendingRevocation []TopicPartitions
    TopicPartitions: topicId UUID, partitions COMPACT_ARRAY of INT32

A null value is a tombstone. Keys of different kinds never collide (the key
version comes first), so compaction keeps the latest of each.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .records import CorruptRecord, Reader

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
MEMBER_KINDS = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
GROUP_KINDS = (GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA)
VALUE_VERSION = 0

# MemberState's int8 values (Kafka's MemberState enum).
STATE_CODES = {"STABLE": 0, "UNREVOKED_PARTITIONS": 1, "UNRELEASED_PARTITIONS": 2}
STATE_NAMES = {v: k for k, v in STATE_CODES.items()}

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

Partitions = dict[uuid.UUID, set[int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_session_timeout_ms: int | None = None
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: str
    assigned: Partitions
    pending_revocation: Partitions


# -- keys -------------------------------------------------------------------------------


def consumer_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    assert (member_id is not None) == (kind in MEMBER_KINDS), "member records need a member id"
    out = bytearray(_I16.pack(kind))
    for s in (group,) if member_id is None else (group, member_id):
        data = s.encode()
        out += _I16.pack(len(data))
        out += data
    return bytes(out)


def decode_consumer_key(key: bytes) -> ConsumerKey | None:
    """The key of a KIP-848 record; None for any other key version."""
    r = _Reader(key)
    kind = r.take(_I16)
    if kind not in GROUP_KINDS and kind not in MEMBER_KINDS:
        return None
    group = r.key_string()
    member_id = r.key_string() if kind in MEMBER_KINDS else None
    return ConsumerKey(kind, group, member_id)


# -- writing values ---------------------------------------------------------------------


def _uvarint(out: bytearray, n: int) -> None:
    assert n >= 0
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _cstr(out: bytearray, value: str | None) -> None:
    if value is None:
        _uvarint(out, 0)
        return
    data = value.encode()
    _uvarint(out, len(data) + 1)
    out += data


def _partitions(out: bytearray, parts: Partitions) -> None:
    items = [(t, sorted(ps)) for t, ps in sorted(parts.items(), key=lambda i: i[0].bytes) if ps]
    _uvarint(out, len(items) + 1)
    for topic_id, ps in items:
        out += topic_id.bytes
        _uvarint(out, len(ps) + 1)
        for p in ps:
            out += _I32.pack(p)
        out.append(0)  # no tagged fields


def _head() -> bytearray:
    return bytearray(_I16.pack(VALUE_VERSION))


def group_metadata_value(epoch: int) -> bytes:
    out = _head()
    out += _I32.pack(epoch)
    out.append(0)
    return bytes(out)


def partition_metadata_value(topics: tuple[TopicMetadata, ...]) -> bytes:
    out = _head()
    _uvarint(out, len(topics) + 1)
    for t in topics:
        out += t.topic_id.bytes
        _cstr(out, t.name)
        out += _I32.pack(t.num_partitions)
        _uvarint(out, 1)  # partitionMetadata: no racks known
        out.append(0)
    out.append(0)
    return bytes(out)


def member_metadata_value(m: MemberMetadata) -> bytes:
    out = _head()
    _cstr(out, m.instance_id)
    _cstr(out, m.rack_id)
    _cstr(out, m.client_id)
    _cstr(out, m.client_host)
    _uvarint(out, len(m.subscribed_topic_names) + 1)
    for name in m.subscribed_topic_names:
        _cstr(out, name)
    _cstr(out, m.subscribed_topic_regex)
    out += _I32.pack(m.rebalance_timeout_ms)
    _cstr(out, m.server_assignor)
    if m.classic_protocols is None:
        out.append(0)
        return bytes(out)
    classic = bytearray(b"\x01")
    classic += _I32.pack(m.classic_session_timeout_ms or 0)
    _uvarint(classic, len(m.classic_protocols) + 1)
    for name, metadata in m.classic_protocols:
        _cstr(classic, name)
        _uvarint(classic, len(metadata) + 1)
        classic += metadata
        classic.append(0)
    classic.append(0)
    out.append(1)  # one tagged field
    _uvarint(out, 0)
    _uvarint(out, len(classic))
    out += classic
    return bytes(out)


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    return group_metadata_value(assignment_epoch)  # the same layout: one INT32


def target_assignment_member_value(parts: Partitions) -> bytes:
    out = _head()
    _partitions(out, parts)
    out.append(0)
    return bytes(out)


def current_assignment_value(a: CurrentAssignment) -> bytes:
    out = _head()
    out += _I32.pack(a.member_epoch)
    out += _I32.pack(a.previous_member_epoch)
    out += _I8.pack(STATE_CODES[a.state])
    _partitions(out, a.assigned)
    _partitions(out, a.pending_revocation)
    out.append(0)
    return bytes(out)


# -- reading values ---------------------------------------------------------------------


class _Reader(Reader):
    """Adds Kafka's flexible encoding to the non-flexible reader."""

    __slots__ = ()

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecord("field runs past the record")
        value = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return value

    def key_string(self) -> str:
        return self.required_string()

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise CorruptRecord("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def cstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1).decode()

    def required_cstr(self) -> str:
        value = self.cstr()
        if value is None:
            raise CorruptRecord("null where a string is required")
        return value

    def count(self) -> int:
        """A compact array's item count (a null array reads as empty)."""
        n = self.uvarint()
        if n - 1 > len(self.buf) - self.pos:
            raise CorruptRecord("array count runs past the record")
        return max(n - 1, 0)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.raw(self.uvarint())

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def partitions(self) -> Partitions:
        out: Partitions = {}
        for _ in range(self.count()):
            topic_id = self.uuid()
            out[topic_id] = {self.take(_I32) for _ in range(self.count())}
            self.skip_tags()
        return {t: ps for t, ps in out.items() if ps}


def _open(value: bytes) -> _Reader:
    r = _Reader(value)
    version = r.take(_I16)
    if version != VALUE_VERSION:
        raise CorruptRecord(f"consumer group value version {version} is not read by odradek")
    return r


def decode_epoch_value(value: bytes) -> int:
    """ConsumerGroupMetadataValue or ConsumerGroupTargetAssignmentMetadataValue."""
    r = _open(value)
    epoch = r.take(_I32)
    r.skip_tags()
    return epoch


def decode_partition_metadata_value(value: bytes) -> tuple[TopicMetadata, ...]:
    r = _open(value)
    topics = []
    for _ in range(r.count()):
        topic_id = r.uuid()
        name = r.required_cstr()
        num_partitions = r.take(_I32)
        for _ in range(r.count()):
            r.take(_I32)
            for _ in range(r.count()):
                r.cstr()
            r.skip_tags()
        r.skip_tags()
        topics.append(TopicMetadata(topic_id, name, num_partitions))
    r.skip_tags()
    return tuple(topics)


def decode_member_metadata_value(value: bytes) -> MemberMetadata:
    r = _open(value)
    instance_id = r.cstr()
    rack_id = r.cstr()
    client_id = r.required_cstr()
    client_host = r.required_cstr()
    names = tuple(r.required_cstr() for _ in range(r.count()))
    regex = r.cstr()
    rebalance_timeout_ms = r.take(_I32)
    assignor = r.cstr()
    session_ms: int | None = None
    protocols: tuple[tuple[str, bytes], ...] | None = None
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        field = _Reader(r.raw(r.uvarint()))
        if tag != 0 or field.take(_I8) < 0:
            continue
        session_ms = field.take(_I32)
        found = []
        for _ in range(field.count()):
            name = field.required_cstr()
            metadata = field.raw(field.uvarint() - 1)
            field.skip_tags()
            found.append((name, metadata))
        protocols = tuple(found)
    return MemberMetadata(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout_ms,
        assignor, session_ms, protocols,
    )


def decode_target_assignment_member_value(value: bytes) -> Partitions:
    r = _open(value)
    parts = r.partitions()
    r.skip_tags()
    return parts


def decode_current_assignment_value(value: bytes) -> CurrentAssignment:
    r = _open(value)
    member_epoch = r.take(_I32)
    previous = r.take(_I32)
    code = r.take(_I8)
    if code not in STATE_NAMES:
        raise CorruptRecord(f"unknown member state {code}")
    assigned = r.partitions()
    pending = r.partitions()
    r.skip_tags()
    return CurrentAssignment(member_epoch, previous, STATE_NAMES[code], assigned, pending)
