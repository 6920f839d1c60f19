"""A filled-in message of any kio class, for walking every length and count.

`sample(cls)` gives every array two elements, every string and bytes field a
short value and every nullable struct a value, so that each length and count
of the schema appears in the encoding (`guard.length_fields` finds them).
"""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from odradek.protocol.entities import _nested_type

_ZERO: dict[str, Any] = {
    "bool": False, "int8": 1, "int16": 1, "int32": 1, "int64": 1, "uint16": 1, "uint32": 1,
    "uint64": 1, "float64": 1.0, "uuid": uuid.UUID(int=7), "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(milliseconds=1),
    "timedelta_i64": datetime.timedelta(milliseconds=1),
    "datetime_i64": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    "string": "ab", "bytes": b"ab", "records": b"ab",
}


def sample(cls: Any) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        nested, is_array = _nested_type(f.type)
        if nested is not None:
            one: Any = sample(nested)
        else:
            one = _ZERO[f.metadata["kafka_type"]]
        kwargs[f.name] = (one, one) if is_array else one
    return cls(**kwargs)


def encoded_sample(cls: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, sample(cls))
    return buf.getvalue()
