"""Forwarded requests (KIP-590): a broker-only node wraps a client's admin
request in an Envelope naming the client's principal and address; the
controller takes Envelopes only from a principal with CLUSTER_ACTION on a
controller listener and authorizes the inner request as the client.

Two pipelines talk in memory: a broker's (its forwarder hands the Envelope to
the controller's pipeline) and a controller's.
"""

from __future__ import annotations

import asyncio
import io
import struct
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from kio.serial import entity_writer

from odradek.broker.apis import API_TABLE
from odradek.broker.pipeline import CLOSE, RequestPipeline
from odradek.protocol import api, entities
from odradek.protocol.envelope import (
    PrincipalDeserializationError,
    deserialize_principal,
    pack_host,
    serialize_principal,
    unpack_host,
)
from odradek.protocol.guard import decode_message
from odradek.security.resources import AclOperation, Action, Principal, ResourceType
from tests.unit.test_api_table import Conn, Host, _frame, _response

K = api.ApiKey
BROKER = Principal("User", "broker")
ALICE = Principal("User", "alice")


def test_the_principal_is_written_as_kafkas_default_principal_data():
    data = serialize_principal("User", "alice")
    # version 0, compact "User", compact "alice", token_authenticated 0, no tags
    assert data == b"\x00\x00" + b"\x05User" + b"\x06alice" + b"\x00" + b"\x00"
    assert deserialize_principal(data) == ("User", "alice")
    assert deserialize_principal(serialize_principal("User", "CN=ü,O=x")) == ("User", "CN=ü,O=x")


@pytest.mark.parametrize("bad", [b"", b"\x00\x01\x05User\x06alice\x00\x00",
                                 b"\x00\x00\x05User", b"\x00\x00\x7fUser\x06alice\x00\x00",
                                 b"\x00\x00\x05User\x06alice\x00\x00junk",
                                 b"\x00\x00\x01\x06alice\x00\x00"])
def test_a_malformed_principal_is_refused(bad: bytes):
    with pytest.raises(PrincipalDeserializationError):
        deserialize_principal(bad)


def test_the_client_address_is_its_packed_bytes():
    assert pack_host("10.0.0.7") == bytes([10, 0, 0, 7])
    assert unpack_host(pack_host("::1")) == "::1"
    with pytest.raises(ValueError):
        unpack_host(b"\x01\x02")


@dataclass
class Acls:
    """ALLOW for (principal, operation on the cluster); everything else denied."""

    allowed: set[tuple[Principal, AclOperation]]
    asked: list[tuple[Principal, str, Action]] = field(default_factory=list)

    def authorize(self, principal: Principal, host: str, actions: Any) -> list[bool]:
        self.asked.extend((principal, host, a) for a in actions)
        return [(principal, a.operation) in self.allowed for a in actions]


def _controller(acls: Acls, seen: list[Any]) -> RequestPipeline:
    async def handler(node: Any, ctx: Any, request: Any) -> dict[str, Any]:
        seen.append(ctx)
        return {"results": [{"error_code": 0, "error_message": None}
                            for _ in request.creations]}

    table = dict(API_TABLE)
    table[K.CREATE_ACLS] = replace(API_TABLE[K.CREATE_ACLS], handler=handler)
    return RequestPipeline(Host(), None, authorizer=acls, table=table)


class Forwarder:
    def __init__(self, controller: RequestPipeline, broker_principal: Principal,
                 listener: str = "CONTROLLER") -> None:
        self.controller = controller
        self.conn = Conn(peer="127.0.0.2:9999", listener=listener, principal=broker_principal)

    async def forward(self, data: dict[str, Any]) -> Any:
        cls = api.request_class(K.ENVELOPE, 0)
        body = io.BytesIO()
        entity_writer(cls)(body, entities.build(cls, data))
        header = struct.pack(">hhih", K.ENVELOPE, 0, 9, 6) + b"broker" + b"\x00"
        answer = await self.controller.handle(header + body.getvalue(), self.conn)
        assert answer is not CLOSE
        return decode_message(api.response_class(K.ENVELOPE, 0), answer, 9)


