"""The fast Fetch response encoder agrees byte for byte with kio's, in every version."""

import io
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from odradek.protocol.fetch_codec import (
    REPLICA_FETCH_VERSION,
    decode_replica_fetch,
    encode_fetch_response,
    encode_replica_fetch,
)
from odradek.protocol.framing import MalformedRequest, encode_response_frame

VERSIONS = range(api.SUPPORTED_VERSIONS[api.ApiKey.FETCH][0],
                 api.SUPPORTED_VERSIONS[api.ApiKey.FETCH][1] + 1)

partitions = st.lists(
    st.fixed_dictionaries({
        "partition_index": st.integers(0, 1000),
        "error_code": st.sampled_from([0, 1, 3, 6]),
        "high_watermark": st.integers(-1, 2**40),
        "last_stable_offset": st.integers(-1, 2**40),
        "log_start_offset": st.integers(-1, 2**40),
        "aborted_transactions": st.one_of(st.none(), st.lists(st.fixed_dictionaries({
            "producer_id": st.integers(0, 2**40), "first_offset": st.integers(0, 2**40)}),
            max_size=3)),
        "preferred_read_replica": st.just(-1),
        "records": st.one_of(st.none(), st.binary(max_size=300)),
        "current_leader": st.one_of(st.just({"leader_id": -1, "leader_epoch": -1}),
                                    st.fixed_dictionaries({"leader_id": st.integers(0, 5),
                                                           "leader_epoch": st.integers(0, 9)})),
    }), max_size=4)
responses = st.lists(st.fixed_dictionaries({
    "topic": st.text(alphabet="abcxyz-._", min_size=1, max_size=20),
    "topic_id": st.uuids(),
    "partitions": partitions}), max_size=3)


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), resps=responses,
       session_id=st.integers(0, 2**31 - 1), throttle=st.integers(0, 1000))
def test_matches_kio_byte_for_byte(version, resps, session_id, throttle):
    data = {"throttle_time": throttle, "error_code": 0, "session_id": session_id,
            "responses": resps}
    cls = api.response_class(api.ApiKey.FETCH, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, data))
    expected = encode_response_frame(42, api.response_header_version(1, version), buf.getvalue())
    got = b"".join(encode_fetch_response(version, 42, data))
    assert got == expected


def test_records_are_not_copied():
    records = b"x" * 100_000
    data = {"responses": [{"topic": "t", "topic_id": uuid.uuid4(), "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 1, "records": records}]}]}
    for version in (4, 12, 16):
        chunks = encode_fetch_response(version, 1, data)
        assert any(c is records for c in chunks)
        frame = b"".join(chunks)
        cls = api.response_class(api.ApiKey.FETCH, version)
        pos = 8 + (1 if version >= 12 else 0)
        decoded, size = entity_reader(cls)(frame, pos)
        assert pos + size == len(frame)
        assert bytes(decoded.responses[0].partitions[0].records) == records


def test_a_null_topic_id_is_answered_as_the_zero_id():
    """kio decodes a request's all-zero topic id as None; the handlers echo the
    request's id back (UNKNOWN_TOPIC_ID), and the answer must still encode (a
    fuzzed Fetch v13+ with a zero id once failed in the encoder)."""
    data = {"responses": [{"topic": "t", "topic_id": None, "partitions": [
        {"partition_index": 0, "error_code": 100, "high_watermark": -1, "records": b""}]}]}
    for version in (13, 16):
        frame = b"".join(encode_fetch_response(version, 7, data))
        cls = api.response_class(api.ApiKey.FETCH, version)
        resp, _ = entity_reader(cls)(frame, 9)  # size, correlation id, tagged fields
        assert resp.responses[0].topic_id in (None, uuid.UUID(int=0))
        assert resp.responses[0].partitions[0].error_code.value == 100


fetch_positions = st.dictionaries(
    st.text(min_size=1, max_size=30),
    st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**31 - 1),
                       st.integers(0, 2**62), st.integers(-1, 2**31 - 1),
                       st.integers(-1, 2**62), st.integers(0, 2**31 - 1)), max_size=4),
    max_size=3)


