"""A length check of flexible requests before kio's native reader sees them.

kio's native reader trusts the element count of a compact array and reserves
memory for it before reading: a 5-byte count of 2**32 makes the process abort
on a failed allocation. A broker must not die of six hostile bytes, so every
flexible request is first walked here: each length and count must fit in the
bytes that remain (every array element takes at least one byte), or the
request is malformed and its connection closed. The walk reads only lengths,
never builds values, and its per-class plans are cached.

Legacy (non-flexible) encodings are checked by kio itself.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any, get_args

from .entities import _nested_type
from .framing import MalformedRequest, read_uvarint

_FIXED = {
    "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
    "uint64": 8, "float64": 8, "uuid": 16, "error_code": 2, "timedelta_i32": 4,
    "timedelta_i64": 8, "datetime_i64": 8,
}
_VARLEN = frozenset({"string", "bytes", "records"})

# A plan step: (kind, fixed size or nested class, is_array, is_nullable_struct)
Step = tuple[str, Any, bool, bool]


@cache
def _plan(cls: Any) -> tuple[tuple[Step, ...], dict[int, Step]]:
    regular: list[Step] = []
    tagged: dict[int, Step] = {}
    for f in fields(cls):
        nested, is_array = _nested_type(f.type)
        nullable_struct = (
            nested is not None and not is_array and type(None) in get_args(f.type)
        )
        kafka_type = f.metadata.get("kafka_type", "")
        if nested is not None:
            step: Step = ("struct", nested, is_array, nullable_struct)
        elif kafka_type in _FIXED:
            step = ("fixed", _FIXED[kafka_type], is_array, False)
        elif kafka_type in _VARLEN:
            step = ("varlen", 0, is_array, False)
        else:
            raise TypeError(f"guard: unknown kafka type {kafka_type!r} in {cls.__name__}")
        tag = f.metadata.get("tag")
        if tag is None:
            regular.append(step)
        else:
            tagged[tag] = step
    return tuple(regular), tagged


def _count(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    n -= 1  # compact encoding: length + 1, 0 = null
    if n > end - pos:
        raise MalformedRequest(f"length {n} exceeds the {end - pos} bytes left")
    return n, pos


def _value(step: Step, buf: bytes, pos: int, end: int) -> int:
    kind, arg = step[0], step[1]
    if kind == "fixed":
        pos += arg
    elif kind == "varlen":
        n, pos = _count(buf, pos, end)
        pos += max(n, 0)
    else:
        pos = _struct(arg, buf, pos, end)
    if pos > end:
        raise MalformedRequest("truncated request")
    return pos


def _field(step: Step, buf: bytes, pos: int, end: int) -> int:
    if not step[2]:
        if step[3]:  # a nullable struct: an int8 marker first (KIP-893), -1 = null
            if pos >= end:
                raise MalformedRequest("truncated request")
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:
                return pos
        return _value(step, buf, pos, end)
    n, pos = _count(buf, pos, end)
    for _ in range(max(n, 0)):
        pos = _value(step, buf, pos, end)
    return pos


def _struct(cls: Any, buf: bytes, pos: int, end: int) -> int:
    regular, tagged = _plan(cls)
    for step in regular:
        pos = _field(step, buf, pos, end)
    count, pos = read_uvarint(buf, pos)
    if count > end - pos:
        raise MalformedRequest("too many tagged fields")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > end - pos:
            raise MalformedRequest("tagged field longer than the request")
        tagged_step = tagged.get(tag)
        if tagged_step is not None:
            if _field(tagged_step, buf, pos, pos + size) > pos + size:
                raise MalformedRequest(f"tagged field {tag} overruns its size")
        pos += size
    return pos


def check_flexible_request(cls: Any, buf: bytes, pos: int) -> None:
    """Raise MalformedRequest if a length or count in the request cannot fit."""
    if cls.__flexible__:
        _struct(cls, buf, pos, len(buf))

