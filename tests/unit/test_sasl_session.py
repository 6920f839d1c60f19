"""The per-connection SASL state machine (security/sasl.py), the SCRAM credential
records in the image, and AlterUserScramCredentials' validation."""

from __future__ import annotations

import logging

import pytest

from odradek.broker.handlers.scram import alter_user_scram_credentials
from odradek.metadata import image as img
from odradek.metadata import records as R
from odradek.security.resources import Principal
from odradek.security.sasl import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    SaslServerConfig,
    SaslSession,
)
from odradek.security.scram import ScramClient, make_credential, salted_password

CRED = make_credential("SCRAM-SHA-512", "bob-secret")


def _session(reauth_ms: int = 0) -> tuple[SaslSession, list[Principal]]:
    config = SaslServerConfig(
        "SASL_PLAINTEXT", ("PLAIN", "SCRAM-SHA-512"), {"alice": "alice-secret"},
        lambda user, mech: CRED if (user, mech) == ("bob", "SCRAM-SHA-512") else None,
        reauth_ms)
    seen: list[Principal] = []
    return SaslSession(config, "127.0.0.1:5555", seen.append), seen


def test_plain_success_sets_the_principal() -> None:
    s, seen = _session()
    assert s.handshake("PLAIN", 1).error_code == 0
    r = s.authenticate(b"\x00alice\x00alice-secret", 2, now_ms=0)
    assert (r.error_code, r.auth_bytes, r.session_lifetime_ms) == (0, b"", 0)
    assert seen == [Principal("User", "alice")] and s.authenticated


def test_wrong_password_fails_closes_and_logs_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    s, seen = _session()
    s.handshake("PLAIN", 1)
    with caplog.at_level(logging.INFO):
        r = s.authenticate(b"\x00alice\x00not-the-secret", 2, now_ms=0)
    assert r.error_code == SASL_AUTHENTICATION_FAILED and "Invalid username or password" in (
        r.error_message or "")
    assert s.close_after_response and not s.authenticated and not seen
    assert "not-the-secret" not in caplog.text and "alice" in caplog.text
    assert "127.0.0.1:5555" in caplog.text


@pytest.mark.parametrize("token", [b"", b"\x00\x00", b"a\x00b", b"\x00alice\x00",
                                   b"\x00al\xffice\x00x", b"x" * 10000,
                                   b"bob\x00alice\x00alice-secret"])
def test_bad_plain_tokens_fail(token: bytes) -> None:
    s, _ = _session()
    s.handshake("PLAIN", 1)
    assert s.authenticate(token, 2, now_ms=0).error_code == SASL_AUTHENTICATION_FAILED


def test_unknown_mechanism_lists_the_enabled_ones() -> None:
    s, _ = _session()
    r = s.handshake("GSSAPI", 1)
    assert (r.error_code, r.mechanisms) == (UNSUPPORTED_SASL_MECHANISM,
                                            ["PLAIN", "SCRAM-SHA-512"])
    assert s.close_after_response


def test_out_of_order_is_illegal_sasl_state() -> None:
    s, _ = _session()
    assert s.authenticate(b"x", 2, now_ms=0).error_code == ILLEGAL_SASL_STATE
    s, _ = _session()
    s.handshake("PLAIN", 1)
    assert s.handshake("PLAIN", 1).error_code == ILLEGAL_SASL_STATE


def _scram_login(s: SaslSession, version: int, now_ms: int, password: str = "bob-secret"
                 ) -> int:
    client = ScramClient("SCRAM-SHA-512", "bob", password)
    assert s.handshake("SCRAM-SHA-512", 1).error_code == 0
    r1 = s.authenticate(client.first(), version, now_ms)
    r2 = s.authenticate(client.final(r1.auth_bytes), version, now_ms)
    if r2.error_code == 0:
        client.verify(r2.auth_bytes)
    return r2.error_code


def test_scram_session_expires_and_reauthenticates() -> None:
    s, seen = _session(reauth_ms=1000)
    assert _scram_login(s, 2, now_ms=0) == 0
    assert not s.expired(999) and s.expired(1000)
    assert _scram_login(s, 2, now_ms=1500) == 0  # KIP-368: handshake again, same principal
    assert not s.expired(2000) and s.expired(2500)
    assert seen == [Principal("User", "bob")]


