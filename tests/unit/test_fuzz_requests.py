"""Fuzz the request path in-process: random and mutated frames never crash a handler.

A broker is started on an ephemeral port in a temp dir and frames are fed
straight to `Broker.handle_frame`. Every frame must end as a response whose
correlation id matches, no response (acks=0), or a closed connection; a
handler that raises (logged as "handler for ... failed") is a bug, as is an
exception escaping handle_frame.
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from odradek.broker.broker import Broker
from odradek.broker.pipeline import CLOSE
from odradek.config import BrokerConfig
from odradek.protocol import api, entities

# Admin calls that can create thousands of partitions from a few random bytes are
# left to their own bounded tests.
SKIP = {api.ApiKey.CREATE_TOPICS, api.ApiKey.CREATE_PARTITIONS}
KEYS = sorted(k for k in api.SUPPORTED_VERSIONS if k not in SKIP)


def _header(key: int, version: int, corr: int) -> bytes:
    out = struct.pack(">hhih", key, version, corr, 4) + b"fuzz"
    if api.request_header_version(key, version) >= 2:
        out += b"\x00"
    return out


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    loop = asyncio.new_event_loop()
    data = tmp_path_factory.mktemp("fuzz")
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data)}
    )
    broker = Broker(config)
    loop.run_until_complete(broker.start())
    # a topic for the requests to find
    produce_like = _valid_metadata_request()
    loop.run_until_complete(broker.handle_frame(produce_like, None))
    yield loop, broker
    loop.run_until_complete(broker.stop())
    loop.close()


def _valid_metadata_request() -> bytes:
    cls = api.request_class(api.ApiKey.METADATA, 12)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, {
        "topics": [{"name": "fuzzed", "topic_id": None}], "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False}))
    return _header(3, 12, 1) + buf.getvalue()


def _check(loop, broker, frame: bytes, corr: int, caplog) -> None:
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="odradek"):
        result = loop.run_until_complete(broker.handle_frame(frame, None))
    crashed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert not crashed, crashed
    if result is None or result is CLOSE:
        return
    if isinstance(result, list):  # Fetch answers in chunks (protocol/fetch_codec.py)
        result = b"".join(result)
    assert isinstance(result, bytes)
    size, got_corr = struct.unpack_from(">ii", result, 0)
    assert size == len(result) - 4 and got_corr == corr


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), data=st.data(), body=st.binary(max_size=300))
def test_random_bodies_for_every_api_version(running, caplog, key, data, body):
    loop, broker = running
    lo, hi = api.SUPPORTED_VERSIONS[key]
    version = data.draw(st.integers(lo, hi))
    _check(loop, broker, _header(key, version, 77) + body, 77, caplog)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=6),
       cut=st.integers(0, 10_000))
def test_mutated_valid_requests(running, caplog, flips, cut):
    loop, broker = running
    frame = bytearray(_valid_metadata_request())
    for pos, xor in flips:
        if 8 <= pos < len(frame):  # keep key/version so the request reaches a handler
            frame[pos] ^= xor
    frame = frame[: max(10, cut)] if cut < len(frame) else frame
    corr = struct.unpack_from(">i", frame, 4)[0]
    _check(loop, broker, bytes(frame), corr, caplog)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=st.binary(max_size=64))
def test_arbitrary_bytes_as_a_frame(running, caplog, frame):
    loop, broker = running
    corr = struct.unpack_from(">i", frame, 4)[0] if len(frame) >= 8 else 0
    _check(loop, broker, frame, corr, caplog)
