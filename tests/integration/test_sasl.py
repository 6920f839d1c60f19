"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on a SASL_PLAINTEXT listener, with
real broker processes and the clients users run: confluent-kafka and kcat
(librdkafka), kafka-python, aiokafka, and odradek's own KafkaChannel (what
replication, forwarding and the lifecycle use). Hand-written frames check the
refusals: wrong password (SASL_AUTHENTICATION_FAILED, then closed), unknown
mechanism (UNSUPPORTED_SASL_MECHANISM with the enabled list), Metadata before
authentication (closed, no answer), hostile tokens (an answer or a close, the
broker keeps serving), an expired session (KIP-368) and SaslHandshake v0's
bare tokens. SCRAM credentials are made with AlterUserScramCredentials and
survive kill -9.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from odradek.protocol.client import ChannelError, KafkaChannel
from odradek.security.sasl import SaslClientConfig
from odradek.security.scram import ScramClient
from tests.integration.broker_proc import HOST, BrokerProcess, free_port

pytestmark = [pytest.mark.timeout(180), pytest.mark.odradek_only]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
MECHANISMS = tuple(USERS)


def sasl_overrides(port: int, **extra: object) -> dict[str, object]:
    return {
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port}",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **extra,
    }


def start_sasl_broker(**extra: object) -> BrokerProcess:
    port = free_port()
    return BrokerProcess(overrides=sasl_overrides(port, **extra), port=port).start()


def ck_conf(broker: BrokerProcess, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "broker.address.family": "v4", "socket.timeout.ms": 10000}


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient(ck_conf(broker, "PLAIN", "admin", "admin-secret"))


def add_scram_users(broker: BrokerProcess) -> None:
    a = admin(broker)
    upserts = [
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                4096), b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), b"carol-secret"),
    ]
    for f in a.alter_user_scram_credentials(upserts).values():
        f.result(timeout=20)


def create_topic(broker: BrokerProcess, name: str) -> None:
    a = admin(broker)  # kept until the answer: a destroyed client fails its futures
    a.create_topics([NewTopic(name, 1, 1)], operation_timeout=20)[name].result(timeout=20)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    b = start_sasl_broker()
    try:
        add_scram_users(b)
        yield b
    finally:
        b.stop()
        shutil.rmtree(b.data_dir, ignore_errors=True)


def topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:10]}"


def ck_roundtrip(broker: BrokerProcess, mechanism: str, name: str, values: list[bytes]) -> list[bytes]:
    user, password = USERS[mechanism]
    conf = ck_conf(broker, mechanism, user, password)
    p = Producer(conf)
    for v in values:
        p.produce(name, v)
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([name])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


# -- real clients ---------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes(broker: BrokerProcess, mechanism: str) -> None:
    name = topic()
    create_topic(broker, name)
    values = [f"{mechanism}-{i}".encode() for i in range(20)]
    assert ck_roundtrip(broker, mechanism, name, values) == values


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_produces_and_consumes(broker: BrokerProcess, mechanism: str) -> None:
    name = topic()
    create_topic(broker, name)
    user, password = USERS[mechanism]
    common = ["kcat", "-b", broker.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
              "-X", f"sasl.password={password}", "-t", name]
    lines = [f"{mechanism} line {i}" for i in range(5)]
    subprocess.run([*common, "-P"], input="\n".join(lines) + "\n", text=True, check=True,
                   timeout=60, capture_output=True)
    out = subprocess.run([*common, "-C", "-e", "-q", "-o", "beginning"], text=True,
                         check=True, timeout=60, capture_output=True).stdout
    assert out.splitlines() == lines


