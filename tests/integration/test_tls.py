"""TLS listeners against real clients: confluent-kafka, kcat, kafka-python, aiokafka.

One broker (module scope) listens on three listeners:
- MTLS (SSL, `ssl.client.auth=required`, PKCS12 key and trust stores): clients must
  present a certificate signed by the test CA; the broker logs the principal;
- OPEN (SSL, `listener.name.open.ssl.client.auth=none` over the same stores): server
  authentication only;
- PLAINTEXT: for the readiness probe and topic creation.
Hostile TLS (garbage, a plaintext Kafka request, a half handshake, a foreign client
certificate) must close only that connection, with the peer and the reason in the log.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.security.tls import TLS_HANDSHAKE_TIMEOUT_S
from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import Out, consume, create_topic, produce
from tests.integration.tls_certs import TlsFiles

pytestmark = pytest.mark.integration

RECORDS = 300
VALUE_BYTES = 20_000  # fetch responses of several MB go through the TLS transport


class TlsBroker:
    def __init__(self, base: Path) -> None:
        self.certs = TlsFiles(base / "certs")
        self.mtls_port, self.open_port = free_port(), free_port()
        self.proc = BrokerProcess(
            data_dir=base / "data",
            overrides={
                "listeners": (f"PLAINTEXT://{HOST}:{{port}},MTLS://{HOST}:{self.mtls_port},"
                              f"OPEN://{HOST}:{self.open_port}"),
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL,OPEN:SSL,"
                                                  "CONTROLLER:PLAINTEXT",
                **self.certs.server_pkcs12_config(client_auth="required"),
                "listener.name.open.ssl.client.auth": "none",
            },
        )
        self.proc.overrides["listeners"] = self.proc.overrides["listeners"].replace(
            "{port}", str(self.proc.port))

    @property
    def plaintext(self) -> str:
        return self.proc.bootstrap

    @property
    def mtls(self) -> str:
        return f"{HOST}:{self.mtls_port}"

    @property
    def open(self) -> str:
        return f"{HOST}:{self.open_port}"

    def log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    b = TlsBroker(tmp_path_factory.mktemp("tls"))
    b.proc.start()
    try:
        yield b
    finally:
        b.proc.close()


def ssl_conf(client: str, certs: TlsFiles, client_cert: bool) -> dict[str, Any]:
    if client == "confluent":
        return certs.librdkafka(client_cert=client_cert)
    if client == "kafka-python":
        conf: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": str(certs.ca_pem),
                                "ssl_check_hostname": True}
        if client_cert:
            conf.update(ssl_certfile=str(certs.client_cert), ssl_keyfile=str(certs.client_key))
        return conf
    ctx = ssl.create_default_context(cafile=str(certs.ca_pem))
    if client_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return {"security_protocol": "SSL", "ssl_context": ctx}


def records(tag: str) -> list[Out]:
    return [Out(value=(f"{tag}-{i}-".encode() * 2000)[:VALUE_BYTES], key=str(i).encode())
            for i in range(RECORDS)]


def wait_for_log(b: TlsBroker, pattern: str, timeout_s: float = 10.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        m = re.search(pattern, b.log())
        if m:
            return m
        assert time.monotonic() < deadline, f"no log line matches {pattern!r}"
        time.sleep(0.1)


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
@pytest.mark.parametrize("listener", ["open", "mtls"])
def test_produce_and_consume_over_tls(tls_broker: TlsBroker, topic_name: str, client: str,
                                      listener: str) -> None:
    create_topic(tls_broker.plaintext, topic_name)
    bootstrap = tls_broker.open if listener == "open" else tls_broker.mtls
    conf = ssl_conf(client, tls_broker.certs, client_cert=listener == "mtls")
    sent = records(client)
    acks = {"acks": "all"}
    offsets = produce(client, bootstrap, topic_name, sent, **acks, **conf)
    assert [o for _, o in offsets] == list(range(RECORDS))
    got = consume(client, bootstrap, topic_name, RECORDS, **conf)
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in sent]
    # the same bytes read over PLAINTEXT (zero-copy path unchanged) agree
    plain = consume("confluent", tls_broker.plaintext, topic_name, RECORDS)
    assert [r.value for r in plain] == [r.value for r in sent]


def test_mutual_tls_gives_the_certificate_principal(tls_broker: TlsBroker) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_broker.mtls,
                         **tls_broker.certs.librdkafka(client_cert=True)})
    assert admin.list_topics(timeout=10).brokers
    wait_for_log(tls_broker, r"TLS connection from 127\.0\.0\.1:\d+ on listener MTLS: TLSv1\.3 "
                             r"\S+, principal User:CN=client,OU=eng,O=odradek")


@pytest.mark.parametrize("cert", ["none", "foreign"])
def test_required_client_auth_refuses(tls_broker: TlsBroker, cert: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf = tls_broker.certs.librdkafka(rogue=cert == "foreign")
    admin = AdminClient({"bootstrap.servers": tls_broker.mtls, **conf})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    reason = "CERTIFICATE_VERIFY_FAILED" if cert == "foreign" else \
        "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    wait_for_log(tls_broker, rf"TLS handshake with 127\.0\.0\.1:\d+ on listener MTLS failed: "
                             rf"{reason}")


def _raw(b: TlsBroker, payload: bytes) -> bytes:
    """Send `payload` to the OPEN listener; what the broker answers before it closes."""
    with socket.create_connection((HOST, b.open_port), timeout=5) as s:
        s.sendall(payload)
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def _api_versions_request() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def assert_still_serving(b: TlsBroker) -> None:
    from confluent_kafka.admin import AdminClient

    assert b.proc.is_running()
    admin = AdminClient({"bootstrap.servers": b.open, **b.certs.librdkafka()})
    assert admin.list_topics(timeout=10).brokers


def test_garbage_and_a_plaintext_client_on_a_tls_port_close_only_their_connection(
        tls_broker: TlsBroker) -> None:
    # garbage: at most a TLS alert comes back, never a Kafka response
    answer = _raw(tls_broker, os.urandom(64) + b"\x00" * 64)
    assert len(answer) < 64
    wait_for_log(tls_broker, r"TLS handshake with 127\.0\.0\.1:\d+ on listener OPEN failed")
    answer = _raw(tls_broker, _api_versions_request())
    assert len(answer) < 64
    wait_for_log(tls_broker, r"on listener OPEN failed: WRONG_VERSION_NUMBER \(not TLS: a "
                             r"PLAINTEXT client")
    assert_still_serving(tls_broker)


def test_half_a_handshake_times_out(tls_broker: TlsBroker) -> None:
    ctx = ssl.create_default_context(cafile=str(tls_broker.certs.ca_pem))
    out, inc = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=HOST)
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = out.read()
    started = time.monotonic()
    with socket.create_connection((HOST, tls_broker.open_port), timeout=30) as s:
        s.sendall(hello[: len(hello) // 2])  # then nothing
        while s.recv(4096):
            pass
    waited = time.monotonic() - started
    assert TLS_HANDSHAKE_TIMEOUT_S - 1 <= waited <= TLS_HANDSHAKE_TIMEOUT_S + 5
    wait_for_log(tls_broker, r"TLS handshake with 127\.0\.0\.1:\d+ on listener OPEN failed: "
                             r"no TLS handshake within")
    assert_still_serving(tls_broker)


def test_kcat_over_tls_with_and_without_client_certificate(tls_broker: TlsBroker,
                                                            topic_name: str) -> None:
    if shutil.which("kcat") is None:
        if os.environ.get("CI"):
            pytest.fail("kcat not on PATH (CI must have it: see .ci/run)", pytrace=False)
        pytest.skip("kcat not on PATH (apt-get install kcat)")
    create_topic(tls_broker.plaintext, topic_name)
    certs = tls_broker.certs

    def kcat(bootstrap: str, client_cert: bool, *args: str, stdin: str | None = None) -> str:
        conf = certs.librdkafka(client_cert=client_cert)
        cmd = ["kcat", "-b", bootstrap, "-m", "15",
               *[a for k, v in conf.items() for a in ("-X", f"{k}={v}")], *args]
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 0, f"{cmd}: {r.stderr[-2000:]}"
        return r.stdout

    lines = [f"k{i}:value {i} " + "x" * 5000 for i in range(50)]
    kcat(tls_broker.open, False, "-P", "-t", topic_name, "-K:", stdin="\n".join(lines) + "\n")
    kcat(tls_broker.mtls, True, "-P", "-t", topic_name, "-K:", stdin="\n".join(lines) + "\n")
    for bootstrap, cert in ((tls_broker.open, False), (tls_broker.mtls, True)):
        out = kcat(bootstrap, cert, "-C", "-t", topic_name, "-e", "-o", "beginning",
                   "-f", "%k:%s\n")
        assert out.splitlines() == lines + lines
