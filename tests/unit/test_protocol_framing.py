import io
import struct

import pytest
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from odradek.protocol.framing import (
    FrameDecoder,
    FrameTooLarge,
    MalformedRequest,
    encode_response_frame,
    parse_request_header,
)


def _header_v1(api_key: int, version: int, corr: int, client: bytes | None) -> bytes:
    out = struct.pack(">hhi", api_key, version, corr)
    if client is None:
        return out + struct.pack(">h", -1)
    return out + struct.pack(">h", len(client)) + client


def test_every_advertised_version_has_kio_classes():
    for key, (lo, hi) in api.SUPPORTED_VERSIONS.items():
        for v in range(lo, hi + 1):
            assert api.request_class(key, v).__api_key__ == key
            assert api.response_class(key, v).__version__ == v


def test_header_v1_parses_client_id_and_body_offset():
    frame = _header_v1(0, 3, 77, b"me") + b"BODY"
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (0, 3, 77, "me")
    assert frame[h.body_offset :] == b"BODY"


def test_header_v2_skips_tagged_fields():
    # Metadata v12 is flexible: header v2 has a tagged-field section.
    frame = _header_v1(3, 12, 5, None) + b"\x01\x07\x02ab" + b"REST"
    h = parse_request_header(frame)
    assert h.client_id is None
    assert frame[h.body_offset :] == b"REST"


@pytest.mark.parametrize("frame", [b"", b"\x00\x03", _header_v1(3, 12, 1, b"x")[:-1]])
def test_truncated_headers_are_malformed(frame):
    with pytest.raises(MalformedRequest):
        parse_request_header(frame)


def test_unknown_api_parses_as_header_only():
    h = parse_request_header(_header_v1(9999, 0, 1, b""))
    assert h.api_key == 9999
    assert not api.is_supported(9999, 0)


def test_frame_decoder_splits_and_buffers():
    d = FrameDecoder(100)
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"d"
    assert d.feed(data) == [b"abc"]
    assert d.buffered_bytes == 5
    assert d.feed(b"e") == [b"de"]
    assert d.buffered_bytes == 0


@pytest.mark.parametrize("size", [101, -1, 2**31 - 1])
def test_frame_decoder_rejects_oversized_and_negative(size):
    d = FrameDecoder(100)
    with pytest.raises(FrameTooLarge):
        d.feed(struct.pack(">i", size))


def test_response_frame_header_versions():
    assert encode_response_frame(7, 0, b"xy") == struct.pack(">ii", 6, 7) + b"xy"
    assert encode_response_frame(7, 1, b"xy") == struct.pack(">ii", 7, 7) + b"\x00xy"


def test_build_drops_fields_the_version_lacks_and_round_trips():
    data = {
        "throttle_time": 12,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [],
        "cluster_authorized_operations": -(2**31),
    }
    for version in (0, 1, 9, 12):
        cls = api.response_class(api.ApiKey.METADATA, version)
        entity = entities.build(cls, data)
        buf = io.BytesIO()
        entity_writer(cls)(buf, entity)
        decoded, size = entity_reader(cls)(buf.getvalue(), 0)
        assert size == len(buf.getvalue())
        assert decoded.brokers[0].port == 9092
        if version >= 3:
            assert entities.ms(decoded.throttle_time) == 12


def test_build_converts_error_codes_and_reports_missing_fields():
    cls = api.response_class(api.ApiKey.CREATE_PARTITIONS, 0)
    entity = entities.build(cls, {"throttle_time": 0, "results": [
        {"name": "t", "error_code": 37, "error_message": "no"}]})
    assert entity.results[0].error_code.value == 37
    assert entities.build(cls, {"throttle_time": 0}).results == ()
    with pytest.raises(KeyError):
        entities.build(api.response_class(api.ApiKey.INIT_PRODUCER_ID, 0), {"throttle_time": 0})


def test_build_handles_nullable_arrays_of_structs():
    cls = api.response_class(api.ApiKey.CREATE_TOPICS, 7)
    entity = entities.build(cls, {"throttle_time": 0, "topics": [{
        "name": "t", "topic_id": None, "error_code": 0, "error_message": None,
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": [{"name": "a", "value": "b", "read_only": False, "config_source": 5,
                     "is_sensitive": False}]}]})
    assert entity.topics[0].configs[0].name == "a"


def test_build_keeps_null_primitive_arrays():
    cls = api.response_class(api.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    entity = entities.build(cls, {"throttle_time": 0, "next_cursor": None, "topics": [{
        "error_code": 0, "name": "t", "topic_id": None, "is_internal": False,
        "topic_authorized_operations": 0,
        "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 1,
                        "leader_epoch": 0, "replica_nodes": [1], "isr_nodes": [1],
                        "eligible_leader_replicas": None, "last_known_elr": None,
                        "offline_replicas": []}]}]})
    assert entity.topics[0].partitions[0].eligible_leader_replicas is None
    assert entity.topics[0].partitions[0].replica_nodes == (1,)
