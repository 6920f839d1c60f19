"""The records of `__remote_log_metadata`: KIP-405's remote log segment metadata.

Self-contained (standard library only) so that a reader outside the broker — a
Spark driver consuming the topic with confluent-kafka — can decode a record value
with `decode_value(value)`.

A value is framed as Kafka's topic-based metadata manager frames it
(AbstractApiMessageSerde): unsigned varints frame version (1), api key and record
version, then the record body in the flexible (compact, tagged-field) encoding of
Kafka's message schemas, version 0:

  api key 0  RemoteLogSegmentMetadataRecord        -> RemoteLogSegmentMetadata
  api key 1  RemoteLogSegmentMetadataUpdateRecord  -> RemoteLogSegmentMetadataUpdate
  api key 2  RemotePartitionDeleteMetadataRecord   -> RemotePartitionDeleteMetadata

Records have a null key; a partition's events all go to the metadata partition
`metadata_partition(topic_id, partition, n)` so that they stay in order.
"""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import IntEnum

__all__ = [
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata",
    "RemotePartitionDeleteState",
    "TopicIdPartition",
    "b64_to_uuid",
    "decode_value",
    "encode_value",
    "metadata_partition",
    "replay",
    "uuid_to_b64",
]

FRAME_VERSION = 1
SEGMENT_RECORD, UPDATE_RECORD, PARTITION_DELETE_RECORD = 0, 1, 2


class RemoteLogSegmentState(IntEnum):
    """KIP-405's segment states, with Kafka's ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class RemotePartitionDeleteState(IntEnum):
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


def uuid_to_b64(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def b64_to_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    topic_id: uuid.UUID
    name: str
    partition: int

    def __str__(self) -> str:
        return f"{uuid_to_b64(self.topic_id)}:{self.name}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    topic_id_partition: TopicIdPartition
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """A remote segment: offsets [start_offset, end_offset], the leader epochs of its
    records (epoch -> first offset), its size and state."""

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    segment_leader_epochs: dict[int, int]
    segment_size_in_bytes: int
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: bytes | None = None
    txn_index_empty: bool = False

    def updated(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        return replace(self, state=update.state, broker_id=update.broker_id,
                       event_timestamp_ms=update.event_timestamp_ms,
                       custom_metadata=update.custom_metadata)


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    segment_id: RemoteLogSegmentId
    broker_id: int
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    custom_metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    topic_id_partition: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: RemotePartitionDeleteState


MetadataRecord = RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | \
    RemotePartitionDeleteMetadata


def metadata_partition(topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The `__remote_log_metadata` partition that holds a user partition's events."""
    return zlib.crc32(topic_id.bytes + partition.to_bytes(4, "big", signed=True)) \
        % num_partitions


def replay(events: Iterable[MetadataRecord]) -> dict[TopicIdPartition,
                                                     list[RemoteLogSegmentMetadata]]:
    """The visible remote segments of each partition after `events` in their topic
    order (what Kafka's topic-based metadata manager builds): a segment counts from
    its COPY_SEGMENT_FINISHED until its DELETE_SEGMENT_STARTED; a partition deletion
    drops the partition. Segments of a partition come sorted by start offset."""
    segments: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
    for e in events:
        if isinstance(e, RemoteLogSegmentMetadata):
            segments[e.segment_id] = e
        elif isinstance(e, RemoteLogSegmentMetadataUpdate):
            known = segments.get(e.segment_id)
            if known is None:
                continue
            if e.state >= RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                del segments[e.segment_id]
            else:
                segments[e.segment_id] = known.updated(e)
        else:
            for sid in [s for s in segments if s.topic_id_partition == e.topic_id_partition]:
                del segments[sid]
    out: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
    for m in segments.values():
        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            out.setdefault(m.segment_id.topic_id_partition, []).append(m)
    for ms in out.values():
        ms.sort(key=lambda m: m.start_offset)
    return out


# --- encoding -----------------------------------------------------------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@dataclass(slots=True)
class _Writer:
    parts: list[bytes] = field(default_factory=list)

    def uvarint(self, n: int) -> None:
        self.parts.append(_uvarint(n))

    def fmt(self, f: str, v: int) -> None:
        self.parts.append(struct.pack(f, v))

    def string(self, s: str) -> None:
        b = s.encode()
        self.uvarint(len(b) + 1)
        self.parts.append(b)

    def nbytes(self, b: bytes | None) -> None:
        if b is None:
            self.uvarint(0)
        else:
            self.uvarint(len(b) + 1)
            self.parts.append(b)

    def uuid(self, u: uuid.UUID) -> None:
        self.parts.append(u.bytes)

    def no_tags(self) -> None:
        self.uvarint(0)

    def tip(self, t: TopicIdPartition) -> None:
        self.string(t.name)
        self.uuid(t.topic_id)
        self.fmt(">i", t.partition)
        self.no_tags()

    def segment_id(self, s: RemoteLogSegmentId) -> None:
        self.tip(s.topic_id_partition)
        self.uuid(s.id)
        self.no_tags()


