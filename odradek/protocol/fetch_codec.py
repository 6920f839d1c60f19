"""A hand-written encoder for Fetch responses that never copies record bytes.

A Fetch response is mostly file bytes. The generic path (kio's writer into a
BytesIO, then a join with the frame header) copies every byte of records three
times; this encoder returns the response frame as a list of chunks in which
each partition's records are the very bytes object read from the segment, so
the transport writes them with `writelines` and no copy is made in Python.
A partition's records may also be a range of a segment file that the
connection sends with sendfile (storage/file_slice.py): only its len() is
taken here.

Layout (FetchResponse v4-v16; flexible from v12: compact lengths = n+1 as
uvarint, compact nullable = 0 for null, a tagged-field section after each
struct):

    throttle_time_ms int32
    [v7+] error_code int16, session_id int32
    responses: array of
        topic string (v4-12) | topic_id uuid (v13+)
        partitions: array of
            partition_index int32, error_code int16, high_watermark int64,
            last_stable_offset int64, [v5+] log_start_offset int64,
            aborted_transactions nullable array of (producer_id int64, first_offset int64),
            [v11+] preferred_read_replica int32,
            records nullable bytes
            [v12+] tagged: 0 diverging_epoch (epoch int32, end_offset int64),
                           1 current_leader (leader_id int32, leader_epoch int32),
                           2 snapshot_id (end_offset int64, epoch int32)
    [v12+] tagged: [v16+] 0 node_endpoints: compact array of (node_id int32,
           host compact string, port int32, rack compact nullable string, tags);
           sent only when given (the KRaft leader names itself, KIP-853)

Tagged fields are sent only when they differ from their defaults (Debian's
librdkafka 2.0.2 misreads default-valued ones).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from .framing import MalformedRequest, encode_uvarint, read_uvarint

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_PART_HEAD = struct.Struct(">ihqq")  # partition, error, hw, lso
_ABORTED = struct.Struct(">qq")
_TOP_V7 = struct.Struct(">ihi")  # throttle, error, session id


def _error(value: Any) -> int:
    return int(getattr(value, "value", value))


def _tagged_partition(p: dict[str, Any]) -> bytes:
    tags: list[bytes] = []
    diverging = p.get("diverging_epoch")
    if diverging and (diverging.get("epoch", -1) != -1 or diverging.get("end_offset", -1) != -1):
        body = _I32.pack(diverging["epoch"]) + _I64.pack(diverging["end_offset"]) + b"\x00"
        tags.append(b"\x00" + encode_uvarint(len(body)) + body)
    leader = p.get("current_leader")
    if leader and (leader.get("leader_id", -1) != -1 or leader.get("leader_epoch", -1) != -1):
        body = _I32.pack(leader["leader_id"]) + _I32.pack(leader["leader_epoch"]) + b"\x00"
        tags.append(b"\x01" + encode_uvarint(len(body)) + body)
    snapshot = p.get("snapshot_id")
    if snapshot and (snapshot.get("end_offset", -1) != -1 or snapshot.get("epoch", -1) != -1):
        body = _I64.pack(snapshot["end_offset"]) + _I32.pack(snapshot["epoch"]) + b"\x00"
        tags.append(b"\x02" + encode_uvarint(len(body)) + body)
    if not tags:
        return b"\x00"
    return encode_uvarint(len(tags)) + b"".join(tags)


_ZERO_UUID = bytes(16)


def _compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return encode_uvarint(len(raw) + 1) + raw


def _tagged_top(version: int, data: dict[str, Any]) -> bytes:
    endpoints = data.get("node_endpoints") if version >= 16 else None
    if not endpoints:
        return b"\x00"
    body = bytearray(encode_uvarint(len(endpoints) + 1))
    for e in endpoints:
        body += _I32.pack(e["node_id"]) + _compact(e["host"]) + _I32.pack(e["port"])
        body += _compact(e.get("rack")) + b"\x00"
    return b"\x01\x00" + encode_uvarint(len(body)) + bytes(body)

def encode_fetch_response(version: int, correlation_id: int, data: dict[str, Any]) -> list[Any]:
    """The whole response frame (size prefix, header, body) as chunks: bytes,
    and each partition's records as given (bytes, or a file range)."""
    flexible = version >= 12
    chunks: list[Any] = []
    head = bytearray()
    throttle = int(data.get("throttle_time", 0))
    if version >= 7:
        head += _TOP_V7.pack(throttle, _error(data.get("error_code", 0)), data.get("session_id", 0))
    else:
        head += _I32.pack(throttle)
    responses = data.get("responses", ())
    head += encode_uvarint(len(responses) + 1) if flexible else _I32.pack(len(responses))
    for topic in responses:
        if version >= 13:
            tid = topic["topic_id"]
            if tid is None:  # kio reads the zero id of a request as None: echo it as zero
                head += _ZERO_UUID
            else:
                head += (tid if isinstance(tid, uuid.UUID) else uuid.UUID(str(tid))).bytes
        else:
            name = topic["topic"].encode()
            head += encode_uvarint(len(name) + 1) + name if flexible else _I16.pack(len(name)) + name
        parts = topic["partitions"]
        head += encode_uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            head += _PART_HEAD.pack(
                p["partition_index"], _error(p["error_code"]), p["high_watermark"],
                p.get("last_stable_offset", -1),
            )
            if version >= 5:
                head += _I64.pack(p.get("log_start_offset", -1))
            aborted = p.get("aborted_transactions")
            if aborted is None:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                head += encode_uvarint(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
                for a in aborted:
                    head += _ABORTED.pack(a["producer_id"], a["first_offset"])
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(p.get("preferred_read_replica", -1))
            records = p.get("records")
            if records is None:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                head += encode_uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
                if records:
                    chunks.append(bytes(head))
                    chunks.append(records)
                    head = bytearray()
            if flexible:
                head += _tagged_partition(p)
        if flexible:
            head += b"\x00"
    if flexible:
        head += _tagged_top(version, data)
    chunks.append(bytes(head))
    header = _I32.pack(correlation_id) + (b"\x00" if flexible else b"")
    size = len(header) + sum(len(c) for c in chunks)
    return [_I32.pack(size) + header, *chunks]


# -- the follower's Fetch request (v12) ---------------------------------------------------
#
#   replica_id int32, max_wait_ms int32, min_bytes int32, max_bytes int32,
#   isolation_level int8, session_id int32, session_epoch int32,
#   topics: compact array of
#       topic compact string,
#       partitions: compact array of
#           partition int32, current_leader_epoch int32, fetch_offset int64,
#           last_fetched_epoch int32, log_start_offset int64, partition_max_bytes int32,
#           tagged fields
#       tagged fields
#   forgotten_topics_data: compact array (empty: full fetches), rack_id compact string,
#   tagged fields (cluster_id, tag 0: not sent)

REPLICA_FETCH_VERSION = 12
_REQ_TOP = struct.Struct(">iiiibii")
_REQ_PART = struct.Struct(">iiqiqi")

# (partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
#  log_start_offset, partition_max_bytes)
FetchPosition = tuple[int, int, int, int, int, int]


def encode_replica_fetch(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                         topics: dict[str, list[FetchPosition]]) -> bytes:
    """The body of a follower's full Fetch v12 (no session, no rack): what
    kio's writer makes of the same request, in a few struct packs."""
    out = bytearray(_REQ_TOP.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1))
    out += encode_uvarint(len(topics) + 1)
    pack = _REQ_PART.pack
    for topic, partitions in topics.items():
        name = topic.encode()
        out += encode_uvarint(len(name) + 1)
        out += name
        out += encode_uvarint(len(partitions) + 1)
        for position in partitions:
            out += pack(*position)
            out += b"\x00"
        out += b"\x00"
    out += b"\x01\x01\x00"  # no forgotten topics, rack "" , no tagged fields
    return bytes(out)


