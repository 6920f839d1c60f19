"""TLS: ssl.* config resolution, SSLContext building, the sans-I/O session, principals."""

from __future__ import annotations

import contextlib
import datetime
import ssl
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from odradek.config import BrokerConfig, ConfigError
from odradek.security.tls import (
    ListenerTls,
    NoMatchingRule,
    PrincipalMapper,
    TlsSession,
    client_context,
    distinguished_name,
    handshake_failure,
    listener_settings,
    openssl_cipher_name,
    server_context,
)
from tests.integration.tls_certs import PASSWORD, TlsFiles, one_line


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles(tmp_path_factory.mktemp("certs"))


def config(**props: str) -> BrokerConfig:
    base = {"listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "PLAINTEXT"}
    return BrokerConfig.from_properties({**base, **props})


def settings(**props: str) -> Any:
    return listener_settings(config(**props), "SSL")


def error_key(e: pytest.ExceptionInfo[ConfigError]) -> str:
    return e.value.key


# -- config resolution ----------------------------------------------------------------------


def test_listener_override_wins_and_error_names_the_prefixed_key() -> None:
    s = settings(**{"ssl.client.auth": "none",
                    "listener.name.ssl.ssl.client.auth": "required"})
    assert s.get("ssl.client.auth") == "required"
    assert s.key_name("ssl.client.auth") == "listener.name.ssl.ssl.client.auth"
    assert s.key_name("ssl.keystore.location") == "ssl.keystore.location"
    with pytest.raises(ConfigError) as e:
        settings(**{"listener.name.ssl.ssl.client.auth": "sometimes"})
    assert error_key(e) == "listener.name.ssl.ssl.client.auth"


def test_principal_mapping_rules_is_a_modelled_key() -> None:
    c = config(**{"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT"})
    assert c.get("ssl.principal.mapping.rules").startswith("RULE:")


# -- contexts ---------------------------------------------------------------------------------


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> TlsSession:
    """Run a whole handshake in memory; returns the server's session (raises on failure)."""
    session = TlsSession(server)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_obj = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    for _ in range(10):
        try:
            client_obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        data = c_out.read()
        if data:
            session.receive(data)
        c_in.write(session.outgoing())
        if session.handshake_done:
            try:
                client_obj.do_handshake()
            except ssl.SSLWantReadError:
                continue
            client_obj.write(b"ping")
            assert session.receive(c_out.read()) == b"ping"
            c_in.write(session.send(b"pong"))
            assert client_obj.read(4) == b"pong"
            return session
    raise AssertionError("no handshake")


def client_for(certs: TlsFiles, cert: bool = False, rogue: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca_pem))
    if cert:
        ctx.load_cert_chain(str(certs.client_pem))
    if rogue:
        ctx.load_cert_chain(str(certs.rogue_cert), str(certs.rogue_key))
    return ctx


def test_pem_keystore_file_serves_tls(certs: TlsFiles) -> None:
    session = handshake(server_context(settings(**certs.server_pem_config())),
                        client_for(certs))
    assert session.peer_certificate() is None


def test_encrypted_pem_key_needs_ssl_key_password(certs: TlsFiles) -> None:
    props = {**certs.server_pem_config(), "ssl.keystore.location": str(certs.server_encrypted_pem)}
    with pytest.raises(ConfigError) as e:
        server_context(settings(**props))
    assert error_key(e) == "ssl.key.password"
    with pytest.raises(ConfigError) as e:
        server_context(settings(**props, **{"ssl.key.password": "wrong"}))
    assert error_key(e) == "ssl.key.password" and "wrong password" in str(e.value)
    handshake(server_context(settings(**props, **{"ssl.key.password": PASSWORD})),
              client_for(certs))


def test_pkcs12_key_and_trust_stores(certs: TlsFiles) -> None:
    ctx = server_context(settings(**certs.server_pkcs12_config(client_auth="required")))
    session = handshake(ctx, client_for(certs, cert=True))
    der = session.peer_certificate()
    assert der is not None and distinguished_name(der) == "CN=client,OU=eng,O=odradek"


