"""The length guard in front of kio's native reader (a hostile count must not abort us)."""

import io
import subprocess
import sys

import pytest
from kio.serial import entity_writer

from odradek.protocol import api, entities
from odradek.protocol.framing import MalformedRequest
from odradek.protocol.guard import check_flexible_request
from odradek.protocol.records import Record, build_batch

HOSTILE = bytes.fromhex("ffffffff0f")  # Metadata v12: a compact array of 2**32 - 1 topics


def test_kio_alone_aborts_the_process_on_a_huge_compact_count():
    """Why the guard exists: without it, six bytes kill the interpreter."""
    code = (
        "from kio.serial import entity_reader\n"
        "from odradek.protocol import api\n"
        f"entity_reader(api.request_class(3, 12))(bytes.fromhex('{HOSTILE.hex()}'), 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode != 0 and b"memory allocation" in proc.stderr


def test_guard_rejects_the_huge_count():
    with pytest.raises(MalformedRequest):
        check_flexible_request(api.request_class(3, 12), HOSTILE, 0)


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
    check_flexible_request(cls, body, 0)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            check_flexible_request(cls, body[:cut], 0)


def test_guard_walks_tagged_structs_and_nullable_fields():
    cls, body = _encoded(1, 16, {"cluster_id": "c", "replica_state": {"replica_id": 1,
                                 "replica_epoch": 2}, "max_wait": 0, "min_bytes": 0,
                                 "max_bytes": 100, "isolation_level": 0, "session_id": 0,
                                 "session_epoch": -1, "topics": [], "forgotten_topics_data": [],
                                 "rack_id": ""})
    check_flexible_request(cls, body, 0)
