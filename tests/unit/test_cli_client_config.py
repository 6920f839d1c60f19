"""cli/client_config.py: a Kafka client properties file becomes librdkafka's settings and
the socket client's TLS context and SASL login; a bad file names the key, exit 2."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from odradek.cli import client_config
from odradek.cli.client_config import CommandConfigError, load
from odradek.cli.main import main
from tests.integration.tls_certs import PASSWORD, TlsFiles, one_line

SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="carol" password="carol-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles(tmp_path_factory.mktemp("certs"))


def write(tmp_path: Path, props: dict[str, str]) -> str:
    path = tmp_path / "client.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return str(path)


def test_sasl_ssl_with_a_pem_trust_store_maps_to_ca_location_and_a_scram_login(
        tmp_path: Path, certs: TlsFiles) -> None:
    config = load(write(tmp_path, {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": SCRAM, "ssl.truststore.location": str(certs.ca_pem)}))
    assert config.librdkafka == {
        "security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "carol", "sasl.password": "carol-secret",
        "ssl.ca.location": str(certs.ca_pem), "ssl.endpoint.identification.algorithm": "https"}
    assert config.sasl is not None and config.sasl.mechanism == "SCRAM-SHA-512"
    assert config.ssl_context is not None and config.ssl_context.check_hostname
    assert config.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert "carol-secret" not in repr(config)


def test_pkcs12_stores_give_ca_pem_and_librdkafkas_keystore(tmp_path: Path,
                                                             certs: TlsFiles) -> None:
    config = load(write(tmp_path, {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(certs.truststore_p12),
        "ssl.truststore.password": PASSWORD,
        "ssl.keystore.location": str(certs.client_p12),  # type from the content
        "ssl.keystore.password": PASSWORD, "ssl.endpoint.identification.algorithm": ""}))
    rd = config.librdkafka
    assert rd["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert rd["ssl.keystore.location"] == str(certs.client_p12)
    assert rd["ssl.keystore.password"] == PASSWORD
    assert rd["ssl.endpoint.identification.algorithm"] == "none"
    assert config.sasl is None and config.ssl_context is not None
    assert not config.ssl_context.check_hostname


def test_pem_key_stores_file_and_inline(tmp_path: Path, certs: TlsFiles) -> None:
    rd = load(write(tmp_path, {
        "security.protocol": "SSL", "ssl.truststore.location": str(certs.ca_pem),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client_pem)})).librdkafka
    assert rd["ssl.certificate.location"] == rd["ssl.key.location"] == str(certs.client_pem)
    rd = load(write(tmp_path, {
        "security.protocol": "SSL",
        "ssl.truststore.certificates": one_line(certs.ca.cert_pem.bytes().decode()),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": one_line(certs.server_encrypted_key_pem),
        "ssl.keystore.certificate.chain": one_line(certs.server_chain_pem),
        "ssl.key.password": PASSWORD})).librdkafka
    assert "BEGIN CERTIFICATE" in rd["ssl.ca.pem"] and "PRIVATE KEY" in rd["ssl.key.pem"]
    assert rd["ssl.key.password"] == PASSWORD and "ssl.certificate.pem" in rd


def test_plaintext_sasl_with_librdkafkas_own_keys_and_passthrough(tmp_path: Path) -> None:
    config = load(write(tmp_path, {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
        "sasl.username": "admin", "sasl.password": "x", "client.id": "me",
        "ssl.keymanager.algorithm": "SunX509"}))
    assert config.ssl_context is None and config.sasl is not None
    assert config.librdkafka["client.id"] == "me"
    assert "ssl.keymanager.algorithm" not in config.librdkafka
    assert client_config.librdkafka_settings(None) == {}


@pytest.mark.parametrize(("props", "named"), [
    ({"security.protocol": "SASL_TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": SCRAM}, "sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "org.Foo required;"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/no/such/ca.pem"},
     "ssl.truststore.location"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS",
      "ssl.truststore.location": "/etc/hostname"}, "ssl.truststore.type"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
     "ssl.endpoint.identification.algorithm"),
    ({"no.such.key": "1"}, "no.such.key"),
])
def test_a_bad_value_names_its_key(tmp_path: Path, props: dict[str, str], named: str) -> None:
    with pytest.raises(CommandConfigError) as e:
        load(write(tmp_path, props))
    assert named in str(e.value)


def test_a_bad_file_is_exit_2_before_any_connection(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})
    for argv in (["topics", "--command-config", path, "list"],
                 ["quotas", "--command-config", path, "describe"],
                 ["partitions", "reassign", "--command-config", path,
                  "--reassignment-json-file", "x", "--verify"],
                 ["produce", "t", "--command-config", str(tmp_path / "missing")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "--command-config" in err and ("sasl.mechanism" in err or "missing" in err)
