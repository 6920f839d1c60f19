"""The C record walk (protocol/_record_walk.c) against the Python walk it accelerates.

The C walk may only say "well formed, these records have no key" when the Python
walk says exactly that; on anything else it answers None and the Python walk
gives the error. These tests feed both well-formed batches and mutated blobs
(bit flips, overwrites with hostile varints, truncation, insertion) and compare.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import record_scan
from odradek.protocol.records import (
    BATCH_OVERHEAD,
    InvalidRecords,
    Record,
    build_batch,
    parse_batch_header,
)

pytestmark = pytest.mark.skipif(
    not record_scan.c_walk_available(),
    reason="the C record walk was not built (no C compiler or Python headers at install)",
)

_records = st.lists(
    st.builds(
        Record,
        offset=st.just(-1),
        timestamp=st.integers(0, 2**41),
        key=st.none() | st.binary(max_size=300),
        value=st.none() | st.binary(max_size=300),
        headers=st.lists(
            st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=30)), max_size=3,
        ).map(tuple),
    ),
    min_size=1,
    max_size=20,
)


def _python(blob: bytes, count: int) -> list[int] | str:
    try:
        return record_scan._check_records_py(blob, 0, len(blob), count)
    except InvalidRecords as e:
        return f"error: {e.message}"


def _c(blob: bytes, count: int) -> list[int] | None:
    walk = record_scan._c_walk
    assert walk is not None
    result: list[int] | None = walk(blob, 0, len(blob), count)
    return result


def _blob_and_count(records: list[Record]) -> tuple[bytes, int]:
    batch = build_batch(records)
    header = parse_batch_header(batch, 0)
    return batch[BATCH_OVERHEAD:header.size], header.records_count


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records)
def test_well_formed_batches_give_the_same_keyless_records(records: list[Record]) -> None:
    blob, count = _blob_and_count(records)
    expected = [i for i, r in enumerate(records) if r.key is None]
    assert _python(blob, count) == expected
    assert _c(blob, count) == expected


_hostile_varints = st.sampled_from([
    b"\x01", b"\x00", b"\x7f", b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f",
    b"\xff" * 9 + b"\x01", b"\xff" * 10 + b"\x01", b"\x80" * 9 + b"\x00", b"\xfe\xff\xff\xff\x07",
    b"\x80\x80\x80\x80\x02",
])


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records, st.data())
def test_mutated_blobs_get_the_python_walks_answer(records: list[Record], data: st.DataObject) -> None:
    blob, count = _blob_and_count(records)
    buf = bytearray(blob)
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "overwrite", "varint", "truncate", "insert"]))
        at = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "overwrite" and buf:
            buf[at] = data.draw(st.integers(0, 255))
        elif kind == "varint":
            v = data.draw(_hostile_varints)
            buf[at:at + len(v)] = v
        elif kind == "truncate":
            del buf[at:]
        else:
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    count = data.draw(st.sampled_from([count, count - 1, count + 1, 0]))
    python, c = _python(bytes(buf), count), _c(bytes(buf), count)
    if isinstance(python, str):
        assert c is None, python
    else:
        assert c == python


def test_check_records_reports_the_python_walks_error_when_the_c_walk_refuses() -> None:
    _blob, count = _blob_and_count([Record(-1, 1, b"k", b"v")])
    batch = bytearray(build_batch([Record(-1, 1, b"k", b"v")]))
    header = parse_batch_header(batch, 0)
    assert record_scan.check_records(bytes(batch), header) == []
    # a record length one byte longer than the record: both walks refuse it
    batch[BATCH_OVERHEAD] += 2
    with pytest.raises(InvalidRecords, match="record length out of bounds"):
        record_scan.check_records(bytes(batch), parse_batch_header(batch, 0))
    assert _c(bytes(batch[BATCH_OVERHEAD:]), count) is None


def test_arguments_outside_the_buffer_are_refused_not_read() -> None:
    walk = record_scan._c_walk
    assert walk is not None
    assert walk(b"\x00" * 4, 0, 5, 1) is None
    assert walk(b"\x00" * 4, -1, 4, 1) is None
    assert walk(b"\x00" * 4, 3, 2, 1) is None
    assert walk(b"", 0, 0, 0) == []
    assert walk(memoryview(b"xx\x00"), 2, 2, 0) == []