def test_reauthentication_needs_a_kip368_client() -> None:
    s, _ = _session(reauth_ms=1000)
    assert _scram_login(s, 0, now_ms=0) == 0  # SaslAuthenticate v0
    assert s.handshake("SCRAM-SHA-512", 1).error_code == ILLEGAL_SASL_STATE


def test_handshake_v0_switches_to_raw_tokens() -> None:
    s, seen = _session()
    s.handshake("PLAIN", 0)
    assert s.raw_tokens
    assert s.authenticate(b"x", 1, now_ms=0).error_code == ILLEGAL_SASL_STATE
    s, seen = _session()
    s.handshake("PLAIN", 0)
    assert s.raw_token(b"\x00alice\x00alice-secret", now_ms=0) == b""
    assert not s.raw_tokens and seen == [Principal("User", "alice")]
    s, _ = _session()
    s.handshake("PLAIN", 0)
    assert s.raw_token(b"\x00alice\x00wrong", now_ms=0) is None


def test_scram_records_replay_into_the_image_and_snapshot() -> None:
    recs = [R.user_scram_credential_record("bob", 2, CRED.salt, CRED.stored_key,
                                           CRED.server_key, CRED.iterations),
            R.user_scram_credential_record("carol", 1, b"s", b"k1", b"k2", 4096)]
    image = img.apply(img.MetadataImage(), [R.decode(R.encode(r)) for r in recs], 1)
    assert image.scram_credentials[("bob", 2)].stored_key == CRED.stored_key
    assert img.apply(img.MetadataImage(), img.records_of(image), 1) == image
    image = img.apply(image, [R.remove_user_scram_credential_record("carol", 1)], 2)
    assert set(image.scram_credentials) == {("bob", 2)}
    assert b"bob-secret" not in b"".join(R.encode(r) for r in recs)


def test_alter_user_scram_credentials_validates_per_user() -> None:
    salted = salted_password("SCRAM-SHA-256", "pw", b"salt", 4096)
    results, records = alter_user_scram_credentials(
        img.MetadataImage(), [("ghost", 1)],
        [("ann", 1, 4096, b"salt", salted), ("ann", 2, 4096, b"salt", salted),
         ("", 1, 4096, b"salt", salted), ("few", 1, 10, b"salt", salted),
         ("many", 1, 20000, b"salt", salted), ("mech", 7, 4096, b"salt", salted),
         ("dup", 1, 4096, b"s", salted), ("dup", 1, 4096, b"s", salted)])
    codes = {user: code for user, (code, _) in results.items()}
    assert codes == {"ghost": 91, "ann": 0, "": 93, "few": 93, "many": 93, "mech": 33,
                     "dup": 92}
    assert [(r["name"], r["mechanism"]) for r in records] == [("ann", 1), ("ann", 2)]


def test_oauthbearer_unsecured_jws() -> None:
    import json

    from odradek.security.oauthbearer import (
        OAuthBearerError,
        ValidatorOptions,
        client_response,
        parse_client_response,
        unsecured_token,
        validate_unsecured,
    )
    from odradek.security.sasl import SaslServerConfig, SaslSession

    now = 1_800_000_000_000
    token = unsecured_token("alice", now, 60, ("a", "b"))
    r = parse_client_response(client_response(token, "alice"))
    assert (r.authzid, r.token) == ("alice", token)
    opts = ValidatorOptions(required_scope=("b",))
    assert validate_unsecured(token, opts, now).principal == "alice"
    assert validate_unsecured(token, opts, now).expires_at_ms == now + 60_000
    for bad_now, opts2 in ((now + 60_000, opts), (now, ValidatorOptions(required_scope=("c",)))):
        try:
            validate_unsecured(token, opts2, bad_now)
        except OAuthBearerError:
            pass
        else:
            raise AssertionError("accepted")
    assert validate_unsecured(token, ValidatorOptions(clock_skew_ms=1), now + 59_999)
    for msg in (b"", b"n,,\x01\x01", b"y,,\x01auth=Bearer x\x01\x01", b"n,,\x01auth=Basic x\x01\x01",
                b"n,,\x01auth=Bearer x\x01"):
        try:
            parse_client_response(msg)
        except OAuthBearerError:
            pass
        else:
            raise AssertionError(msg)
    # the session: lifetime is the token's when shorter than connections.max.reauth.ms
    seen = []
    s = SaslSession(SaslServerConfig("L", ("OAUTHBEARER",), reauth_ms=600_000), "peer",
                    seen.append)
    assert s.handshake("OAUTHBEARER", 1).error_code == 0
    result = s.authenticate(client_response(token), 2, now)
    assert result.error_code == 0 and result.session_lifetime_ms == 60_000
    assert str(seen[0]) == "User:alice" and s.expired(now + 60_000)
    # a refused token: the error challenge, then the lone kvsep fails
    s = SaslSession(SaslServerConfig("L", ("OAUTHBEARER",)), "peer", seen.append)
    s.handshake("OAUTHBEARER", 1)
    first = s.authenticate(client_response(token), 2, now + 61_000)
    assert first.error_code == 0 and json.loads(first.auth_bytes)["status"] == "invalid_token"
    second = s.authenticate(b"\x01", 2, now + 61_000)
    assert second.error_code == 58 and "expired" in (second.error_message or "")
    assert s.close_after_response


