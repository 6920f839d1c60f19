"""Hostile and malformed input on raw sockets.

The rule (DESIGN.md, "Errors are answers"): bad input gets the Kafka error
code for it or a closed connection -- never a crashed or stuck broker. So
every case ends by checking that a fresh client is still served.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

from tests.integration.clients import (
    BATCH_CRC_OFFSET,
    Out,
    Wire,
    answered_or_closed,
    api_versions_v0,
    assert_broker_serves,
    ck_consume,
    ck_produce,
    create_topic,
    parse_response,
    produce_request_v9,
    record_batch,
    watermarks,
)

pytestmark = pytest.mark.timeout(90)

API_VERSIONS = 18
UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
SOCKET_REQUEST_MAX_BYTES = 104857600  # Kafka's socket.request.max.bytes default

# The APIs of odradek's first milestone (api key -> name).
MILESTONE_APIS = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    35: "DescribeLogDirs",
    37: "CreatePartitions",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
    75: "DescribeTopicPartitions",
}


def _parse_api_versions_v0(frame: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation_id, error_code, {api_key: (min, max)}) from an ApiVersions
    v0 response frame (response header v0)."""
    corr, err, n = struct.unpack_from(">ihi", frame, 0)
    pos = 10
    keys = {}
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", frame, pos)
        keys[k] = (lo, hi)
        pos += 6
    assert pos == len(frame), "trailing bytes after ApiVersions v0 body"
    return corr, err, keys


# --------------------------------------------------------------------------
# ApiVersions
# --------------------------------------------------------------------------


def test_api_versions_v3_lists_milestone_apis(broker):
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    with Wire(broker.bootstrap) as w:
        # ApiVersions v3 body: client_software_name, client_software_version
        # (compact strings), then empty tagged fields.
        body = b"\x07itests" + b"\x040.1" + b"\x00"
        w.send_request(API_VERSIONS, 3, 11, body, header_version=2)
        frame = w.read_frame()
        assert frame is not None
        # ApiVersions responses always use response header v0 (no tagged fields).
        corr, resp = parse_response(frame, ApiVersionsResponse, flexible_header=False)
    assert corr == 11
    assert resp.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    missing = {name for key, name in MILESTONE_APIS.items() if key not in advertised}
    assert not missing, f"ApiVersions does not advertise {sorted(missing)}"
    assert advertised[API_VERSIONS][0] == 0 and advertised[API_VERSIONS][1] >= 3
    for key, (lo, hi) in advertised.items():
        assert 0 <= lo <= hi, (key, lo, hi)


@pytest.mark.parametrize("version", [4 + 100, 32767])
def test_unsupported_api_versions_version_gets_v0_error_response(broker, version):
    """Kafka's rule: an ApiVersions request newer than the broker knows is
    answered with an ApiVersions *v0* response carrying UNSUPPORTED_VERSION
    (35) and at least the ApiVersions range, so the client can retry lower
    on the same connection."""
    with Wire(broker.bootstrap) as w:
        # Versions >= 3 are flexible: request header v2 (tagged fields after client id).
        w.send_request(API_VERSIONS, version, 77, b"\x00\x00\x00", header_version=2)
        frame = w.read_frame()
        assert frame is not None, "broker closed the connection instead of answering"
        corr, err = struct.unpack_from(">ih", frame, 0)
        assert (corr, err) == (77, UNSUPPORTED_VERSION)
        _corr, _err, keys = _parse_api_versions_v0(frame)
        assert API_VERSIONS in keys
        lo, hi = keys[API_VERSIONS]
        assert lo == 0 and 3 <= hi < version
        # Same connection, supported version: a normal answer.
        corr, err = api_versions_v0(w, correlation_id=78)
        assert (corr, err) == (78, 0)
    assert_broker_serves(broker.bootstrap)


# --------------------------------------------------------------------------
# Unknown API key
# --------------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [9999, 32000, -7])
def test_unknown_api_key_is_answered_or_closed(broker, api_key):
    with Wire(broker.bootstrap) as w:
        w.send_request(api_key, 0, 5, b"\x00" * 8, header_version=1)
        frame = answered_or_closed(w, 10)
        if frame is not None:
            # Answered: it must at least be an answer to *this* request.
            (corr,) = struct.unpack_from(">i", frame, 0)
            assert corr == 5
    assert_broker_serves(broker.bootstrap)


