"""A cluster whose every listener is SASL_PLAINTEXT: one controller, two brokers.

The brokers register, heartbeat and relay admin requests to the controller
over SASL (sasl.mechanism.controller.protocol), replicate from each other over
SASL (sasl.mechanism.inter.broker.protocol), each logging in with the
username/password of its listener's JAAS config, as Kafka's brokers do. A SCRAM
user made through one broker (AlterUserScramCredentials, forwarded to the
controller) can log in at the other.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.timeout(180), pytest.mark.odradek_only]

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="{user}" password="{user}-secret" user_broker="broker-secret" '
        'user_admin="admin-secret";')
SASL_EVERYWHERE: dict[str, object] = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": JAAS.format(user="broker"),
    "listener.name.plaintext.plain.sasl.jaas.config": JAAS.format(user="broker"),
}


def client_conf(bootstrap: str, mechanism: str = "PLAIN", user: str = "admin",
                password: str = "admin-secret") -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "broker.address.family": "v4"}


class SaslCluster(ClusterProcesses):
    def admin(self) -> Any:
        return AdminClient(client_conf(self.live_bootstrap()))


def test_a_sasl_cluster_replicates_forwards_and_shares_scram_users(tmp_path: Path) -> None:
    cluster = SaslCluster(tmp_path, brokers=2, overrides=SASL_EVERYWHERE)
    try:
        cluster.start()  # both brokers registered with the controller over SASL
        cluster.create_topic("replicated", 1, 2)  # forwarded over SASL, then replicated
        b1, b2 = cluster.brokers[1], cluster.brokers[2]
        admin = AdminClient(client_conf(b1.bootstrap))
        upsert = UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-secret")
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=20)
        p = Producer({**client_conf(b1.bootstrap), "acks": "all"})
        for i in range(10):
            p.produce("replicated", f"v{i}".encode())
        assert p.flush(30) == 0
        view = cluster.partitions("replicated")[0]
        assert sorted(view.isr) == [1, 2]
        c = Consumer({**client_conf(b2.bootstrap, "SCRAM-SHA-512", "dave", "dave-secret"),
                      "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe(["replicated"])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        assert got == [f"v{i}".encode() for i in range(10)]
        for node in (b1, b2, cluster.controller):
            log = node.log_path.read_text()
            assert "broker-secret" not in log.split("\n", 2)[-1]  # past the command line
        assert "User:broker authenticated" in cluster.controller.log_path.read_text()
    finally:
        cluster.close()