def test_pkcs12_wrong_password_names_the_key(certs: TlsFiles) -> None:
    with pytest.raises(ConfigError) as e:
        server_context(settings(**{**certs.server_pkcs12_config(),
                                   "ssl.keystore.password": "nope"}))
    assert error_key(e) == "ssl.keystore.password"
    with pytest.raises(ConfigError) as e:
        server_context(settings(**{**certs.server_pkcs12_config(client_auth="required"),
                                   "ssl.truststore.password": "nope"}))
    assert error_key(e) == "ssl.truststore.password"


def test_inline_pem_key_store_and_trust_store(certs: TlsFiles) -> None:
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": one_line(certs.server_encrypted_key_pem),
        "ssl.keystore.certificate.chain": one_line(certs.server_chain_pem),
        "ssl.key.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": one_line(certs.ca.cert_pem.bytes().decode()),
        "ssl.client.auth": "required",
    }
    handshake(server_context(settings(**props)), client_for(certs, cert=True))


@pytest.mark.parametrize("props, key, words", [
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/k.pem"},
     "ssl.keystore.location", "cannot read"),
    ({"ssl.keystore.type": "BKS", "ssl.keystore.location": "/etc/hostname"},
     "ssl.keystore.type", "PEM or PKCS12"),
    ({"ssl.keystore.location": "/etc/hostname"}, "ssl.keystore.type", "keytool"),  # JKS
    ({}, "ssl.keystore.location", "no key store"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.key": "x"}, "ssl.keystore.type", "PEM"),
    ({"listener.name.ssl.ssl.keystore.type": "PEM",
      "listener.name.ssl.ssl.keystore.location": "/nonexistent"},
     "listener.name.ssl.ssl.keystore.location", "cannot read"),
])
def test_bad_key_store_fails_naming_the_key(props: dict[str, str], key: str,
                                             words: str) -> None:
    with pytest.raises(ConfigError) as e:
        ListenerTls(config(**props))
    assert error_key(e) == key and words in str(e.value)


def test_plaintext_only_config_builds_nothing() -> None:
    tls = ListenerTls(BrokerConfig.from_properties({}))
    assert tls.server_context("PLAINTEXT") is None and tls.client_context("PLAINTEXT") is None


def test_enabled_protocols_bound_the_versions(certs: TlsFiles) -> None:
    ctx = server_context(settings(**certs.server_pem_config(),
                                  **{"ssl.enabled.protocols": "TLSv1.3"}))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    client = client_for(certs)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLError):
        handshake(ctx, client)
    with pytest.raises(ConfigError) as e:
        server_context(settings(**certs.server_pem_config(),
                                **{"ssl.enabled.protocols": "TLSv1.2,SSLv3"}))
    assert error_key(e) == "ssl.enabled.protocols"


def test_cipher_suites_take_kafka_names(certs: TlsFiles) -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == \
        "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == \
        "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256") == "DHE-RSA-AES256-SHA256"
    assert openssl_cipher_name("TLS_AES_128_GCM_SHA256") == "TLS_AES_128_GCM_SHA256"
    ctx = server_context(settings(**certs.server_pem_config(), **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}))
    session = handshake(ctx, client_for(certs))  # trustme's keys are ECDSA
    assert "ECDHE-ECDSA-AES256-GCM-SHA384" in session.description()
    with pytest.raises(ConfigError) as e:
        server_context(settings(**certs.server_pem_config(),
                                **{"ssl.cipher.suites": "TLS_RSA_WITH_NULL_MD5"}))
    assert error_key(e) == "ssl.cipher.suites"


def test_client_context_checks_host_names_unless_disabled(certs: TlsFiles) -> None:
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca_pem)}
    assert client_context(settings(**trust)).check_hostname
    off = client_context(settings(**trust, **{"ssl.endpoint.identification.algorithm": ""}))
    assert not off.check_hostname and off.verify_mode == ssl.CERT_REQUIRED


# -- the session's failures -------------------------------------------------------------------


def test_garbage_is_not_a_handshake(certs: TlsFiles) -> None:
    session = TlsSession(server_context(settings(**certs.server_pem_config())))
    with pytest.raises(ssl.SSLError) as e:
        session.receive(b"\x00\x00\x00\x10garbage-garbage!")
    assert "PLAINTEXT client" in handshake_failure(e.value)