class BrokerHost(Host):
    serves_controller_apis = False
    is_active_controller = False

    def __init__(self, forwarder: Forwarder) -> None:
        self.forwarder = forwarder


def _create_acls(broker_principal: Principal, client: Principal,
                 allowed: set[tuple[Principal, AclOperation]],
                 listener: str = "CONTROLLER") -> tuple[Any, list[Any], Acls]:
    acls, seen = Acls(allowed), []
    forwarder = Forwarder(_controller(acls, seen), broker_principal, listener)
    broker = RequestPipeline(BrokerHost(forwarder), None, table=API_TABLE)
    version = api.SUPPORTED_VERSIONS[K.CREATE_ACLS][1]
    answer = asyncio.run(broker.handle(_frame(K.CREATE_ACLS, version, 4242),
                                       Conn(principal=client)))
    assert struct.unpack_from(">i", answer, 4) == (4242,)  # the client's correlation id
    return _response(K.CREATE_ACLS, version, answer), seen, acls


def test_the_controller_authorizes_the_client_not_the_broker():
    granted = {(BROKER, AclOperation.CLUSTER_ACTION), (ALICE, AclOperation.ALTER)}
    response, seen, acls = _create_acls(BROKER, ALICE, granted)
    assert [r.error_code.value for r in response.results] == [0, 0]
    (ctx,) = seen
    assert (ctx.principal, ctx.client_host, ctx.listener) == (ALICE, "10.0.0.7", "CONTROLLER")
    assert [(p, h, a.operation) for p, h, a in acls.asked] == [
        (BROKER, "127.0.0.2", AclOperation.CLUSTER_ACTION),
        (ALICE, "10.0.0.7", AclOperation.ALTER)]


def test_a_client_without_the_permission_is_refused_though_the_broker_has_it():
    granted = {(BROKER, AclOperation.CLUSTER_ACTION), (BROKER, AclOperation.ALTER)}
    response, seen, _ = _create_acls(BROKER, ALICE, granted)
    assert seen == []
    assert [r.error_code.value for r in response.results] == [31, 31]


def test_a_broker_without_cluster_action_gets_unknown_server_error_for_its_client():
    response, seen, acls = _create_acls(BROKER, ALICE, {(ALICE, AclOperation.ALTER)})
    assert seen == []
    assert [a.operation for _, _, a in acls.asked] == [AclOperation.CLUSTER_ACTION]
    # CreateAcls' whole-request error answer has no items; Kafka's client fails them all
    assert response.results == ()


def test_an_envelope_on_a_client_listener_closes_the_connection():
    granted = {(BROKER, AclOperation.CLUSTER_ACTION), (ALICE, AclOperation.ALTER)}
    with pytest.raises(AssertionError):  # the fake forwarder sees CLOSE
        _create_acls(BROKER, ALICE, granted, listener="PLAINTEXT")


def test_an_envelope_must_carry_a_forwardable_api():
    acls = Acls({(BROKER, AclOperation.CLUSTER_ACTION)})
    forwarder = Forwarder(_controller(acls, []), BROKER)
    inner = _frame(K.METADATA, 12, 1)
    response = asyncio.run(forwarder.forward({
        "request_data": inner, "request_principal": serialize_principal("User", "alice"),
        "client_host_address": pack_host("10.0.0.7")}))
    assert response.error_code.value == 42  # INVALID_REQUEST
    response = asyncio.run(forwarder.forward({
        "request_data": _frame(K.CREATE_ACLS, 3, 1), "request_principal": b"\x00\x07",
        "client_host_address": pack_host("10.0.0.7")}))
    assert response.error_code.value == 97  # PRINCIPAL_DESERIALIZATION_FAILURE
    assert ResourceType.CLUSTER in {a.resource_type for _, _, a in acls.asked}
