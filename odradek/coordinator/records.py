"""The records of `__consumer_offsets`, in Kafka's own key/value formats.

Every record key starts with an int16 *key version* that says which record it
is; the value starts with an int16 *value version*. odradek writes the
versions Kafka 3.x/4.x write for classic groups, non-flexible encodings
(big-endian; STRING = int16 length + UTF-8; NULLABLE_STRING uses length -1
for null; BYTES = int32 length + bytes; ARRAY = int32 count + items):

    OffsetCommitKey      key version 1:  group STRING, topic STRING, partition INT32
    OffsetCommitValue    value version 3: offset INT64, leaderEpoch INT32,
                                          metadata STRING, commitTimestamp INT64
    GroupMetadataKey     key version 2:  group STRING
    GroupMetadataValue   value version 3: protocolType STRING, generation INT32,
                                          protocol NULLABLE_STRING, leader NULLABLE_STRING,
                                          currentStateTimestamp INT64,
                                          members ARRAY of MemberMetadata
    MemberMetadata (v3): memberId STRING, groupInstanceId NULLABLE_STRING,
                         clientId STRING, clientHost STRING, rebalanceTimeout INT32,
                         sessionTimeout INT32, subscription BYTES, assignment BYTES

A record with a null value is a tombstone: the offset or the group is gone.
Key version 0 is an older OffsetCommitKey with the same layout; value versions
0-2 of OffsetCommitValue and 0-2 of GroupMetadataValue are read as well (what
a Kafka log may hold). `decode_key` returns None for other key versions:
KIP-848's ConsumerGroup* records (3-8) are consumer_records.py's; share and
streams groups are not read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CorruptRecord(ValueError):
    """A key or value that does not parse as the format its version names."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


# -- writing --------------------------------------------------------------------------


def _str(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, value: bytes) -> None:
    out += _I32.pack(len(value))
    out += value


def offset_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _str(out, group)
    _str(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def group_key(group: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _str(out, group)
    return bytes(out)


def offset_value(v: OffsetValue) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _I64.pack(v.offset)
    out += _I32.pack(v.leader_epoch)
    _str(out, v.metadata)
    out += _I64.pack(v.commit_timestamp_ms)
    return bytes(out)


def group_value(v: GroupValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _str(out, v.protocol_type)
    out += _I32.pack(v.generation)
    _str(out, v.protocol)
    _str(out, v.leader)
    out += _I64.pack(v.current_state_timestamp_ms)
    out += _I32.pack(len(v.members))
    for m in v.members:
        _str(out, m.member_id)
        _str(out, m.group_instance_id)
        _str(out, m.client_id)
        _str(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# -- reading --------------------------------------------------------------------------


class Reader:
    """Reads the non-flexible encoding (consumer_records.py extends it)."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise CorruptRecord("record is truncated")
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(value)

    def i16(self) -> int:
        return self.take(_I16)

    def i32(self) -> int:
        return self.take(_I32)

    def i64(self) -> int:
        return self.take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        if self.pos + n > len(self.buf):
            raise CorruptRecord("string runs past the record")
        value = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return value

    def required_string(self) -> str:
        value = self.string()
        if value is None:
            raise CorruptRecord("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        if self.pos + n > len(self.buf):
            raise CorruptRecord("bytes run past the record")
        value = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(value)


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    r = Reader(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.required_string(), r.required_string(), r.i32())
    if version == 2:
        return GroupKey(r.required_string())
    return None


def decode_offset_value(value: bytes) -> OffsetValue:
    r = Reader(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise CorruptRecord(f"unknown OffsetCommitValue version {version}")
    if version >= 4:
        raise CorruptRecord("flexible OffsetCommitValue v4 is not read by odradek")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    return OffsetValue(offset, leader_epoch, metadata, commit_ts)


def decode_group_value(value: bytes) -> GroupValue:
    r = Reader(value)
    version = r.i16()
    if not 0 <= version <= 3:
        raise CorruptRecord(f"GroupMetadataValue version {version} is not read by odradek")
    protocol_type = r.required_string()
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(value):
        raise CorruptRecord("bad member count")
    members = []
    for _ in range(count):
        member_id = r.required_string()
        instance_id = r.string() if version >= 3 else None
        client_id = r.required_string()
        client_host = r.required_string()
        session_timeout = r.i32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, r.i32()
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))
