"""A length check of every request before kio's native reader sees it.

kio's native reader trusts the element count of an array and reserves memory
for it before reading: an 88-byte CreateTopics v4 whose int32 topic count was
set to 2**31-1 made the process try to allocate 13 GB and abort. A broker must
not die of a few hostile bytes, so every request (and every response a peer
sends us) is first walked here, legacy and flexible encodings alike:

- legacy (non-flexible) versions: arrays carry an int32 count (-1 = null),
  strings an int16 length (-1 = null), bytes and records an int32 length
  (-1 = null);
- flexible versions (KIP-482): compact arrays, strings and bytes carry an
  unsigned varint of length + 1 (0 = null), and every struct ends with a tagged
  field section (a count, then tag, size, bytes for each field);
- a nullable struct (KIP-893) starts with an int8 marker, -1 = null.

Rules: a length must fit in the bytes that remain; a count times the smallest
encoding of one element must fit too (so the memory a decoder may reserve is
bounded by a small multiple of the frame); a negative length other than -1 is
malformed; a tagged field must not overrun its declared size. The walk reads
only lengths, never builds values, and its per-class plans are cached.

`length_fields` returns where each length and count sits in a frame: the
fuzzer (`tests/fuzz/`) uses it to aim its mutations at them.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache
from typing import Any, get_args

from kio.serial import entity_reader

from .entities import _nested_type
from .framing import MalformedRequest, read_uvarint

_FIXED = {
    "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
    "uint64": 8, "float64": 8, "uuid": 16, "error_code": 2, "timedelta_i32": 4,
    "timedelta_i64": 8, "datetime_i64": 8,
}
_VARLEN = frozenset({"string", "bytes", "records"})
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# A plan step: (kind, fixed size / varlen type / nested class, is_array,
# is_nullable_struct, smallest encoding of one value in bytes)
Step = tuple[str, Any, bool, bool, int]

# Where a length or count sits: (offset, width in bytes, "varint" | "int16" | "int32").
Mark = tuple[int, int, str]


@cache
def _plan(cls: Any) -> tuple[tuple[Step, ...], dict[int, Step], int]:
    """(regular steps, tagged steps by tag, smallest encoding of the struct)."""
    flexible = bool(cls.__flexible__)
    regular: list[Step] = []
    tagged: dict[int, Step] = {}
    smallest = 1 if flexible else 0  # the tagged-field count
    for f in fields(cls):
        nested, is_array = _nested_type(f.type)
        nullable_struct = (
            nested is not None and not is_array and type(None) in get_args(f.type)
        )
        kafka_type = f.metadata.get("kafka_type", "")
        if nested is not None:
            step: Step = ("struct", nested, is_array, nullable_struct,
                          1 if nullable_struct else _plan(nested)[2])
        elif kafka_type in _FIXED:
            step = ("fixed", _FIXED[kafka_type], is_array, False, _FIXED[kafka_type])
        elif kafka_type in _VARLEN:
            width = 1 if flexible else (2 if kafka_type == "string" else 4)
            step = ("varlen", kafka_type, is_array, False, width)
        else:
            raise TypeError(f"guard: unknown kafka type {kafka_type!r} in {cls.__name__}")
        tag = f.metadata.get("tag")
        if tag is None:
            regular.append(step)
            smallest += (1 if flexible else 4) if is_array else step[4]
        else:
            tagged[tag] = step
    return tuple(regular), tagged, max(smallest, 1)


class _Walk:
    """One pass over a message; `marks` collects length positions when not None."""

    __slots__ = ("buf", "marks")

    def __init__(self, buf: bytes | memoryview, marks: list[Mark] | None) -> None:
        self.buf = buf
        self.marks = marks

    def length(self, flexible: bool, kind: str, pos: int, end: int, unit: int) -> tuple[int, int]:
        """Read a length or count; return (n, position after it); n = -1 for null.

        `unit` is the smallest encoding of one element: n * unit must fit.
        """
        buf = self.buf
        start = pos
        if flexible:
            n, pos = read_uvarint(buf, pos)
            n -= 1  # compact encoding: length + 1, 0 = null
            mark: Mark = (start, pos - start, "varint")
        elif kind == "string":
            if pos + 2 > end:
                raise MalformedRequest("truncated string length")
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            mark = (start, 2, "int16")
        else:
            if pos + 4 > end:
                raise MalformedRequest("truncated length")
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
            mark = (start, 4, "int32")
        if n < -1:
            raise MalformedRequest(f"negative length {n}")
        if n * unit > end - pos:
            raise MalformedRequest(
                f"length {n} needs at least {n * unit} bytes, {end - pos} left"
            )
        if self.marks is not None:
            self.marks.append(mark)
        return n, pos

    def value(self, flexible: bool, step: Step, pos: int, end: int) -> int:
        kind, arg = step[0], step[1]
        if kind == "fixed":
            pos += arg
        elif kind == "varlen":
            n, pos = self.length(flexible, arg, pos, end, 1)
            pos += max(n, 0)
        else:
            pos = self.struct(arg, pos, end)
        if pos > end:
            raise MalformedRequest("truncated request")
        return pos

    def field(self, flexible: bool, step: Step, pos: int, end: int) -> int:
        if not step[2]:
            if step[3]:  # a nullable struct: an int8 marker first (KIP-893), -1 = null
                if pos >= end:
                    raise MalformedRequest("truncated request")
                marker = self.buf[pos]
                pos += 1
                if marker == 0xFF:
                    return pos
            return self.value(flexible, step, pos, end)
        n, pos = self.length(flexible, "array", pos, end, step[4])
        for _ in range(n):
            pos = self.value(flexible, step, pos, end)
        return pos

    def struct(self, cls: Any, pos: int, end: int) -> int:
        regular, tagged, _smallest = _plan(cls)
        flexible = bool(cls.__flexible__)
        for step in regular:
            pos = self.field(flexible, step, pos, end)
        if not flexible:
            return pos
        count, pos = read_uvarint(self.buf, pos)
        if count * 2 > end - pos:  # each tagged field takes a tag and a size
            raise MalformedRequest("too many tagged fields")
        for _ in range(count):
            tag, pos = read_uvarint(self.buf, pos)
            size, pos = read_uvarint(self.buf, pos)
            if size > end - pos:
                raise MalformedRequest("tagged field longer than the request")
            tagged_step = tagged.get(tag)
            if (tagged_step is not None
                    and self.field(flexible, tagged_step, pos, pos + size) > pos + size):
                raise MalformedRequest(f"tagged field {tag} overruns its size")
            pos += size
        return pos


def check_message(cls: Any, buf: bytes | memoryview, pos: int) -> int:
    """Raise MalformedRequest if a length or count cannot fit; return the end offset.

    Run it before kio's reader on any bytes from the network: requests, and the
    responses of peers.
    """
    return _Walk(buf, None).struct(cls, pos, len(buf))


def length_fields(cls: Any, buf: bytes | memoryview, pos: int) -> list[Mark]:
    """Every length and count of a well-formed message, in order (for the fuzzer)."""
    marks: list[Mark] = []
    _Walk(buf, marks).struct(cls, pos, len(buf))
    return marks


def decode_message(cls: Any, buf: bytes | memoryview, pos: int) -> Any:
    """Check, then decode with kio's native reader: the one way bytes from the
    network become a kio entity (requests here, responses in the clients)."""
    check_message(cls, buf, pos)
    entity, _size = entity_reader(cls)(buf, pos)
    return entity
