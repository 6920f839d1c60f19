"""SASL/OAUTHBEARER with Kafka's unsecured JWS (KIP-255), against a real broker:
confluent-kafka logs in with `enable.sasl.oauthbearer.unsecure.jwt` and produces and
consumes as User:<sub>; an expired token, a signed one, one lacking the required scope
and garbage are refused (error challenge, then SASL_AUTHENTICATION_FAILED and a close),
also when confluent-kafka hands them over through `oauth_cb`; the session lifetime
(KIP-368) is the shorter of connections.max.reauth.ms and the token's lifetime."""

from __future__ import annotations

import base64
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from odradek.security.oauthbearer import client_response, unsecured_token
from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.test_sasl import JAAS, Wire, create_topic

pytestmark = [pytest.mark.timeout(180), pytest.mark.odradek_only]

OAUTH_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
              'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";')
REAUTH_MS = 60000


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    port = free_port()
    b = BrokerProcess(overrides={
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port}",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "connections.max.reauth.ms": REAUTH_MS,
    }, port=port).start()
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(b.data_dir, ignore_errors=True)


def _conf(b: BrokerProcess, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "broker.address.family": "v4",
            "socket.timeout.ms": 10000, **extra}


def _b64(obj: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def test_confluent_kafka_unsecured_jwt_produces_and_consumes_as_its_sub(broker) -> None:
    name = f"oauth-{uuid.uuid4().hex[:8]}"
    create_topic(broker, name)
    unsecure = {"enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=alice scope=kafka"}
    p = Producer(_conf(broker, **unsecure))
    for i in range(20):
        p.produce(name, f"o{i}".encode())
    assert p.flush(30) == 0
    c = Consumer(_conf(broker, **unsecure, **{"group.id": f"g-{name}",
                                             "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([name])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [f"o{i}".encode() for i in range(20)]
    finally:
        c.close()
    assert "SASL OAUTHBEARER: User:alice authenticated" in broker.log_path.read_text()


@pytest.mark.parametrize("why", ["expired", "signed", "no scope", "no sub", "garbage"])
def test_bad_tokens_get_the_error_challenge_then_authentication_failed(broker, why) -> None:
    now = time.time()
    token = {
        "expired": f"{_b64({'alg': 'none'})}.{_b64({'sub': 'alice', 'exp': now - 5, 'scope': 'kafka'})}.",
        "signed": f"{_b64({'alg': 'HS256'})}.{_b64({'sub': 'alice', 'exp': now + 60, 'scope': 'kafka'})}.c2ln",
        "no scope": unsecured_token("alice", int(now * 1000)),
        "no sub": f"{_b64({'alg': 'none'})}.{_b64({'exp': now + 60, 'scope': 'kafka'})}.",
        "garbage": "x" * 40,
    }[why]
    w = Wire(broker)
    try:
        assert w.handshake("OAUTHBEARER")[0] == 0
        first = w.authenticate(client_response(token))
        assert first is not None
        error, _, challenge, _ = first
        assert error == 0 and json.loads(challenge)["status"] == "invalid_token"
        second = w.authenticate(b"\x01")
        assert second is not None
        error, message, _, _ = second
        assert error == 58 and message and message.startswith("Authentication failed")
        assert w.closed()
    finally:
        w.close()
    assert token not in broker.log_path.read_text()


def test_session_lifetime_is_the_tokens_when_shorter(broker) -> None:
    w = Wire(broker)
    try:
        assert w.handshake("OAUTHBEARER")[0] == 0
        token = unsecured_token("alice", int(time.time() * 1000), lifetime_s=5,
                                scope=("kafka",))
        answer = w.authenticate(client_response(token))
        assert answer is not None and answer[0] == 0
        assert 0 < answer[3] <= 5000, answer  # session_lifetime_ms: the token's, not 60 s
        assert w.metadata() is not None
        # KIP-368: past the token's expiry the connection is closed on its next request
        time.sleep(5.5)
        assert w.metadata() is None
    finally:
        w.close()
    w = Wire(broker)
    try:  # a long-lived token: connections.max.reauth.ms is the shorter
        assert w.handshake("OAUTHBEARER")[0] == 0
        token = unsecured_token("alice", int(time.time() * 1000), scope=("kafka",))
        answer = w.authenticate(client_response(token))
        assert answer is not None and answer[0] == 0 and answer[3] == REAUTH_MS
    finally:
        w.close()


def test_confluent_kafka_expired_token_from_oauth_cb_is_refused(broker) -> None:
    expired = f"{_b64({'alg': 'none'})}.{_b64({'sub': 'alice', 'exp': time.time() - 60, 'scope': 'kafka'})}."
    errors: list[Any] = []
    p = Producer(_conf(broker, oauth_cb=lambda _: (expired, time.time() + 3600),
                       error_cb=errors.append))
    try:
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            p.poll(0.5)
        assert errors, "no error from the refused login"
        assert any("SASL authentication error" in e.str() or "Authentication failed" in e.str()
                   for e in errors), [e.str() for e in errors]
        assert any("expired" in e.str() for e in errors), [e.str() for e in errors]
    finally:
        p.flush(0)


def test_confluent_kafka_reauthenticates_before_its_token_expires(broker) -> None:
    """A 12 s token under a 60 s connections.max.reauth.ms: the session lives 12 s
    (KIP-368), librdkafka refreshes its token and re-authenticates on the same
    connections, and a producer sending for 16 s never has a connection closed."""
    name = f"oauth-reauth-{uuid.uuid4().hex[:8]}"
    create_topic(broker, name)
    before = broker.log_path.read_text().count("after its SASL session expired")
    errors: list[Any] = []
    p = Producer(_conf(broker, **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                  "sasl.oauthbearer.config": "principal=alice scope=kafka "
                                                             "lifeSeconds=12",
                                  "error_cb": errors.append}))
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 16:
        p.produce(name, b"r%d" % sent)
        sent += 1
        p.poll(0.25)
    assert p.flush(30) == 0
    assert not errors, [e.str() for e in errors]
    assert broker.log_path.read_text().count("after its SASL session expired") == before
    c = Consumer(_conf(broker, **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                  "sasl.oauthbearer.config": "principal=alice scope=kafka",
                                  "group.id": f"g-{name}", "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([name])
        got = 0
        deadline = time.monotonic() + 60
        while got < sent and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got += 1
        assert got == sent
    finally:
        c.close()