# -- the answer to it, read without kio --------------------------------------------------
#
# FetchResponse v12 (after the response header): throttle_time_ms int32,
# error_code int16, session_id int32, responses: compact array of (topic compact
# string, partitions: compact array of (partition_index int32, error_code int16,
# high_watermark int64, last_stable_offset int64, log_start_offset int64,
# aborted_transactions compact nullable array of (producer_id int64,
# first_offset int64, tags), preferred_read_replica int32, records compact
# nullable bytes, tags: 0 diverging_epoch (epoch int32, end_offset int64, tags),
# others skipped), tags), tags.
#
# Records come back as a memoryview into the frame: no copy (kio made one).
# Every length and count is checked against the bytes left (as protocol/guard.py
# checks requests): a short or lying answer raises MalformedRequest.

_TOP_RESP = struct.Struct(">ihi")
_PART_RESP = struct.Struct(">ihqqq")
_DIVERGING = struct.Struct(">iq")


class FetchedPartition:
    __slots__ = (
        "diverging_epoch",
        "error_code",
        "high_watermark",
        "log_start_offset",
        "partition",
        "records",
        "topic",
    )

    def __init__(self, topic: str, partition: int, error_code: int, high_watermark: int,
                 log_start_offset: int, diverging_epoch: tuple[int, int] | None,
                 records: memoryview) -> None:
        self.topic = topic
        self.partition = partition
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.diverging_epoch = diverging_epoch  # (epoch, end_offset)
        self.records = records


