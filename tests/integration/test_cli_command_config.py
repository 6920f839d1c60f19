"""Every CLI command that talks to a broker, with `--command-config`, against a broker
whose only client listener is SASL_SSL (SCRAM-SHA-512 for the user, PLAIN for the
broker itself and the admin), certificates from trustme.

The admin (PLAIN, a PKCS12 trust store) makes the SCRAM user with `odradek users`;
that user (a super user, PEM trust store) then runs topics, produce, consume, groups,
quotas, acls, transactions and partitions, which covers both of the CLI's clients:
confluent-kafka (librdkafka settings) and the blocking socket client (TLS context and
SaslHandshake/SaslAuthenticate). A wrong password fails each kind with the broker's
message and exit code 1; a file that names a missing trust store fails with exit 2.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.broker_proc import HOST, REPO_ROOT, BrokerProcess, free_port
from tests.integration.tls_certs import PASSWORD, TlsFiles

pytestmark = [pytest.mark.timeout(300), pytest.mark.odradek_only]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


def scram_jaas(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')


class SecuredBroker:
    def __init__(self, base: Path) -> None:
        self.certs = TlsFiles(base / "certs")
        port = free_port()
        self.broker = BrokerProcess(port=port, overrides={
            "listeners": f"SASL_SSL://{HOST}:{port}",
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
            "authorizer.class.name": STANDARD,
            "super.users": "User:admin;User:carol",
            **self.certs.server_pem_config(),
        })
        self.bootstrap = f"{HOST}:{port}"
        self.admin_config = self.write(base / "admin.properties", {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": ADMIN_JAAS.replace(' user_admin="admin-secret"', ""),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.certs.truststore_p12),
            "ssl.truststore.password": PASSWORD})
        self.carol_config = self.write(base / "carol.properties", self.carol("carol-secret"))
        self.wrong_config = self.write(base / "wrong.properties", self.carol("not-her-password"))

    def carol(self, password: str) -> dict[str, str]:
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": scram_jaas("carol", password),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs.ca_pem),
                "ssl.endpoint.identification.algorithm": "https"}

    @staticmethod
    def write(path: Path, props: dict[str, str]) -> Path:
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        return path

    def cli(self, command: str, *args: str, config: Path | None = None,
            before: tuple[str, ...] = (), stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """`odradek <command> [before...] --bootstrap-server B --command-config F args...`"""
        argv = [sys.executable, "-m", "odradek", command, *before,
                "--bootstrap-server", self.bootstrap,
                "--command-config", str(config or self.carol_config), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=90, input=stdin,
                              cwd=str(REPO_ROOT), check=False)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    s = SecuredBroker(tmp_path_factory.mktemp("command-config"))
    s.broker.start()
    try:
        out = s.cli("users", "upsert", "carol", "--add-config",
                    "SCRAM-SHA-512=[iterations=8192,password=carol-secret]",
                    config=s.admin_config)
        assert out.returncode == 0, out.stderr
        yield s
    finally:
        s.broker.stop()
        shutil.rmtree(s.broker.data_dir, ignore_errors=True)


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_topics_produce_consume_and_groups(secured: SecuredBroker) -> None:
    name = f"cc-{uuid.uuid4().hex[:8]}"
    ok(secured.cli("topics", "create", name, "--partitions", "2"))
    assert name in ok(secured.cli("topics", "list")).split()
    described = ok(secured.cli("topics", "describe", name))
    assert f"Topic: {name}\tPartitionCount: 2" in described
    ok(secured.cli("produce", name, "--key-separator", ":", stdin="k1:one\nk2:two\nk3:three\n"))
    out = ok(secured.cli("consume", name, "--from-beginning", "--group", "cc-group",
                         "--max-messages", "3", "--timeout", "20", "--print-key"))
    assert sorted(out.splitlines()) == ["k1\tone", "k2\ttwo", "k3\tthree"]
    assert "cc-group" in ok(secured.cli("groups", "list"))
    described = ok(secured.cli("groups", "describe", "cc-group"))
    assert name in described
    ok(secured.cli("users", "describe", "carol"))


def test_quotas_acls_transactions_and_partitions(secured: SecuredBroker,
                                                 tmp_path: Path) -> None:
    ok(secured.cli("quotas", "alter", "--user", "alice",
                   "--add-config", "producer_byte_rate=1048576"))
    assert "producer_byte_rate=1048576" in ok(secured.cli("quotas", "describe",
                                                          "--user", "alice"))
    name = f"cc-{uuid.uuid4().hex[:8]}"
    ok(secured.cli("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
                   "--topic", name))
    listed = ok(secured.cli("acls", "--list", "--topic", name))
    assert "User:alice" in listed and "READ" in listed.upper()

    ok(secured.cli("topics", "create", name))
    producer = Producer({  # an open transaction for `transactions list`/`describe`
        "bootstrap.servers": secured.bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
        "sasl.password": "carol-secret", "ssl.ca.location": str(secured.certs.ca_pem),
        "transactional.id": f"txn-{name}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(name, b"in a transaction")
    assert producer.flush(30) == 0
    listed = ok(secured.cli("transactions", "list"))
    assert f"txn-{name}" in listed and "Ongoing" in listed
    described = ok(secured.cli("transactions", "describe", "--transactional-id", f"txn-{name}"))
    assert f"{name}-0" in described
    producer.commit_transaction(30)

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": name, "partition": 0, "replicas": [1]}]}))
    out = secured.cli("partitions", "--reassignment-json-file", str(plan), "--verify",
                      before=("reassign",))
    assert "is completed" in ok(out)


def test_a_wrong_password_fails_clearly(secured: SecuredBroker) -> None:
    for command, args in (("quotas", ("describe",)), ("topics", ("list",)),
                          ("transactions", ("list",)), ("groups", ("list",))):
        started = time.monotonic()
        out = secured.cli(command, *args, config=secured.wrong_config)
        assert out.returncode == 1, (command, out.stderr)
        assert (f"odradek {command}: SASL SCRAM-SHA-512 authentication to "
                f"{secured.bootstrap} as carol failed: Authentication failed during "
                "authentication due to invalid credentials") in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and "not-her-password" not in out.stderr
        assert time.monotonic() - started < 10, command  # at once, not after retries


def test_a_bad_file_is_a_usage_error_naming_the_key(secured: SecuredBroker,
                                                    tmp_path: Path) -> None:
    bad = secured.write(tmp_path / "bad.properties", {
        **secured.carol("carol-secret"), "ssl.truststore.location": str(tmp_path / "none.pem")})
    for command, args in (("topics", ("list",)), ("acls", ("--list",))):
        out = secured.cli(command, *args, config=bad)
        assert out.returncode == 2, out.stderr
        assert "ssl.truststore.location" in out.stderr and "none.pem" in out.stderr
