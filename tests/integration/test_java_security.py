"""The Apache Kafka Java client (kafka-clients 3.9) over SASL_SSL with SCRAM-SHA-512
and over SSL with a client certificate (mutual TLS), against one broker with both
listeners; trustme certificates.

- SASL_SSL: a Java trust store in PKCS12 made with `cryptography`
  (`serialize_java_truststore`, whose entries carry the trusted-certificate
  attribute Java looks for), `sasl.jaas.config` with ScramLoginModule;
- SSL: `ssl.truststore.type=PEM` (KIP-651) and a PKCS12 key store with the client's
  key and chain (principal `User:CN=client,OU=eng,O=odradek`).

Each creates a topic, produces, consumes in a group and commits
(`java/OdradekJavaSecurity.java`); a wrong password ends in SaslAuthenticationException
and a client without a certificate on the mutual-TLS listener in
SslAuthenticationException, each within the client's timeouts rather than a hang.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import upsert_scram
from tests.integration.test_java_client import compile_java
from tests.integration.tls_certs import PASSWORD, TlsFiles

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(300)]

SOURCE = Path(__file__).parent / "java" / "OdradekJavaSecurity.java"
RUN_TIMEOUT_S = 120
RECORDS = 200
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


def scram_jaas(user: str, password: str) -> str:
    return ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


class Secured:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.certs = TlsFiles(base / "certs")
        self.sasl_port, self.mtls_port = free_port(), free_port()
        self.broker = BrokerProcess(port=self.sasl_port, data_dir=base / "data", overrides={
            "listeners": f"SASL_SSL://{HOST}:{self.sasl_port},MTLS://{HOST}:{self.mtls_port}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
            **self.certs.server_pem_config(),
            "listener.name.mtls.ssl.client.auth": "required",
        })
        ca = x509.load_pem_x509_certificate(self.certs.ca.cert_pem.bytes())
        self.java_truststore = base / "java-truststore.p12"
        self.java_truststore.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca, b"odradek-ca")],
            serialization.BestAvailableEncryption(PASSWORD.encode())))

    @property
    def sasl_ssl(self) -> str:
        return f"{HOST}:{self.sasl_port}"

    @property
    def mtls(self) -> str:
        return f"{HOST}:{self.mtls_port}"

    def write(self, name: str, props: dict[str, str]) -> Path:
        path = self.base / name
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        return path

    def scram(self, password: str) -> Path:
        return self.write(f"scram-{uuid.uuid4().hex[:6]}.properties", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": scram_jaas("dora", password),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.java_truststore),
            "ssl.truststore.password": PASSWORD})

    def mutual_tls(self, with_cert: bool) -> Path:
        props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                 "ssl.truststore.location": str(self.certs.ca_pem)}
        if with_cert:
            props.update({"ssl.keystore.type": "PKCS12",
                          "ssl.keystore.location": str(self.certs.client_p12),
                          "ssl.keystore.password": PASSWORD, "ssl.key.password": PASSWORD})
        return self.write(f"mtls-{uuid.uuid4().hex[:6]}.properties", props)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    s = Secured(tmp_path_factory.mktemp("java-security"))
    s.broker.start()
    try:
        upsert_scram({"bootstrap.servers": s.sasl_ssl, "security.protocol": "SASL_SSL",
                      "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                      "sasl.password": "admin-secret", "ssl.ca.location": str(s.certs.ca_pem)},
                     "dora", "dora-secret")
        yield s
    finally:
        s.broker.stop()
        shutil.rmtree(s.broker.data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java(SOURCE, tmp_path_factory)


def run_java(classpath: str, bootstrap: str, props: Path, *mode: str) -> dict[str, str]:
    topic = f"java-sec-{uuid.uuid4().hex[:8]}"
    result = subprocess.run(
        ["java", "-Xmx256m", "-cp", classpath, "OdradekJavaSecurity", bootstrap, topic,
         str(props), *mode],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    print(result.stdout)
    steps = dict(re.findall(r"^STEP (\S+) ((?:ok|FAIL).*)$", result.stdout, re.MULTILINE))
    assert result.returncode == 0 and result.stdout.rstrip().endswith("PASS"), (
        f"exit {result.returncode}\n{result.stdout}\n{result.stderr[-4000:]}")
    return steps


def test_java_scram_sha_512_over_sasl_ssl(secured: Secured, classpath: str) -> None:
    steps = run_java(classpath, secured.sasl_ssl, secured.scram("dora-secret"),
                     "roundtrip", str(RECORDS))
    assert set(steps) == {"create", "produce", "consume"}


def test_java_mutual_tls_with_client_certificate(secured: Secured, classpath: str) -> None:
    steps = run_java(classpath, secured.mtls, secured.mutual_tls(with_cert=True),
                     "roundtrip", str(RECORDS))
    assert set(steps) == {"create", "produce", "consume"}


def test_java_wrong_password_is_sasl_authentication_exception(secured: Secured,
                                                               classpath: str) -> None:
    steps = run_java(classpath, secured.sasl_ssl, secured.scram("not-dora-secret"), "refused")
    assert "org.apache.kafka.common.errors.SaslAuthenticationException" in steps["refused"], steps
    assert "not-dora-secret" not in secured.broker.log_path.read_text(errors="replace")


def test_java_without_certificate_is_ssl_authentication_exception(secured: Secured,
                                                                   classpath: str) -> None:
    steps = run_java(classpath, secured.mtls, secured.mutual_tls(with_cert=False), "refused")
    assert "org.apache.kafka.common.errors.SslAuthenticationException" in steps["refused"], steps
