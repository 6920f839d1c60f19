"""Controller APIs are served on controller listeners only (Kafka's listener scopes).

A combined node (process.roles=broker,controller) with a PLAINTEXT and a
CONTROLLER listener: every controller API version (Vote, BeginQuorumEpoch,
BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AlterPartition, ...)
sent to the client listener closes that connection, as an API Kafka does not
enable on that listener does, and the node keeps serving; a Fetch of
``__cluster_metadata`` posing as a voter is an unknown topic there. On the
controller listener the same APIs are answered.
"""

from __future__ import annotations

import struct

import pytest

from odradek.protocol import api
from odradek.protocol.guard import decode_message
from tests.fuzz.corpus import frame_api
from tests.fuzz.record import synthesized_frames
from tests.integration.broker_proc import HOST, free_port
from tests.integration.clients import Wire, assert_broker_serves

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(120)]


@pytest.fixture
def combined(broker_factory):
    controller_port = free_port()
    proc = broker_factory(overrides={}, start=False)
    proc.overrides.update({
        "process.roles": "broker,controller", "node.id": 1,
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{HOST}:{proc.port},CONTROLLER://{HOST}:{controller_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    })
    proc.start()
    proc.controller_bootstrap = f"{HOST}:{controller_port}"
    return proc


def _controller_frames() -> list[bytes]:
    return [f for f in synthesized_frames() if api.is_controller_api(*frame_api(f))]


def test_controller_apis_on_the_client_listener_close_the_connection(combined):
    frames = _controller_frames()
    assert len(frames) >= 9
    for frame in frames:
        with Wire(combined.bootstrap) as w:
            w.send_raw(frame)
            assert w.closed_by_peer(), api.api_name(frame_api(frame)[0])
    assert_broker_serves(combined.bootstrap)


def test_controller_apis_on_the_controller_listener_are_answered(combined):
    key = api.ApiKey.ALLOCATE_PRODUCER_IDS
    (frame,) = [f for f in _controller_frames() if frame_api(f)[0] == key]
    with Wire(combined.controller_bootstrap) as w:
        w.send_raw(frame)
        answer = w.read_frame()
    assert answer is not None
    (correlation_id,) = struct.unpack_from(">i", answer)
    assert correlation_id == struct.unpack_from(">i", frame, 8)[0]


@pytest.mark.parametrize("version", [12, 13, 16])
def test_a_metadata_fetch_posing_as_a_voter_on_the_client_listener_is_an_unknown_topic(
        combined, version):
    (frame,) = [f for f in synthesized_frames() if frame_api(f) == (api.ApiKey.FETCH, version)]
    with Wire(combined.bootstrap) as w:
        w.send_raw(frame)
        answer = w.read_frame()
    assert answer is not None
    response = decode_message(api.response_class(api.ApiKey.FETCH, version), answer, 5)
    errors = {p.error_code.value for t in response.responses for p in t.partitions}
    assert errors == ({100} if version >= 13 else {3})  # UNKNOWN_TOPIC_ID / _OR_PARTITION
    assert_broker_serves(combined.bootstrap)