def test_required_client_auth_refuses_no_cert_and_a_foreign_cert(certs: TlsFiles) -> None:
    ctx = server_context(settings(**certs.server_pem_config(client_auth="required")))
    with pytest.raises(ssl.SSLError):
        handshake(ctx, client_for(certs))
    with pytest.raises(ssl.SSLError) as e:
        handshake(ctx, client_for(certs, rogue=True))
    assert e.value.reason == "CERTIFICATE_VERIFY_FAILED"


def test_requested_client_auth_takes_either(certs: TlsFiles) -> None:
    ctx = server_context(settings(**certs.server_pem_config(client_auth="requested")))
    assert handshake(ctx, client_for(certs)).peer_certificate() is None
    assert handshake(ctx, client_for(certs, cert=True)).peer_certificate() is not None


# -- principals -------------------------------------------------------------------------------


def test_listener_tls_maps_the_peer_certificate(certs: TlsFiles) -> None:
    tls = ListenerTls(config(**certs.server_pem_config(client_auth="required"), **{
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=(.*?),.*$/$2-$1/U"}))
    ctx = tls.server_context("SSL")
    assert ctx is not None
    der = handshake(ctx, client_for(certs, cert=True)).peer_certificate()
    assert der is not None
    assert tls.principal_name("SSL", der) == "ENG-CLIENT"


def test_distinguished_name_is_javas_rfc2253() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
        x509.NameAttribute(NameOID.COMMON_NAME, "svc"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
    ])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    dn = distinguished_name(cert.public_bytes(Encoding.DER))
    # X500Principal.getName(): most specific first, ',' escaped, the e-mail attribute (no
    # RFC 2253 keyword) as its OID and the hex DER of its IA5String
    assert dn == "1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex() + \
        ",CN=svc,OU=eng,O=Acme\\, Inc.,C=US"


# Kafka's SslPrincipalMapperTest cases.
@pytest.mark.parametrize("rules, dn, name", [
    ("DEFAULT", "CN=duke,OU=JavaSoft,O=Sun Microsystems", "CN=duke,OU=JavaSoft,O=Sun Microsystems"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
     "CN=kafka-server1,OU=ServiceUsers,O=kafka", "kafka-server1"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
     "CN=duke,OU=JavaSoft,O=Sun Microsystems", "CN=duke,OU=JavaSoft,O=Sun Microsystems"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
     "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
     "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "DUKE@JAVASOFT"),
    ("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/,DEFAULT", "CN=Tkafka,OU=x", "CN=Tkafka,OU=x"),
    ("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/,DEFAULT", "CN=kafka,OU=x", "kafka"),
    ("  RULE:^CN=([^,]*),.*$/svc\\/$1/ ,  DEFAULT  ", "CN=kafka,OU=x", "svc/kafka"),
])
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper.from_rules(rules).name(dn) == name


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/L",
    "RULE:CN=(.*?),OU=ServiceUsers.*/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
])
def test_invalid_principal_mapping_rules(rules: str) -> None:
    with pytest.raises(ConfigError):
        PrincipalMapper.from_rules(rules)


def test_no_matching_rule_fails() -> None:
    with pytest.raises(NoMatchingRule):
        PrincipalMapper.from_rules("RULE:^CN=admin,.*$/admin/").name("CN=other,O=x")


def test_close_notify_is_seen(certs: TlsFiles) -> None:
    # CPython's SSLObject.read answers a close_notify with b"" (aiokafka's close waits for
    # ours: a broker that missed it held every closing asyncio client for 30 s)
    session = TlsSession(server_context(settings(**certs.server_pem_config())))
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_for(certs).wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    while not session.handshake_done:
        with contextlib.suppress(ssl.SSLWantReadError):
            client.do_handshake()
        session.receive(c_out.read())
        c_in.write(session.outgoing())
    client.do_handshake()
    with contextlib.suppress(ssl.SSLWantReadError):
        client.unwrap()
    assert session.receive(c_out.read()) == b"" and session.peer_closed
    c_in.write(session.close())
    client.unwrap()  # the client got our close_notify
