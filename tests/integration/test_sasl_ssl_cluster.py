"""A cluster whose every listener is SASL_SSL, killed with kill -9 and restarted:
its ACLs and SCRAM credentials are still enforced.

One controller and three brokers. Brokers register, heartbeat, forward admin
requests and replicate over SASL_SSL (PLAIN, user `broker`, a super user; trustme
certificates, host names checked); clients log in with SCRAM-SHA-512 users made
with AlterUserScramCredentials: `admin` (a super user), `alice` (ACLs: WRITE and
READ on topic `secure`, READ on groups prefixed `g-`) and `mallory` (none).
StandardAuthorizer, no ACL means denied. After kill -9 of every node at once and a
restart from the same data dirs: the admin's SCRAM login works and lists the ACLs,
alice still writes and reads (the records written before the crash too), mallory is
still denied, a wrong password still refused.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.clients import upsert_scram
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.tls_certs import TlsFiles

pytestmark = [pytest.mark.timeout(300), pytest.mark.odradek_only, pytest.mark.integration]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-secret" user_broker="broker-secret";')
TOPIC = "secure"


def overrides(certs: TlsFiles) -> dict[str, object]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL,PLAINTEXT:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": JAAS,
        "listener.name.plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:admin",
        **certs.server_pem_config(),
    }


class SecuredCluster(ClusterProcesses):
    def __init__(self, base: Path) -> None:
        self.certs = TlsFiles(base / "certs")
        super().__init__(base, brokers=3, overrides=overrides(self.certs))

    def conf(self, user: str = "broker", password: str = "broker-secret",
             mechanism: str = "PLAIN") -> dict[str, Any]:
        return {"bootstrap.servers": self.live_bootstrap(), "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": str(self.certs.ca_pem), "broker.address.family": "v4",
                "socket.timeout.ms": 10000}

    def scram(self, user: str, password: str | None = None) -> dict[str, Any]:
        return self.conf(user, password or f"{user}-secret", "SCRAM-SHA-512")

    def admin(self) -> Any:  # the harness's views (brokers, partitions) as `broker`
        return AdminClient(self.conf())

    def crash_and_restart(self) -> None:
        nodes = [*self.brokers.values(), *self.controllers.values()]
        for node in nodes:
            node.kill9()
        for node in reversed(nodes):  # the controller first, then the brokers
            node.restart(hard=True)  # already dead: starts on the same port and data dir
        self.wait_for_brokers(set(self.brokers), timeout_s=60)


def produce(conf: dict[str, Any], values: list[bytes]) -> list[Any]:
    """Delivery errors (empty if every record was acknowledged)."""
    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    p = Producer({**conf, "acks": "all", "message.timeout.ms": 20000})
    for v in values:
        p.produce(TOPIC, v, on_delivery=delivered)
    p.flush(30)
    return errors


def consume_all(conf: dict[str, Any], group: str, count: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is None:
                got.append(m.value() or b"")
            elif err.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(err)
    finally:
        c.close()
    return got


def auth_error(conf: dict[str, Any]) -> str:
    """What librdkafka reports when the login is refused ('' if it is not)."""
    seen: list[str] = []
    with_cb: dict[str, Any] = {**conf, "error_cb": lambda e: seen.append(e.str())}
    admin = AdminClient(with_cb)
    try:
        admin.list_topics(timeout=5)
    except KafkaException:
        pass
    admin.poll(1)
    return " ".join(seen)


def check_enforced(cluster: SecuredCluster, expect: list[bytes]) -> None:
    admin = AdminClient(cluster.scram("admin"))  # the admin's SCRAM login
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ANY)
    acls = admin.describe_acls(everything).result(timeout=20)
    assert {(a.principal, a.name, a.operation) for a in acls} == {
        ("User:alice", TOPIC, AclOperation.WRITE), ("User:alice", TOPIC, AclOperation.READ),
        ("User:alice", "g-", AclOperation.READ)}
    assert produce(cluster.scram("alice"), expect[-5:]) == []
    assert sorted(consume_all(cluster.scram("alice"), f"g-{len(expect)}", len(expect))) \
        == sorted(expect)
    denied = produce(cluster.scram("mallory"), [b"nope"])
    assert denied and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in denied)
    assert "Authentication failed" in auth_error(cluster.scram("alice", "not-alice-secret"))


def test_acls_and_scram_users_survive_kill_9_of_every_node(tmp_path: Path) -> None:
    cluster = SecuredCluster(tmp_path)
    try:
        cluster.start()  # registrations and heartbeats over SASL_SSL
        for user in ("admin", "alice", "mallory"):
            upsert_scram(cluster.conf(), user, f"{user}-secret")  # forwarded to the controller
        admin = AdminClient(cluster.scram("admin"))
        from confluent_kafka.admin import NewTopic

        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(timeout=30)
        bindings = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL,
                               "User:alice", "*", op, AclPermissionType.ALLOW)
                    for op in (AclOperation.WRITE, AclOperation.READ)]
        bindings.append(AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED,
                                   "User:alice", "*", AclOperation.READ,
                                   AclPermissionType.ALLOW))
        for f in admin.create_acls(bindings).values():
            f.result(timeout=20)
        for p in range(3):
            cluster.wait_for_partition(TOPIC, p, lambda v: len(v.isr) == 3, "3 in sync")
        before = [f"before-{i}".encode() for i in range(5)]
        check_enforced(cluster, before)

        cluster.crash_and_restart()
        after = [f"after-{i}".encode() for i in range(5)]
        check_enforced(cluster, before + after)
    finally:
        cluster.close()