def encode_value(rec: MetadataRecord) -> bytes:
    """The record value for `rec` (frame, api key, version 0, body)."""
    w = _Writer()
    w.uvarint(FRAME_VERSION)
    if isinstance(rec, RemoteLogSegmentMetadata):
        w.uvarint(SEGMENT_RECORD)
        w.uvarint(0)
        w.segment_id(rec.segment_id)
        w.fmt(">q", rec.start_offset)
        w.fmt(">q", rec.end_offset)
        w.fmt(">i", rec.broker_id)
        w.fmt(">q", rec.max_timestamp_ms)
        w.fmt(">q", rec.event_timestamp_ms)
        w.uvarint(len(rec.segment_leader_epochs) + 1)
        for epoch, offset in sorted(rec.segment_leader_epochs.items()):
            w.fmt(">i", epoch)
            w.fmt(">q", offset)
            w.no_tags()
        w.fmt(">i", rec.segment_size_in_bytes)
        w.nbytes(rec.custom_metadata)
        w.fmt(">b", int(rec.state))
        if rec.txn_index_empty:  # tagged field 0, written only when not the default
            w.uvarint(1)
            w.uvarint(0)
            w.uvarint(1)
            w.fmt(">b", 1)
        else:
            w.no_tags()
    elif isinstance(rec, RemoteLogSegmentMetadataUpdate):
        w.uvarint(UPDATE_RECORD)
        w.uvarint(0)
        w.segment_id(rec.segment_id)
        w.fmt(">i", rec.broker_id)
        w.fmt(">q", rec.event_timestamp_ms)
        w.nbytes(rec.custom_metadata)
        w.fmt(">b", int(rec.state))
        w.no_tags()
    else:
        w.uvarint(PARTITION_DELETE_RECORD)
        w.uvarint(0)
        w.tip(rec.topic_id_partition)
        w.fmt(">i", rec.broker_id)
        w.fmt(">q", rec.event_timestamp_ms)
        w.fmt(">b", int(rec.state))
        w.no_tags()
    return b"".join(w.parts)


# --- decoding -----------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.buf):
                raise ValueError("truncated remote log metadata record")
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("truncated remote log metadata record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def fmt(self, f: str) -> int:
        size = struct.calcsize(f)
        return int(struct.unpack(f, self.take(size))[0])

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null string in remote log metadata record")
        return self.take(n).decode()

    def nbytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def tip(self) -> TopicIdPartition:
        name = self.string()
        topic_id = self.uuid()
        partition = self.fmt(">i")
        self.tags()
        return TopicIdPartition(topic_id, name, partition)

    def segment_id(self) -> RemoteLogSegmentId:
        tip = self.tip()
        seg = self.uuid()
        self.tags()
        return RemoteLogSegmentId(tip, seg)


def decode_value(value: bytes) -> MetadataRecord:
    """Decode a `__remote_log_metadata` record value (raises ValueError if malformed)."""
    r = _Reader(bytes(value))
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise ValueError(f"unknown remote log metadata frame version {frame}")
    api_key, _version = r.uvarint(), r.uvarint()
    if api_key == SEGMENT_RECORD:
        seg_id = r.segment_id()
        start, end = r.fmt(">q"), r.fmt(">q")
        broker_id = r.fmt(">i")
        max_ts, event_ts = r.fmt(">q"), r.fmt(">q")
        epochs = {}
        for _ in range(r.uvarint() - 1):
            epoch = r.fmt(">i")
            epochs[epoch] = r.fmt(">q")
            r.tags()
        size = r.fmt(">i")
        custom = r.nbytes()
        state = RemoteLogSegmentState(r.fmt(">b"))
        tags = r.tags()
        return RemoteLogSegmentMetadata(seg_id, start, end, broker_id, max_ts, event_ts,
                                        epochs, size, state, custom,
                                        tags.get(0, b"\x00") != b"\x00")
    if api_key == UPDATE_RECORD:
        seg_id = r.segment_id()
        broker_id = r.fmt(">i")
        event_ts = r.fmt(">q")
        custom = r.nbytes()
        state = RemoteLogSegmentState(r.fmt(">b"))
        r.tags()
        return RemoteLogSegmentMetadataUpdate(seg_id, broker_id, event_ts, state, custom)
    if api_key == PARTITION_DELETE_RECORD:
        tip = r.tip()
        broker_id = r.fmt(">i")
        event_ts = r.fmt(">q")
        pstate = RemotePartitionDeleteState(r.fmt(">b"))
        r.tags()
        return RemotePartitionDeleteMetadata(tip, broker_id, event_ts, pstate)
    raise ValueError(f"unknown remote log metadata api key {api_key}")
