"""A client's request forwarded to a controller is not sent again elsewhere when
the broker moves to another controller while its answer is on the way
(broker/lifecycle.py).

The case from CI: RemoveRaftVoter of the active controller. It commits the
removal and resigns; the broker's next heartbeat gets NOT_CONTROLLER and moves
on. Closing the forwarding channel then cut off the removal's answer, and
`forward` sent the request again to the next controller, whose answer,
VOTER_NOT_FOUND, reached the client. Two real TCP servers stand in for the
controllers here: the first answers after a pause, during which the broker
moves to the second.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from odradek.broker.lifecycle import BrokerLifecycle
from odradek.broker.pipeline import encode_body, encode_response_frame
from odradek.config import BrokerConfig
from odradek.protocol import api
from odradek.protocol.framing import parse_request_header
from odradek.security.tls import ListenerTls


class _Controller:
    """Answers every Envelope with response_data = its name, after `delay_s`."""

    def __init__(self, name: bytes, delay_s: float) -> None:
        self.name, self.delay_s = name, delay_s
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                header = parse_request_header(await reader.readexactly(size))
                self.requests += 1
                await asyncio.sleep(self.delay_s)
                key, version = header.api_key, header.api_version
                body = encode_body(key, version, {"error_code": 0, "response_data": self.name})
                writer.write(encode_response_frame(
                    header.correlation_id, api.response_header_version(key, version), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


class _Host:
    node_id = 1
    cluster_id = "forwarding-test"

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.tls = ListenerTls(config)


ENVELOPE: dict[str, Any] = {"request_data": b"\x00" * 16, "request_principal": b"\x00",
                            "client_host_address": b"\x7f\x00\x00\x01"}


async def _until_received(controller: _Controller, timeout_s: float = 5.0) -> None:
    """Until `controller` holds the forwarded request (bounded: a test must fail,
    not hang, if it never arrives)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while controller.requests == 0:
        assert asyncio.get_running_loop().time() < deadline, "the request never arrived"
        await asyncio.sleep(0.01)


async def _broker_of(first: _Controller, second: _Controller) -> BrokerLifecycle:
    """A broker's lifecycle whose controllers are `first` (100) and `second` (101)."""
    p1, p2 = await first.start(), await second.start()
    config = BrokerConfig.from_properties({
        "process.roles": "broker", "node.id": "1",
        "controller.quorum.voters": f"100@127.0.0.1:{p1},101@127.0.0.1:{p2}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    })
    return BrokerLifecycle(_Host(config), observer=False)  # type: ignore[arg-type]


async def _stop(lifecycle: BrokerLifecycle, *controllers: _Controller) -> None:
    await lifecycle.stop()
    for c in controllers:
        assert c.server is not None
        c.server.close()


async def _scenario() -> tuple[bytes, bytes, int, int]:
    first, second = _Controller(b"first", delay_s=0.5), _Controller(b"second", delay_s=0.0)
    lifecycle = await _broker_of(first, second)
    try:
        assert lifecycle.controller_id == 100
        forwarded = asyncio.ensure_future(lifecycle.forward(ENVELOPE))
        await _until_received(first)
        # a heartbeat's NOT_CONTROLLER while the answer is on its way
        lifecycle._move_controller(lifecycle._generation)
        assert lifecycle.controller_id == 101
        answer = bytes((await forwarded).response_data)
        after = bytes((await lifecycle.forward(ENVELOPE)).response_data)
        return answer, after, first.requests, second.requests
    finally:
        await _stop(lifecycle, first, second)


def test_a_forwarded_request_is_answered_by_the_controller_it_went_to() -> None:
    answer, after, first_requests, second_requests = asyncio.run(_scenario())
    assert answer == b"first"  # not sent again to the second controller
    assert first_requests == 1
    # the next request goes to the controller the broker moved to
    assert after == b"second" and second_requests == 1


async def _unreachable_scenario() -> tuple[bytes, int, int]:
    first, second = _Controller(b"first", delay_s=30.0), _Controller(b"second", delay_s=0.0)
    lifecycle = await _broker_of(first, second)
    try:
        forwarded = asyncio.ensure_future(lifecycle.forward(ENVELOPE))
        await _until_received(first)
        # a heartbeat found the controller unreachable (it hangs): no answer will
        # come, so the forwarded request is cut off and goes to the next one
        lifecycle._move_controller(lifecycle._generation, unreachable=True)
        answer = bytes((await asyncio.wait_for(forwarded, 5)).response_data)
        return answer, first.requests, second.requests
    finally:
        await _stop(lifecycle, first, second)


def test_a_request_to_an_unreachable_controller_moves_on_at_once() -> None:
    answer, first_requests, second_requests = asyncio.run(_unreachable_scenario())
    assert answer == b"second"
    assert first_requests == 1 and second_requests == 1