def test_unknown_api_key_then_valid_request_on_new_connection(broker):
    """Many unknown-key requests in a row do not pile up state or stall the broker."""
    for i in range(20):
        with Wire(broker.bootstrap, timeout=5) as w:
            w.send_request(1000 + i, 0, i, b"", header_version=1)
            w.closed_by_peer(timeout=0.2)
    assert_broker_serves(broker.bootstrap)


# --------------------------------------------------------------------------
# Framing
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [
        b"\x00\x00",  # half a size prefix
        struct.pack(">i", 100) + b"\x00\x12" * 5,  # 10 of 100 promised bytes
        struct.pack(">i", 22) + struct.pack(">hhi", 18, 0, 1),  # header cut short
    ],
)
def test_truncated_frame_then_close(broker, sent):
    with Wire(broker.bootstrap) as w:
        w.send_raw(sent)
        time.sleep(0.2)
    assert_broker_serves(broker.bootstrap)


def test_truncated_frame_does_not_block_other_connections(broker):
    """A connection that stops mid-frame must not hold up anyone else."""
    with Wire(broker.bootstrap) as stuck:
        stuck.send_raw(struct.pack(">i", 1000) + b"\x00" * 10)
        t0 = time.monotonic()
        assert_broker_serves(broker.bootstrap)
        assert time.monotonic() - t0 < 10
        # The stuck connection gets no answer for its incomplete frame.
        assert stuck.closed_by_peer(timeout=0.5) is False


@pytest.mark.parametrize("size", [SOCKET_REQUEST_MAX_BYTES + 1, 2**31 - 1])
def test_size_above_socket_request_max_bytes_closes(broker, size):
    with Wire(broker.bootstrap) as w:
        w.send_raw(struct.pack(">i", size) + b"\x00" * 64)
        assert w.closed_by_peer(timeout=10), f"size {size}: connection left open"
    assert_broker_serves(broker.bootstrap)


@pytest.mark.parametrize("size", [-1, -(2**31), 0])
def test_negative_or_zero_size_closes(broker, size):
    with Wire(broker.bootstrap) as w:
        w.send_raw(struct.pack(">i", size) + b"\x00" * 16)
        assert w.closed_by_peer(timeout=10), f"size {size}: connection left open"
    assert_broker_serves(broker.bootstrap)


def test_random_bytes(broker):
    """Seeded random garbage, raw and size-framed: each connection is either
    answered or closed, promptly, and the broker keeps serving."""
    rng = random.Random(20240611)
    for i in range(40):
        with Wire(broker.bootstrap, timeout=5) as w:
            if i % 2 == 0:
                w.send_raw(rng.randbytes(rng.randint(1, 300)))
                w.closed_by_peer(timeout=0.2)
            else:
                # A well-formed frame around a random body: the broker has the
                # whole frame, so it must answer it or close, not wait.
                body = rng.randbytes(rng.randint(0, 200))
                w.send_frame(body)
                answered_or_closed(w, 5)
    assert_broker_serves(broker.bootstrap)


def test_many_connections_opened_and_dropped(broker):
    socks = [Wire(broker.bootstrap, timeout=5) for _ in range(50)]
    for w in socks:
        w.close()
    assert_broker_serves(broker.bootstrap)


# --------------------------------------------------------------------------
# Produce with bad batches
# --------------------------------------------------------------------------


def _produce_raw(bootstrap: str, topic: str, partition: int, batch: bytes, corr: int):
    from kio.schema.produce.v9.response import ProduceResponse

    with Wire(bootstrap) as w:
        w.send_request(0, 9, corr, produce_request_v9(topic, partition, batch, acks=-1))
        frame = w.read_frame()
        assert frame is not None, "broker closed the connection instead of answering Produce"
        got_corr, resp = parse_response(frame, ProduceResponse, flexible_header=True)
    assert got_corr == corr
    [t] = resp.responses
    assert t.name == topic
    [p] = t.partition_responses
    assert p.index == partition
    return p


def test_produce_raw_valid_batch(broker, topic_name):
    """The hand-built batch itself is good: it is accepted and reads back."""
    create_topic(broker.bootstrap, topic_name, 1)
    ts = int(time.time() * 1000)
    p = _produce_raw(
        broker.bootstrap, topic_name, 0, record_batch([(b"k1", b"v1"), (None, b"v2")], ts), corr=31
    )
    assert (int(p.error_code), p.base_offset) == (0, 0)
    got = ck_consume(broker.bootstrap, topic_name, 2)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (0, b"k1", b"v1", ts),
        (1, None, b"v2", ts),
    ]