def _count(buf: memoryview, pos: int, end: int, min_size: int) -> tuple[int, int]:
    """A compact array's length (null as 0), bounded by the bytes left."""
    n, pos = read_uvarint(buf, pos)
    n = max(n - 1, 0)
    if n * min_size > end - pos:
        raise MalformedRequest(f"array of {n} cannot fit in {end - pos} bytes")
    return n, pos


def _need(pos: int, size: int, end: int) -> None:
    if size < 0 or pos + size > end:
        raise MalformedRequest("fetch answer cut short")


def _tag_count(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """A tagged-field section's count (a plain uvarint), bounded by the bytes left."""
    n, pos = read_uvarint(buf, pos)
    if n * 2 > end - pos:
        raise MalformedRequest(f"{n} tagged fields cannot fit in {end - pos} bytes")
    return n, pos


def _skip_tags(buf: memoryview, pos: int, end: int) -> int:
    n, pos = _tag_count(buf, pos, end)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        _need(pos, size, end)
        pos += size
    return pos


def decode_replica_fetch(frame: bytes | bytearray, pos: int) -> tuple[int, list[FetchedPartition]]:
    """(top-level error code, the partitions) of a Fetch v12 answer whose body
    starts at `pos` of `frame`."""
    buf = memoryview(frame)
    end = len(buf)
    _need(pos, _TOP_RESP.size, end)
    _throttle, error_code, _session = _TOP_RESP.unpack_from(buf, pos)
    pos += _TOP_RESP.size
    out: list[FetchedPartition] = []
    topics, pos = _count(buf, pos, end, 3)
    for _ in range(topics):
        size, pos = read_uvarint(buf, pos)
        _need(pos, size - 1, end)
        try:
            topic = bytes(buf[pos:pos + size - 1]).decode()
        except UnicodeDecodeError as e:
            raise MalformedRequest("topic name is not UTF-8") from e
        pos += size - 1
        parts, pos = _count(buf, pos, end, _PART_RESP.size + 7)
        for _ in range(parts):
            _need(pos, _PART_RESP.size, end)
            index, code, hw, _lso, log_start = _PART_RESP.unpack_from(buf, pos)
            pos += _PART_RESP.size
            aborted, pos = _count(buf, pos, end, 17)
            pos += aborted * 17  # producer_id, first_offset, an empty tag section
            _need(pos, 4, end)
            pos += 4  # preferred_read_replica
            size, pos = read_uvarint(buf, pos)
            size = max(size - 1, 0)  # null records: none
            _need(pos, size, end)
            records = buf[pos:pos + size]
            pos += size
            diverging = None
            ntags, pos = _tag_count(buf, pos, end)
            for _ in range(ntags):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                _need(pos, size, end)
                if tag == 0:
                    _need(pos, _DIVERGING.size, pos + size)
                    diverging = _DIVERGING.unpack_from(buf, pos)
                pos += size
            out.append(FetchedPartition(topic, index, code, hw, log_start, diverging, records))
        pos = _skip_tags(buf, pos, end)
    _skip_tags(buf, pos, end)
    return error_code, out
