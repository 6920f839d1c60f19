"""The length guard in front of kio's native reader (a hostile count must not abort us)."""

import io
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from kio.serial import entity_writer

from odradek.protocol import api, entities
from odradek.protocol.framing import MalformedRequest, encode_uvarint
from odradek.protocol.guard import check_message, length_fields
from odradek.protocol.records import Record, build_batch

HOSTILE = bytes.fromhex("ffffffff0f")  # Metadata v12: a compact array of 2**32 - 1 topics


def test_kio_alone_aborts_the_process_on_a_huge_compact_count():
    """Why the guard exists: without it, six bytes kill the interpreter."""
    code = (
        "from kio.serial import entity_reader\n"
        "from odradek.protocol import api\n"
        f"entity_reader(api.request_class(3, 12))(bytes.fromhex('{HOSTILE.hex()}'), 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, timeout=60)
    assert proc.returncode != 0 and b"memory allocation" in proc.stderr


def test_guard_rejects_the_huge_count():
    with pytest.raises(MalformedRequest):
        check_message(api.request_class(3, 12), HOSTILE, 0)


def _encoded(key, version, data):
    cls = api.request_class(key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, data))
    return cls, buf.getvalue()


def test_guard_accepts_valid_requests_and_rejects_every_truncation():
    batch = build_batch([Record(offset=0, timestamp=1, key=b"k", value=b"v")])
    cls, body = _encoded(0, 9, {"transactional_id": None, "acks": 1, "timeout": 100,
                                "topic_data": [{"name": "t", "partition_data": [
                                    {"index": 0, "records": batch}]}]})
    check_message(cls, body, 0)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            check_message(cls, body[:cut], 0)


def test_guard_walks_tagged_structs_and_nullable_fields():
    cls, body = _encoded(1, 16, {"cluster_id": "c", "replica_state": {"replica_id": 1,
                                 "replica_epoch": 2}, "max_wait": 0, "min_bytes": 0,
                                 "max_bytes": 100, "isolation_level": 0, "session_id": 0,
                                 "session_epoch": -1, "topics": [], "forgotten_topics_data": [],
                                 "rack_id": ""})
    check_message(cls, body, 0)


# -- every length and count of every version ------------------------------------------------

def _attack_88_bytes() -> bytes:
    """The request of issue 12: CreateTopics v4 (not flexible), topic count 2**31 - 1."""
    _cls, body = _encoded(19, 4, {"topics": [{"name": "t", "num_partitions": 1,
                                             "replication_factor": 1, "assignments": [],
                                             "configs": []}],
                                 "timeout": 1000, "validate_only": False})
    body = struct.pack(">i", 0x7FFFFFFF) + body[4:]
    header = struct.pack(">hhih", 19, 4, 1, 4) + b"evil"
    return header + body


def test_the_88_byte_legacy_attack_is_refused_before_kio_reserves_memory():
    frame = _attack_88_bytes()
    cls = api.request_class(19, 4)
    with pytest.raises(MalformedRequest, match="needs at least"):
        check_message(cls, frame, 14)


def test_kio_alone_fails_on_the_legacy_attack_under_a_memory_limit():
    """Why legacy versions are walked too: kio reserves for an int32 count unchecked."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from kio.serial import entity_reader\n"
        "from odradek.protocol import api\n"
        f"entity_reader(api.request_class(19, 4))(bytes.fromhex('{_attack_88_bytes().hex()}'), 14)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, timeout=120)
    assert proc.returncode != 0 and b"memory allocation" in proc.stderr, proc.stderr[-500:]


HOSTILE_VALUES = {
    "int16": [-1, -2, 0x7FFF],
    "int32": [-1, -2, 0x7FFFFFFF, 1 << 28, -0x80000000],
    "varint": [0, 0xFFFFFFFF, 1 << 28, 0x7FFFFFFF],
}


def hostile_variants(body: bytes, marks):
    for pos, width, kind in marks:
        for value in HOSTILE_VALUES[kind]:
            if kind == "int16":
                repl = struct.pack(">h", value)
            elif kind == "int32":
                repl = struct.pack(">i", value)
            else:
                repl = encode_uvarint(value)
            yield body[:pos] + repl + body[pos + width:]


def _all_message_classes():
    for table in (api.SUPPORTED_VERSIONS, api.CONTROLLER_VERSIONS):
        for key, (lo, hi) in sorted(table.items()):
            for version in range(lo, hi + 1):
                yield key, version, api.request_class(key, version)
                yield key, version, api.response_class(key, version)


def test_every_length_of_every_message_is_found_in_a_filled_sample():
    from tests.fuzz.samples import encoded_sample

    checked = 0
    for key, version, cls in _all_message_classes():
        body = encoded_sample(cls)
        assert check_message(cls, body, 0) == len(body), (key, version, cls.__name__)
        checked += len(length_fields(cls, body, 0))
    assert checked > 2000


SWEEP = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from tests.unit.test_protocol_guard import _all_message_classes, hostile_variants
from tests.fuzz.samples import encoded_sample
from odradek.protocol.guard import decode_message, length_fields
from odradek.protocol.framing import MalformedRequest, encode_uvarint
refused = decoded = 0
for key, version, cls in _all_message_classes():
    body = encoded_sample(cls)
    for variant in hostile_variants(body, length_fields(cls, body, 0)):
        try:
            decode_message(cls, variant, 0)
            decoded += 1
        except MalformedRequest:
            refused += 1
        except Exception:
            decoded += 1  # kio's own refusal (bad UTF-8, a null where none may be)
print(refused, decoded)
"""


def test_hostile_lengths_in_every_message_never_reach_an_over_reservation():
    """Each length and count of every request and response of every version we speak,
    set to -1, -2, 2**15-1, 2**28, 2**31-1 or -2**31, is refused by the guard or
    decoded by kio within a 3 GiB address space: no abort."""
    proc = subprocess.run([sys.executable, "-c", SWEEP], check=False, capture_output=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused, decoded = map(int, proc.stdout.split())
    assert refused > 5000, (refused, decoded)
