"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677): the exchange against the RFC's vector,
our client against our server, and refusals of bad or hostile messages."""

from __future__ import annotations

import base64

import pytest

from odradek.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_salted,
    decode_saslname,
    encode_saslname,
    make_credential,
    salted_password,
)

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    return make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)


def _server(cred: ScramCredential | None, user: str = "user",
            mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    return ScramServer(mechanism, lambda u, m: cred if u == user and m == mechanism else None,
                       nonce=RFC_SERVER_NONCE)


def test_server_answers_rfc7677_vector() -> None:
    server = _server(_rfc_credential())
    assert server.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.done and server.username == "user"


def test_client_sends_rfc7677_vector() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)


def test_stored_credential_is_derived_from_the_salted_password_only() -> None:
    salted = salted_password("SCRAM-SHA-512", "pw", b"salt", 4096)
    cred = credential_from_salted("SCRAM-SHA-512", salted, b"salt", 4096)
    assert cred == make_credential("SCRAM-SHA-512", "pw", 4096, b"salt")
    assert b"pw" not in cred.stored_key + cred.server_key and len(cred.stored_key) == 64
    assert "stored" not in repr(cred) and repr(cred) == "ScramCredential(iterations=4096)"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_client_and_server_agree(mechanism: str) -> None:
    cred = make_credential(mechanism, "s3cret, =x", 8192)
    server = ScramServer(mechanism, lambda u, m: cred if u == "a,b=c" else None)
    client = ScramClient(mechanism, "a,b=c", "s3cret, =x")
    client.verify(server.final(client.final(server.first(client.first()))))


def test_wrong_password_fails_at_the_proof() -> None:
    cred = make_credential("SCRAM-SHA-256", "right")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    client = ScramClient("SCRAM-SHA-256", "alice", "wrong")
    final = client.final(server.first(client.first()))
    with pytest.raises(ScramError, match="invalid credentials"):
        server.final(final)


def test_unknown_user_gets_a_salt_and_fails_at_the_proof_like_a_known_one() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u, m: None)
    client = ScramClient("SCRAM-SHA-256", "nobody", "x")
    first = server.first(client.first())
    assert b",s=" in first and first.endswith(b",i=4096")
    with pytest.raises(ScramError, match="invalid credentials"):
        server.final(client.final(first))


def test_librdkafka_2_0_nonce_with_client_nonce_repeated_is_accepted_as_kafka_does() -> None:
    server = _server(_rfc_credential())
    server.first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError, match="invalid credentials"):  # nonce passes, proof not
        server.final(RFC_CLIENT_FINAL.replace(b"r=", b"r=" + RFC_CLIENT_NONCE.encode()))


@pytest.mark.parametrize("first", [
    b"", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc,n=user", b"n,,n=user", b"n,,n=user,r=",
    b"n,,n=us=41er,r=abc", b"n,,n=user,r=abc,m=ext", b"n,,n=,r=abc", b"\xff\xfe",
    b"n,a=other,n=user,r=abc", b"n,,n=user,r=abc," + b"x" * 5000, b"n,,n=user,r=abc,junk",
])
def test_bad_client_first_messages_are_refused(first: bytes) -> None:
    with pytest.raises(ScramError):
        _server(_rfc_credential()).first(first)


@pytest.mark.parametrize("final", [
    b"", b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    b"c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",
    b"c=biws,r=other,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=!!notbase64",
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",
])
def test_bad_client_final_messages_are_refused(final: bytes) -> None:
    server = _server(_rfc_credential())
    server.first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError):
        server.final(final)


def test_final_before_first_and_twice_are_refused() -> None:
    with pytest.raises(ScramError):
        _server(_rfc_credential()).final(RFC_CLIENT_FINAL)
    server = _server(_rfc_credential())
    server.first(RFC_CLIENT_FIRST)
    server.final(RFC_CLIENT_FINAL)
    with pytest.raises(ScramError):
        server.final(RFC_CLIENT_FINAL)


def test_saslname_escapes() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramError):
        decode_saslname("a=41")
