"""Every Raft core message survives the trip through Kafka's wire RPCs (kio),
both ways, as metadata/raft_wire.py translates them."""

from __future__ import annotations

import io
import struct

import pytest
from kio.serial import entity_reader, entity_writer

from odradek.metadata import raft_wire as W
from odradek.protocol import api, entities
from odradek.protocol import records as batches
from odradek.protocol.fetch_codec import encode_fetch_response
from odradek.raft import messages as M
from odradek.raft.config import VoterAddress
from odradek.raft.log import OffsetAndEpoch, RecordsSlice


def _through_kio(cls: object, data: dict) -> object:  # type: ignore[type-arg]
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, data))
    value, size = entity_reader(cls)(buf.getvalue(), 0)
    assert size == len(buf.getvalue())
    return value


REQUESTS = [
    M.VoteRequest(7, 2, 6, 120, pre_vote=True),
    M.VoteRequest(8, 3, 7, 0, pre_vote=False),
    M.BeginQuorumEpochRequest(1, 9),
    M.EndQuorumEpochRequest(1, 9, (3, 2)),
    M.FetchRequest(2, 9, 55, 8, 500),
    # KIP-853 voter keys (Vote v2, BeginQuorumEpoch v1) and the fetcher's directory
    M.VoteRequest(8, 3, 7, 0, voter_id=1, voter_directory_id="J8aAPcfLQt2bqs1JT_rMgQ",
                  candidate_directory_id="b3w6nfvIR_Gq3a6sIoXJzw"),
    M.BeginQuorumEpochRequest(1, 9, 2, "b3w6nfvIR_Gq3a6sIoXJzw"),
    M.FetchRequest(2, 9, 55, 8, 500, "J8aAPcfLQt2bqs1JT_rMgQ"),
]


@pytest.mark.parametrize("body", REQUESTS, ids=lambda b: type(b).__name__)
def test_requests_round_trip(body: M.Request) -> None:
    key, version, data = W.request_to_wire(body, "cluster")
    request = _through_kio(api.request_class(key, version), data)
    src, back = W.request_from_wire(key, request)
    assert back == body
    assert src == (body.leader_id if hasattr(body, "leader_id") else body.replica_id)


@pytest.mark.parametrize("body,request_body", [
    (M.VoteResponse(0, 1, 9, True, True), REQUESTS[0]),
    (M.VoteResponse(0, -1, 9, False, False), REQUESTS[1]),
    (M.BeginQuorumEpochResponse(0, 1, 9), REQUESTS[2]),
    (M.EndQuorumEpochResponse(74, 2, 10), REQUESTS[3]),
], ids=lambda b: type(b).__name__)
def test_responses_round_trip(body: M.Response, request_body: M.Request) -> None:
    key, version, _ = W.request_to_wire(request_body, None)
    response = _through_kio(api.response_class(key, version), W.response_to_wire(body))
    assert W.response_from_wire(request_body, response) == body


def _fetch_response_through_wire(body: M.FetchResponse,
                                 leader: VoterAddress | None = None) -> object:
    chunks = encode_fetch_response(W.FETCH_VERSION, 5, W.response_to_wire(body, leader))
    frame = b"".join(chunks)[4:]
    (corr,) = struct.unpack_from(">i", frame, 0)
    assert corr == 5
    value, _ = entity_reader(api.response_class(api.ApiKey.FETCH, W.FETCH_VERSION))(frame, 5)
    return value


def test_fetch_responses_round_trip_with_records_and_diverging_epochs() -> None:
    request = REQUESTS[4]
    data = batches.build_batch([batches.Record(offset=0, timestamp=1, key=None, value=b"x")],
                               base_offset=55)
    with_records = M.FetchResponse(0, 1, 9, high_watermark=50, log_start_offset=0,
                                   records=RecordsSlice(55, 56, data, len(data)))
    back = W.response_from_wire(request, _fetch_response_through_wire(with_records))
    assert back == with_records
    diverging = M.FetchResponse(0, 1, 9, high_watermark=50, log_start_offset=0,
                                diverging_epoch=OffsetAndEpoch(40, 7))
    back = W.response_from_wire(request, _fetch_response_through_wire(diverging))
    assert back == diverging
    not_leader = M.FetchResponse(6, 3, 10, high_watermark=-1, log_start_offset=0)
    back = W.response_from_wire(request, _fetch_response_through_wire(not_leader))
    assert (back.error_code, back.leader_id, back.leader_epoch) == (6, 3, 10)


def test_fetch_response_with_a_snapshot_id_round_trips() -> None:
    to_snapshot = M.FetchResponse(0, 1, 9, high_watermark=500, log_start_offset=300,
                                  snapshot_id=OffsetAndEpoch(400, 8))
    back = W.response_from_wire(REQUESTS[4], _fetch_response_through_wire(to_snapshot))
    assert back == to_snapshot


def test_fetch_snapshot_request_and_chunked_response_round_trip() -> None:
    request = M.FetchSnapshotRequest(2, 9, OffsetAndEpoch(400, 8), 1024)
    key, version, data = W.request_to_wire(request, "cluster")
    assert (key, version) == (api.ApiKey.FETCH_SNAPSHOT, 1)
    src, back = W.request_from_wire(key, _through_kio(api.request_class(key, version), data))
    assert (src, back) == (2, request)
    chunk = M.FetchSnapshotResponse(0, 1, 9, OffsetAndEpoch(400, 8), 5000, 1024, b"x" * 100)
    response = _through_kio(api.response_class(key, version), W.response_to_wire(chunk))
    assert W.response_from_wire(request, response) == chunk
    missing = M.FetchSnapshotResponse(98, 1, 9)
    response = _through_kio(api.response_class(key, version), W.response_to_wire(missing))
    assert W.response_from_wire(request, response) == missing


def test_responses_name_the_leaders_endpoint() -> None:
    """KIP-853: Fetch v17 (fetch_codec's tagged NodeEndpoints) and Vote v2 carry the
    endpoint of the leader they name; none for another node or no leader."""
    leader = VoterAddress(1, "127.0.0.1", 9093, "CONTROLLER")
    body = M.FetchResponse(0, 1, 9, high_watermark=50, log_start_offset=0)
    response = _fetch_response_through_wire(body, leader)
    assert W.leader_endpoints(response) == {1: ("127.0.0.1", 9093)}
    back = W.response_from_wire(REQUESTS[4], response)
    assert (back.error_code, back.leader_id, back.high_watermark) == (0, 1, 50)
    assert W.leader_endpoints(_fetch_response_through_wire(
        M.FetchResponse(6, 3, 10), leader)) == {}
    key, version = api.ApiKey.VOTE, W.VOTE_VERSION
    vote = _through_kio(api.response_class(key, version),
                        W.response_to_wire(M.VoteResponse(0, 1, 9, False), leader))
    assert W.leader_endpoints(vote) == {1: ("127.0.0.1", 9093)}