@pytest.mark.parametrize("where", ["crc", "body"])
def test_produce_bad_crc_is_corrupt_message(broker, topic_name, where):
    create_topic(broker.bootstrap, topic_name, 1)
    ts = int(time.time() * 1000)
    batch = bytearray(record_batch([(b"k", b"value-that-was-damaged")], ts))
    if where == "crc":
        batch[BATCH_CRC_OFFSET] ^= 0xFF
    else:
        batch[-5] ^= 0x01  # flip a bit inside the record value; the CRC no longer matches
    p = _produce_raw(broker.bootstrap, topic_name, 0, bytes(batch), corr=32)
    assert int(p.error_code) == CORRUPT_MESSAGE
    # Nothing was appended: the next good batch lands at offset 0 and is all there is.
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"good")])
    assert d[0].offset == 0
    got = ck_consume(broker.bootstrap, topic_name, 1)
    assert [(r.offset, r.value) for r in got] == [(0, b"good")]
    assert_broker_serves(broker.bootstrap)


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_produce_garbage_records_behind_a_valid_crc_is_corrupt_message(broker, topic_name, codec):
    """The fuzzer's find: the CRC only says the bytes are the client's; records that do
    not decode (or do not decompress) were written and failed dump-log --verify."""
    from crc32c import crc32c

    from odradek.protocol.records import BATCH_OVERHEAD, Compression, Record, build_batch

    create_topic(broker.bootstrap, topic_name, 1)
    ts = int(time.time() * 1000)
    records = [Record(i, ts, b"k%d" % i, b"value-%d" % i * 4, ()) for i in range(3)]
    batch = bytearray(build_batch(records, compression=Compression[codec.upper()]))
    batch[BATCH_OVERHEAD + 1:] = bytes(range(7, 256))[: len(batch) - BATCH_OVERHEAD - 1]
    struct.pack_into(">I", batch, BATCH_CRC_OFFSET, crc32c(bytes(batch[21:])))
    p = _produce_raw(broker.bootstrap, topic_name, 0, bytes(batch), corr=33)
    assert int(p.error_code) == CORRUPT_MESSAGE
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"good")])
    assert d[0].offset == 0
    assert_broker_serves(broker.bootstrap)


def test_produce_raw_unknown_partition(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    p = _produce_raw(
        broker.bootstrap,
        topic_name,
        9,
        record_batch([(None, b"x")], int(time.time() * 1000)),
        corr=33,
    )
    assert int(p.error_code) == UNKNOWN_TOPIC_OR_PARTITION
    assert_broker_serves(broker.bootstrap)


def test_produce_truncated_request_body_closes(broker, topic_name):
    """A Produce frame whose body ends early cannot be parsed: Kafka closes
    the connection."""
    create_topic(broker.bootstrap, topic_name, 1)
    body = produce_request_v9(topic_name, 0, record_batch([(None, b"x" * 50)], 0))
    with Wire(broker.bootstrap) as w:
        w.send_request(0, 9, 34, body[: len(body) // 2])
        frame = answered_or_closed(w, 10)
        if frame is not None:
            # If answered at all, it is not a success for that request.
            from kio.schema.produce.v9.response import ProduceResponse

            try:
                _corr, resp = parse_response(frame, ProduceResponse)
            except Exception:  # noqa: BLE001 - an unparseable answer is no success either
                resp = None
            if resp is not None:
                codes = {int(p.error_code) for t in resp.responses for p in t.partition_responses}
                assert 0 not in codes
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 0)
    assert_broker_serves(broker.bootstrap)


# --------------------------------------------------------------------------
# Hostile sizes inside well-formed frames
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # Metadata v12: topics = compact array claiming 2**31 - 2 entries, then nothing.
        b"\xff\xff\xff\xff\x07",
        # Metadata v12: one topic whose compact name claims ~256 MiB.
        b"\x02" + b"\x00" * 16 + b"\x80\x80\x80\x80\x01" + b"abc",
    ],
    ids=["huge-array", "huge-string"],
)
def test_huge_counts_inside_request_are_refused(broker, body):
    """Length fields that promise far more than the frame holds must not make
    the broker allocate or wait for them: it answers or closes at once."""
    with Wire(broker.bootstrap) as w:
        w.send_request(3, 12, 61, body)
        t0 = time.monotonic()
        frame = answered_or_closed(w, 10)
        assert time.monotonic() - t0 < 10
        if frame is not None:
            (corr,) = struct.unpack_from(">i", frame, 0)
            assert corr == 61
    assert_broker_serves(broker.bootstrap)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_legacy_create_topics_with_a_huge_topic_count_is_refused(broker, version):
    """Issue 12's 88-byte request: CreateTopics in a non-flexible version whose int32
    topic count says 2**31 - 1. kio alone reserves ~13 GB for it and aborts the process;
    the broker must close the connection and keep serving."""
    body = (struct.pack(">i", 0x7FFFFFFF)  # topics: int32 count
            + struct.pack(">h", 1) + b"t" + struct.pack(">ihii", 1, 1, 0, 0)
            + struct.pack(">i?", 1000, False))
    with Wire(broker.bootstrap) as w:
        w.send_request(19, version, 62, body, header_version=1)
        t0 = time.monotonic()
        frame = answered_or_closed(w, 10)
        assert time.monotonic() - t0 < 10
        assert frame is None, "a request that cannot be decoded is not answered"
    assert_broker_serves(broker.bootstrap)


