"""Build kio message entities from plain Python data, for any API version.

Handlers describe a response once, version-neutrally, as nested dicts with
Kafka's field names in snake_case and plain values (ints for error codes and
millisecond durations/timestamps). `build(cls, data)` turns that into the kio
dataclass of the negotiated version: fields the version lacks are dropped,
fields the data lacks take the schema default, nested structures recurse.

Conversions by Kafka type: `error_code` int -> ErrorCode; `timedelta_i32/64`
ms -> timedelta; `datetime_i64` ms -> aware datetime (None stays None);
`uuid` accepts UUID. Per-class plans are cached, so the cost per message is a
dict lookup and a constructor call per struct.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from functools import cache
from typing import Any, get_args, get_origin

from kio.schema.errors import ErrorCode

_EMPTY_TUPLE: tuple[()] = ()
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ERROR_CODES: dict[int, ErrorCode] = {e.value: e for e in ErrorCode}


def error_code(value: int) -> ErrorCode:
    return _ERROR_CODES.get(value, ErrorCode.unknown_server_error)


def _conv_ms_timedelta(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)


def _conv_ms_datetime(value: Any) -> Any:
    if value is None or isinstance(value, datetime.datetime):
        return value
    return _EPOCH + datetime.timedelta(milliseconds=value)


def _conv_error(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value
    return error_code(value)


def _conv_uuid(value: Any) -> Any:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(value)


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "error_code": _conv_error,
    "timedelta_i32": _conv_ms_timedelta,
    "timedelta_i64": _conv_ms_timedelta,
    "datetime_i64": _conv_ms_datetime,
    "uuid": _conv_uuid,
}

# (name, converter or None, nested class or None, is_tuple, default or MISSING)
_Plan = list[tuple[str, Callable[[Any], Any] | None, Any, bool, Any]]


def _nested_type(tp: Any) -> tuple[Any, bool]:
    """Return (dataclass type or None, is_tuple) for a field annotation."""
    if get_origin(tp) is not tuple:  # unwrap `X | None`
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            tp = args[0]
    is_tuple = get_origin(tp) is tuple
    inner = get_args(tp)[0] if is_tuple else tp
    for candidate in (inner, *get_args(inner)):
        if hasattr(candidate, "__dataclass_fields__"):
            return candidate, is_tuple
    return None, is_tuple


@cache
def _plan(cls: Any) -> _Plan:
    plan: _Plan = []
    for f in fields(cls):
        nested, is_tuple = _nested_type(f.type)
        conv = None if nested else _CONVERTERS.get(f.metadata.get("kafka_type", ""))
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        elif is_tuple:
            default = _EMPTY_TUPLE  # absent arrays are sent empty
        else:
            default = MISSING
        plan.append((f.name, conv, nested, is_tuple, default))
    return plan


def build(cls: Any, data: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, conv, nested, is_tuple, default in _plan(cls):
        if name in data:
            value = data[name]
        elif default is MISSING:
            raise KeyError(f"{cls.__module__}.{cls.__name__} needs field {name!r}")
        elif default is _EMPTY_TUPLE:
            kwargs[name] = ()
            continue
        else:
            continue
        if value is None:
            pass  # a null array, struct or string: kio writes the null marker
        elif nested is not None:
            if is_tuple:
                value = tuple(
                    item if isinstance(item, nested) else build(nested, item) for item in value
                )
            elif not isinstance(value, nested):
                value = build(nested, value)
        elif conv is not None:
            value = tuple(conv(v) for v in value) if is_tuple else conv(value)
        elif is_tuple:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def ms(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """A kio duration or timestamp back to integer milliseconds (-1 for None)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value.days * 86400000 + value.seconds * 1000 + value.microseconds // 1000
    if isinstance(value, datetime.datetime):
        return ms(value - _EPOCH)
    return int(value)


@cache
def _non_null_plan(cls: Any) -> list[tuple[str, Any, bool, bool]]:
    """(name, nested class or None, is_tuple, nullable) for fields that can hold None."""
    plan = []
    for f in fields(cls):
        tp = f.type
        nullable = type(None) in get_args(tp) and get_origin(tp) is not tuple
        nested, is_tuple = _nested_type(tp)
        kafka_type = f.metadata.get("kafka_type", "")
        if nested is None and not is_tuple and kafka_type not in ("string", "bytes", "records"):
            continue  # fixed-size primitives are never None after decoding
        plan.append((f.name, nested, is_tuple, nullable))
    return plan


def find_illegal_null(entity: Any, path: str = "") -> str | None:
    """The path of the first field that is null although its schema says it cannot be.

    kio decodes a -1 length as None whatever the schema; Kafka rejects such a
    request as malformed, and so does odradek (the handlers may rely on it).
    """
    plan = _non_null_plan(type(entity))  # type: ignore[arg-type]  # classes are hashable
    for name, nested, is_tuple, nullable in plan:
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return f"{path}{name}"
            continue
        if nested is not None:
            items = value if is_tuple else (value,)
            for i, item in enumerate(items):
                found = find_illegal_null(item, f"{path}{name}[{i}]." if is_tuple else f"{path}{name}.")
                if found:
                    return found
    return None


# The value a required field takes in an error answer, by Kafka type.
_ERROR_FILL: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0,
    "uint32": 0, "uint64": 0, "float64": 0.0, "uuid": uuid.UUID(int=0),
    "timedelta_i32": 0, "timedelta_i64": 0, "datetime_i64": None,
    "string": "", "bytes": b"", "records": None, "error_code": 0,
}


def _error_fill(cls: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, _conv, nested, is_tuple, default in _plan(cls):
        if default is not MISSING or is_tuple:
            continue
        if nested is not None:
            data[name] = _error_fill(nested)
        else:
            kafka_type = next(f for f in fields(cls) if f.name == name).metadata["kafka_type"]
            data[name] = _ERROR_FILL[kafka_type]
    return data


def has_field(cls: Any, name: str) -> bool:
    return any(f.name == name for f in fields(cls))


def error_response(cls: Any, code: int, message: str | None = None) -> dict[str, Any]:
    """A whole-request error answer for response class `cls`: the top-level
    `error_code` (and `error_message`) where the version has them, arrays empty,
    every other required field zero. A version with no top-level error code gets
    just the empty answer (Kafka's answer, e.g., to an unauthorized DescribeLogDirs v0-2)."""
    data = _error_fill(cls)
    if has_field(cls, "error_code"):
        data["error_code"] = code
    if message is not None and has_field(cls, "error_message"):
        data["error_message"] = message
    return data