def test_oauthbearer_hostile_messages_only_refuse() -> None:
    """Mutated client messages (bit flips, truncation, insertion, huge and empty
    parts) are refused with the error challenge or accepted, never anything else."""
    import random

    from odradek.security.oauthbearer import client_response, unsecured_token
    from odradek.security.sasl import SaslServerConfig, SaslSession

    rng = random.Random(20261126)
    now = 1_800_000_000_000
    good = client_response(unsecured_token("alice", now, 60, ("kafka",)))
    for i in range(3000):
        msg = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(5)
            pos = rng.randrange(len(msg) + 1)
            if kind == 0 and msg:
                msg[pos % len(msg)] ^= 1 << rng.randrange(8)
            elif kind == 1:
                del msg[pos:]
            elif kind == 2:
                msg[pos:pos] = rng.randbytes(rng.randint(1, 40))
            elif kind == 3:
                msg[pos:pos] = b"\x01" * rng.randint(1, 5)
            else:
                msg[pos:pos] = b"=" * rng.randint(1, 70000) if i % 500 == 0 else b"."
        s = SaslSession(SaslServerConfig("L", ("OAUTHBEARER",)), "peer", lambda p: None)
        s.handshake("OAUTHBEARER", 1)
        r = s.authenticate(bytes(msg), 2, now)
        assert r.error_code == 0, r
        if r.auth_bytes:  # refused: the challenge, then the failure
            assert s.authenticate(b"\x01", 2, now).error_code == 58
            assert s.close_after_response
        else:
            assert s.authenticated


def test_oauthbearer_node_login_and_listener_config(tmp_path) -> None:
    """A node's own OAUTHBEARER login (sasl.mechanism.inter.broker.protocol) from the
    OAuthBearerLoginModule's unsecuredLoginStringClaim_sub, against a listener whose
    validator options come from its oauthbearer.sasl.jaas.config; another server
    callback handler stops start-up naming the key."""
    import time

    import pytest

    from odradek.config import BrokerConfig
    from odradek.security.sasl import SaslSession
    from odradek.security.sasl_config import ConfigError, inter_broker_client, server_configs

    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker" unsecuredLoginLifetimeSeconds="120" '
            'unsecuredValidatorAllowableClockSkewMs="2000";')
    props = {"log.dirs": str(tmp_path), "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
             "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                               "CONTROLLER:PLAINTEXT",
             "inter.broker.listener.name": "SASL_PLAINTEXT",
             "sasl.enabled.mechanisms": "OAUTHBEARER",
             "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
             "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas}
    config = BrokerConfig.from_properties(props)
    client = inter_broker_client(config)
    assert client is not None and (client.mechanism, client.username) == ("OAUTHBEARER",
                                                                         "broker")
    server = server_configs(config, lambda user, mechanism: None)["SASL_PLAINTEXT"]
    assert server.oauth.clock_skew_ms == 2000
    seen = []
    session = SaslSession(server, "peer", seen.append)
    assert session.handshake("OAUTHBEARER", 1).error_code == 0
    exchange = client.exchange()
    result = session.authenticate(next(exchange), 2, int(time.time() * 1000))
    assert result.error_code == 0 and result.auth_bytes == b""
    with pytest.raises(StopIteration):
        exchange.send(result.auth_bytes)
    assert [str(p) for p in seen] == ["User:broker"]
    props["listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"] = \
        "com.example.MyValidator"
    with pytest.raises(ConfigError, match="oauthbearer.sasl.server.callback.handler.class"):
        server_configs(BrokerConfig.from_properties(props), lambda user, mechanism: None)