def test_pipelined_requests_answered_in_order(broker):
    """Requests from one connection are answered in the order they came
    (DESIGN.md, and Kafka's rule), even when sent back to back."""
    with Wire(broker.bootstrap) as w:
        frames = b""
        for corr in range(100, 120):
            hdr = struct.pack(">hhih", API_VERSIONS, 0, corr, 2) + b"it"
            frames += struct.pack(">i", len(hdr)) + hdr
        w.send_raw(frames)  # all 20 in one write
        got = []
        for _ in range(20):
            frame = w.read_frame()
            assert frame is not None
            corr, err = struct.unpack_from(">ih", frame, 0)
            assert err == 0
            got.append(corr)
    assert got == list(range(100, 120))


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_before_v12_is_invalid_request(broker, version):
    """Fuzzer find: a Metadata v10 with null topic names made a response kio could not
    encode (the name is non-nullable before v12): the handler raised and the connection
    closed. Kafka answers INVALID_REQUEST for every topic, a null name as ""."""
    import io
    import uuid

    from kio.schema.metadata import v10, v11
    from kio.serial import entity_writer

    mod = {10: v10, 11: v11}[version]
    req_cls, resp_cls = mod.request.MetadataRequest, mod.response.MetadataResponse
    topic_id = uuid.UUID(int=0xB66)
    req = req_cls(topics=(mod.request.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=None),
                          mod.request.MetadataRequestTopic(topic_id=topic_id, name=None)),
                  allow_auto_topic_creation=False,
                  include_topic_authorized_operations=False,
                  **({"include_cluster_authorized_operations": False} if version == 10 else {}))
    buf = io.BytesIO()
    entity_writer(req_cls)(buf, req)
    with Wire(broker.bootstrap) as w:
        w.send_request(3, version, 41, buf.getvalue())
        frame = answered_or_closed(w)
        assert frame is not None, "broker closed the connection instead of answering"
        corr, resp = parse_response(frame, resp_cls, flexible_header=True)
    assert corr == 41
    assert [(t.name, t.topic_id, int(t.error_code)) for t in resp.topics] == [
        ("", None, INVALID_REQUEST), ("", topic_id, INVALID_REQUEST)]  # kio: zero uuid = None
    assert_broker_serves(broker.bootstrap)


@pytest.mark.parametrize("num_partitions", [2**31 - 1, 2**28, 100_001])
def test_create_topics_with_a_huge_partition_count_is_refused_at_once(broker, num_partitions):
    """A CreateTopics whose num_partitions is a well-formed but huge int32: the
    controller placed every partition before checking the per-request cap, so
    2**31 - 1 meant building 2**31 replica assignments, and the broker stopped
    answering anyone. It is refused at once with the cap's error (Kafka's
    POLICY_VIOLATION, as test_admin pins for 10,001 partitions); nothing is created.
    librdkafka refuses more than 100000 itself, so the request is raw."""
    body = (struct.pack(">i", 1)  # one topic
            + struct.pack(">h", 4) + b"huge" + struct.pack(">ihii", num_partitions, 1, 0, 0)
            + struct.pack(">i?", 10000, False))
    with Wire(broker.bootstrap) as w:
        w.send_request(19, 4, 63, body, header_version=1)
        t0 = time.monotonic()
        frame = answered_or_closed(w, 10)
        assert time.monotonic() - t0 < 5
    assert frame is not None
    from kio.schema.create_topics.v4.response import CreateTopicsResponse

    corr, resp = parse_response(frame, CreateTopicsResponse, flexible_header=False)
    assert corr == 63
    [t] = resp.topics
    assert (t.name, int(t.error_code)) == ("huge", POLICY_VIOLATION)
    assert_broker_serves(broker.bootstrap)