def test_kafka_python_with_scram(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    name = topic()
    create_topic(broker, name)
    conf = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "carol",
            "sasl_plain_password": "carol-secret", "request_timeout_ms": 10000}
    p = KafkaProducer(**conf)
    for i in range(10):
        p.send(name, f"kp-{i}".encode())
    p.flush(20)
    p.close(5)
    c = KafkaConsumer(**conf, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=1000)
    c.assign([TopicPartition(name, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=500).values():
            got.extend(m.value for m in batch)
    c.close()
    assert got == [f"kp-{i}".encode() for i in range(10)]


def test_aiokafka_with_scram(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    name = topic()
    create_topic(broker, name)
    conf = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret", "request_timeout_ms": 10000}

    async def go() -> list[bytes]:
        p = AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(10):
                await p.send_and_wait(name, f"aio-{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(**conf, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(name, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 10 and time.monotonic() < deadline:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
            return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(go(), 60)) == [f"aio-{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_the_brokers_own_channel_authenticates(broker: BrokerProcess, mechanism: str) -> None:
    """KafkaChannel (replication, forwarding, the lifecycle) with SaslHandshake v1
    and SaslAuthenticate v2; a wrong password is a ChannelError naming the cause."""
    user, password = USERS[mechanism]

    async def go(pw: str) -> Any:
        ch = KafkaChannel(HOST, broker.port, sasl=SaslClientConfig(mechanism, user, pw))
        try:
            return await ch.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        finally:
            ch.close()

    assert asyncio.run(go(password)).brokers[0].port == broker.port
    with pytest.raises(ChannelError, match="authentication .* failed"):
        asyncio.run(go("wrong"))


# -- refusals, on the wire -------------------------------------------------------------


class Wire:
    """Hand-made frames on one socket (SaslHandshake v0/v1, SaslAuthenticate v1)."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.sock = socket.create_connection((HOST, broker.port), timeout=10)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, key: int, version: int, body: bytes) -> None:
        self.corr += 1
        header = struct.pack(">hhih", key, version, self.corr, 4) + b"test"
        self.send_raw(header + body)

    def send_raw(self, frame: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def receive(self) -> bytes | None:
        """A response body without the correlation id, or None: closed."""
        size = self._exactly(4)
        if size is None:
            return None
        data = self._exactly(struct.unpack(">i", size)[0])
        return data

    def _exactly(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, TimeoutError):
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def closed(self) -> bool:
        return self.receive() is None

    def handshake(self, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
        self.send(17, version, _str(mechanism))
        data = self.receive()
        assert data is not None
        error, count = struct.unpack_from(">hi", data, 4)
        pos, names = 10, []
        for _ in range(count):
            (n,) = struct.unpack_from(">h", data, pos)
            names.append(data[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        return error, names

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes, int] | None:
        self.send(36, 1, struct.pack(">i", len(token)) + token)
        data = self.receive()
        if data is None:
            return None
        (error, n) = struct.unpack_from(">hh", data, 4)
        pos = 8
        message = None
        if n >= 0:
            message, pos = data[pos:pos + n].decode(), pos + n
        (length,) = struct.unpack_from(">i", data, pos)
        auth = data[pos + 4:pos + 4 + length]
        (lifetime,) = struct.unpack_from(">q", data, pos + 4 + length)
        return error, message, auth, lifetime

    def metadata(self) -> bytes | None:
        self.send(3, 1, struct.pack(">i", -1))
        return self.receive()


def _str(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def assert_still_serving(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        assert w.handshake("PLAIN") == (0, list(MECHANISMS))
        assert w.authenticate(b"\x00alice\x00alice-secret")[0] == 0  # type: ignore[index]
        assert w.metadata() is not None
    finally:
        w.close()


def test_wrong_password_is_sasl_authentication_failed_then_closed(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        assert w.handshake("PLAIN") == (0, list(MECHANISMS))
        answer = w.authenticate(b"\x00alice\x00not-her-password")
        assert answer is not None
        error, message, _, _ = answer
        assert error == 58 and message and "Invalid username or password" in message
        assert w.closed()
    finally:
        w.close()
    log = broker.log_path.read_text()
    assert "not-her-password" not in log
    assert "SASL authentication failed: listener SASL_PLAINTEXT, peer 127.0.0.1:" in log


def test_wrong_scram_password_with_confluent_kafka_is_an_authentication_error(
        broker: BrokerProcess) -> None:
    errors: list[str] = []
    p = Producer({**ck_conf(broker, "SCRAM-SHA-256", "bob", "wrong"),
                  "error_cb": lambda e: errors.append(str(e))})
    p.produce("never", b"x")
    p.flush(3)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e for e in errors), errors


def test_unknown_mechanism_lists_the_enabled_ones_then_closes(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        assert w.handshake("GSSAPI") == (33, list(MECHANISMS))
        assert w.closed()
    finally:
        w.close()


def test_metadata_before_authentication_closes_the_connection(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        assert w.metadata() is None
    finally:
        w.close()
    w = Wire(broker)
    try:  # after the handshake but before SaslAuthenticate: the same
        w.handshake("SCRAM-SHA-256")
        assert w.metadata() is None
    finally:
        w.close()


def test_authenticate_before_handshake_is_illegal_sasl_state(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        answer = w.authenticate(b"\x00alice\x00alice-secret")
        assert answer is not None and answer[0] == 34
        assert w.closed()
    finally:
        w.close()


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_garbage_tokens_never_crash_the_broker(broker: BrokerProcess, mechanism: str) -> None:
    hostile = [b"", b"\x00" * 100_000, bytes(range(256)) * 64, b"n,,n=\xff\xfe,r=x",
               b"n,,n=bob,r=" + b"A" * 90_000, b"c=biws,r=x,p=" + b"=" * 1000, b"\x00\x00\x00"]
    for token in hostile:
        w = Wire(broker)
        try:
            w.handshake(mechanism)
            answer = w.authenticate(token)
            if answer is not None and answer[0] == 0 and mechanism != "PLAIN":
                answer = w.authenticate(token)  # SCRAM: the second message
            assert answer is None or answer[0] == 58
            assert w.closed()
        finally:
            w.close()
    for lie in (struct.pack(">i", 2**31 - 1), struct.pack(">i", -5), b"\x7f"):
        w = Wire(broker)
        try:  # SaslAuthenticate v1 whose bytes length lies
            w.handshake(mechanism)
            w.send(36, 1, lie)
            assert w.closed()
        finally:
            w.close()
    assert_still_serving(broker)


def test_handshake_v0_takes_bare_tokens(broker: BrokerProcess) -> None:
    w = Wire(broker)
    try:
        assert w.handshake("PLAIN", version=0)[0] == 0
        w.send_raw(b"\x00alice\x00alice-secret")
        assert w.receive() == b""  # PLAIN's empty answer, as a bare frame
        assert w.metadata() is not None
    finally:
        w.close()
    w = Wire(broker)
    try:
        w.handshake("SCRAM-SHA-512", version=0)
        client = ScramClient("SCRAM-SHA-512", "carol", "carol-secret")
        w.send_raw(client.first())
        server_first = w.receive()
        assert server_first is not None
        w.send_raw(client.final(server_first))
        server_final = w.receive()
        assert server_final is not None
        client.verify(server_final)
        assert w.metadata() is not None
    finally:
        w.close()


# -- KIP-368 and restarts ---------------------------------------------------------------


def test_expired_session_is_closed_unless_it_reauthenticates() -> None:
    b = start_sasl_broker(**{"connections.max.reauth.ms": 1500})
    try:
        w = Wire(b)
        try:
            w.handshake("PLAIN")
            answer = w.authenticate(b"\x00alice\x00alice-secret")
            assert answer is not None and answer[3] == 1500  # session_lifetime_ms
            assert w.metadata() is not None
            time.sleep(1.0)
            w.handshake("PLAIN")  # re-authenticate in time (KIP-368)
            assert w.authenticate(b"\x00alice\x00alice-secret")[0] == 0  # type: ignore[index]
            time.sleep(1.0)
            assert w.metadata() is not None  # 2 s after the first login, 1 s after the second
            time.sleep(1.7)
            assert w.metadata() is None  # expired: closed
        finally:
            w.close()
        assert "SASL session expired" in b.log_path.read_text()
        # librdkafka re-authenticates on its own and keeps working past the lifetime
        name = topic()
        create_topic(b, name)
        p = Producer(ck_conf(b, "PLAIN", "alice", "alice-secret"))
        for i in range(8):
            p.produce(name, f"r{i}".encode())
            p.flush(10)
            time.sleep(0.5)
        assert p.flush(10) == 0
    finally:
        b.stop()
        shutil.rmtree(b.data_dir, ignore_errors=True)


def test_scram_credentials_survive_kill_9() -> None:
    b = start_sasl_broker()
    try:
        add_scram_users(b)
        name = topic()
        create_topic(b, name)
        b.kill9()
        b.start()
        assert ck_roundtrip(b, "SCRAM-SHA-512", name, [b"after restart"]) == [b"after restart"]
        a = admin(b)
        described = a.describe_user_scram_credentials(["bob", "carol"])
        infos = {u: [(i.mechanism, i.iterations) for i in f.result(20).scram_credential_infos]
                 for u, f in described.items()}
        assert infos == {"bob": [(ScramMechanism.SCRAM_SHA_256, 4096)],
                         "carol": [(ScramMechanism.SCRAM_SHA_512, 8192)]}
        metadata_log = b"".join(p.read_bytes() for p in b.data_dir.rglob("*.log"))
        assert b"carol-secret" not in metadata_log and b"UserScramCredentialRecord" in metadata_log
    finally:
        b.stop()
        shutil.rmtree(b.data_dir, ignore_errors=True)


# -- the CLI: storage format --add-scram, odradek users --------------------------------


def odradek_cli(*args: str) -> subprocess.CompletedProcess[str]:
    import sys

    from tests.integration.broker_proc import REPO_ROOT

    return subprocess.run([sys.executable, "-m", "odradek", *args], check=False,
                          capture_output=True,
                          text=True, timeout=60, cwd=str(REPO_ROOT))


def test_storage_format_bootstraps_scram_users_and_odradek_users_manages_them(
        tmp_path: Any) -> None:
    port = free_port()
    data = tmp_path / "data"
    overrides = sasl_overrides(port, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                                        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                                            'org.apache.kafka.common.security.scram.ScramLoginModule'
                                            ' required username="admin" password="admin-secret";'})
    del overrides["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {**overrides, "log.dirs": data}.items()))
    done = odradek_cli("storage", "format", "-c", str(props), "--cluster-id", "SaslCluster000001",
                       "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]",
                       "--add-scram", 'SCRAM-SHA-512=[name=erin,iterations=8192,password="erin-secret"]')
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 SCRAM credential(s)" in done.stdout
    assert b"admin-secret" not in (data / "bootstrap-records.json").read_bytes()
    b = BrokerProcess(config_file=props, port=port, data_dir=data,
                      overrides={"listeners": f"SASL_PLAINTEXT://{HOST}:{port}"}).start()
    try:
        name = topic()
        a = AdminClient(ck_conf(b, "SCRAM-SHA-256", "admin", "admin-secret"))
        a.create_topics([NewTopic(name, 1, 1)], operation_timeout=20)[name].result(timeout=20)
        client = tmp_path / "client.properties"
        client.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="admin-secret";\n')
        common = ["users", "--bootstrap-server", b.bootstrap, "--command-config", str(client)]
        out = odradek_cli(*common, "describe")
        assert out.returncode == 0, out.stderr
        assert "'admin' are SCRAM-SHA-256(iterations=4096)" in out.stdout
        assert "'erin' are SCRAM-SHA-512(iterations=8192)" in out.stdout
        out = odradek_cli(*common, "upsert", "frank", "--add-config",
                          "SCRAM-SHA-512=[iterations=4096,password=frank-secret]")
        assert out.returncode == 0, out.stderr
        USERS["FRANK"] = ("frank", "frank-secret")
        try:
            values = [b"frank was here"]
            p = Producer(ck_conf(b, "SCRAM-SHA-512", "frank", "frank-secret"))
            p.produce(name, values[0])
            assert p.flush(20) == 0
        finally:
            del USERS["FRANK"]
        out = odradek_cli(*common, "delete", "frank", "--mechanism", "SCRAM-SHA-256")
        assert out.returncode == 1 and "does not exist" in out.stderr  # frank has no such one
        out = odradek_cli(*common, "delete", "frank")  # every mechanism frank has
        assert out.returncode == 0, out.stderr
        out = odradek_cli(*common, "describe", "frank")
        assert out.returncode == 1 and "nonexistent" in out.stderr
        bad = odradek_cli(*common, "upsert", "x", "--add-config", "SCRAM-SHA-1=[password=x]")
        assert bad.returncode == 2 and "unknown SCRAM mechanism" in bad.stderr
    finally:
        b.stop()


# -- SASL_SSL: the same exchange over TLS -----------------------------------------------


def test_sasl_ssl_with_scram_and_plain(tmp_path: Any) -> None:
    from tests.integration.tls_certs import TlsFiles

    certs = TlsFiles(tmp_path / "certs")
    port = free_port()
    overrides = sasl_overrides(port, **certs.server_pem_config())
    overrides = {k.replace("sasl_plaintext", "sasl_ssl"): str(v).replace("SASL_PLAINTEXT", "SASL_SSL")
                 for k, v in overrides.items()}
    b = BrokerProcess(overrides=overrides, port=port).start()
    try:
        tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca_pem)}
        a = AdminClient({**ck_conf(b, "PLAIN", "admin", "admin-secret"), **tls})
        upsert = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")
        for f in a.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=20)
        name = topic()
        a.create_topics([NewTopic(name, 1, 1)], operation_timeout=20)[name].result(timeout=20)
        conf = {**ck_conf(b, "SCRAM-SHA-512", "carol", "carol-secret"), **tls}
        p = Producer(conf)
        p.produce(name, b"over tls")
        assert p.flush(20) == 0
        c = Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe([name])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == [b"over tls"]
        errors: list[str] = []
        bad = Producer({**ck_conf(b, "SCRAM-SHA-512", "carol", "wrong"), **tls,
                        "error_cb": lambda e: errors.append(str(e))})
        bad.produce(name, b"x")
        bad.flush(3)
        assert any("invalid credentials" in e for e in errors), errors
    finally:
        b.stop()
