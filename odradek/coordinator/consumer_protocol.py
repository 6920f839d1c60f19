"""The embedded "consumer" protocol: subscription and assignment bytes of classic groups.

The broker only relays these bytes between members, but it reads the topics a
member subscribes to (OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC) and the
tools show assignments. Layout (non-flexible, as in Kafka's
ConsumerProtocolSubscription / ConsumerProtocolAssignment):

    Subscription: version INT16, topics ARRAY(STRING), userData NULLABLE_BYTES, ...
    Assignment:   version INT16, assignedPartitions ARRAY(topic STRING,
                  partitions ARRAY(INT32)), userData NULLABLE_BYTES
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MAX_ITEMS = 1_000_000  # a bound on array counts read from client bytes


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise ValueError("bad string")
    return buf[pos : pos + n].decode(), pos + n


def _count(buf: bytes, pos: int) -> tuple[int, int]:
    (n,) = _I32.unpack_from(buf, pos)
    if n < 0 or n > MAX_ITEMS:
        raise ValueError("bad array count")
    return n, pos + 4


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a consumer subscription, or None when the bytes do not parse."""
    try:
        pos = 2
        n, pos = _count(subscription, pos)
        topics = set()
        for _ in range(n):
            name, pos = _string(subscription, pos)
            topics.add(name)
        return topics
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    """topic -> partitions of a consumer assignment, or None when the bytes do not parse."""
    if not assignment:
        return {}
    try:
        pos = 2
        n, pos = _count(assignment, pos)
        out: dict[str, list[int]] = {}
        for _ in range(n):
            topic, pos = _string(assignment, pos)
            k, pos = _count(assignment, pos)
            parts = list(struct.unpack_from(f">{k}i", assignment, pos))
            pos += 4 * k
            out.setdefault(topic, []).extend(parts)
        return out
    except (ValueError, struct.error, UnicodeDecodeError):
        return None


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(partitions))
    for topic, parts in sorted(partitions.items()):
        data = topic.encode()
        out += _I16.pack(len(data)) + data
        out += _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *sorted(parts))
    out += _I32.pack(-1)
    return bytes(out)


def encode_subscription(topics: list[str]) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _I32.pack(len(topics))
    for topic in sorted(topics):
        data = topic.encode()
        out += _I16.pack(len(data)) + data
    out += _I32.pack(-1)
    return bytes(out)


def _nullable_bytes_skip(buf: bytes, pos: int) -> int:
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise ValueError("bad bytes")
    return pos + max(n, 0)


def parse_subscription(
    subscription: bytes,
) -> tuple[list[str], dict[str, list[int]], str | None] | None:
    """(topics, owned partitions, rack) of a consumer subscription of any version
    (owned partitions from v1, rack from v3); None when the bytes do not parse.
    A KIP-848 coordinator reads them from a classic member's JoinGroup."""
    try:
        (version,) = _I16.unpack_from(subscription, 0)
        n, pos = _count(subscription, 2)
        topics = []
        for _ in range(n):
            name, pos = _string(subscription, pos)
            topics.append(name)
        owned: dict[str, list[int]] = {}
        rack = None
        if pos < len(subscription):
            pos = _nullable_bytes_skip(subscription, pos)
        if version >= 1 and pos < len(subscription):
            n, pos = _count(subscription, pos)
            for _ in range(n):
                topic, pos = _string(subscription, pos)
                k, pos = _count(subscription, pos)
                owned.setdefault(topic, []).extend(struct.unpack_from(f">{k}i", subscription, pos))
                pos += 4 * k
        if version >= 2 and pos < len(subscription):
            pos += 4  # generation id
        if version >= 3 and pos + 2 <= len(subscription):
            (k,) = _I16.unpack_from(subscription, pos)
            if k >= 0:
                rack, pos = _string(subscription, pos)
        return topics, owned, rack
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