@settings(max_examples=150, deadline=None)
@given(fetch_positions, st.integers(0, 2**31 - 1), st.integers(0, 30_000),
       st.integers(0, 2**20))
def test_replica_fetch_request_matches_kio(topics, replica_id, max_wait_ms, min_bytes):
    cls = api.request_class(api.ApiKey.FETCH, REPLICA_FETCH_VERSION)
    request = {
        "cluster_id": None, "replica_id": replica_id, "max_wait": max_wait_ms,
        "min_bytes": min_bytes, "max_bytes": 10 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": t, "partitions": [
            {"partition": p, "current_leader_epoch": e, "fetch_offset": o,
             "last_fetched_epoch": le, "log_start_offset": s, "partition_max_bytes": m}
            for p, e, o, le, s, m in ps]} for t, ps in topics.items()],
        "forgotten_topics_data": [], "rack_id": "",
    }
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, request))
    assert encode_replica_fetch(replica_id, max_wait_ms, min_bytes, 10 << 20,
                                topics) == buf.getvalue()


diverging = st.one_of(st.just(None), st.tuples(st.integers(-1, 2**31 - 1),
                                               st.integers(-1, 2**62)))


@settings(max_examples=60, deadline=None)
@given(resps=responses, diverge=st.lists(diverging, min_size=12, max_size=12),
       code=st.sampled_from([0, 7]))
def test_replica_fetch_answer_reads_as_kio_reads_it(resps, diverge, code):
    """The follower's decoder agrees with kio's reader on any v12 answer (the
    leader's own encoder writes it), and gives records as views, not copies."""
    k = iter(diverge)
    for t in resps:
        for p in t["partitions"]:
            d = next(k, None)
            if d is not None:
                p["diverging_epoch"] = {"epoch": d[0], "end_offset": d[1]}
    data = {"throttle_time": 0, "error_code": code, "session_id": 0, "responses": resps}
    frame = b"".join(encode_fetch_response(REPLICA_FETCH_VERSION, 9, data))[4:]
    cls = api.response_class(api.ApiKey.FETCH, REPLICA_FETCH_VERSION)
    expected, _ = entity_reader(cls)(frame, 5)
    got_code, got = decode_replica_fetch(frame, 5)
    assert got_code == code
    want = [(t.topic, p) for t in expected.responses for p in t.partitions]
    assert len(got) == len(want)
    for mine, (topic, theirs) in zip(got, want, strict=True):
        assert (mine.topic, mine.partition, mine.error_code, mine.high_watermark,
                mine.log_start_offset) == (topic, theirs.partition_index,
                                           int(theirs.error_code), theirs.high_watermark,
                                           theirs.log_start_offset)
        assert isinstance(mine.records, memoryview)
        assert bytes(mine.records) == bytes(theirs.records or b"")
        de = theirs.diverging_epoch
        if de.epoch == -1 and de.end_offset == -1:
            assert mine.diverging_epoch in (None, (-1, -1))
        else:
            assert mine.diverging_epoch == (de.epoch, de.end_offset)


@settings(max_examples=60, deadline=None)
@given(resps=responses, cut=st.integers(0, 10_000), flip=st.integers(0, 255))
def test_a_cut_or_corrupt_replica_fetch_answer_raises_malformed_only(resps, cut, flip):
    data = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": resps}
    frame = bytearray(b"".join(encode_fetch_response(REPLICA_FETCH_VERSION, 9, data))[4:])
    at = 5 + cut % max(len(frame) - 5, 1)
    for bad in (frame[:at], frame[:at] + bytes([flip]) + frame[at + 1:]):
        try:
            decode_replica_fetch(bytes(bad), 5)
        except MalformedRequest:
            pass
