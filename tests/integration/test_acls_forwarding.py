"""Forwarded admin requests are authorized as the client, not the relaying broker
(KIP-590 Envelopes), in a cluster of a controller and a broker-only node.

The controller listener and the broker's BROKER listener are SSL with client
certificates required; `ssl.principal.mapping.rules` makes the certificates'
CN the principal, so the broker talks to the controller as User:broker and a
client with the test's client certificate is User:client, both in
`super.users`. The test's PLAINTEXT client is User:ANONYMOUS and has no ACL
(`allow.everyone.if.no.acl.found` is false): through the broker it can create
neither ACLs nor topics, although the broker that relays its requests could;
once User:client granted it ALTER and CREATE on the cluster, it can.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.broker_proc import HOST, free_port
from tests.integration.clients import TIMEOUT, ck_admin
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.tls_certs import TlsFiles

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180), pytest.mark.odradek_only]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _cluster_acl(op: AclOperation) -> AclBinding:
    return AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                      "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)


def _error(fut) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=TIMEOUT)
    return ei.value.args[0]


@pytest.fixture
def secured_cluster(tmp_path: Path) -> Iterator[tuple[ClusterProcesses, str, TlsFiles]]:
    certs = TlsFiles(tmp_path / "certs")
    overrides = {
        "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT,BROKER:SSL",
        "inter.broker.listener.name": "BROKER",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": STANDARD,
        "super.users": "User:broker;User:client",
        "allow.everyone.if.no.acl.found": "false",
        **certs.server_pem_config(client_auth="required"),
    }
    cluster = ClusterProcesses(tmp_path, brokers=1, overrides=overrides)
    (broker,) = cluster.brokers.values()
    ssl_port = free_port()
    broker.overrides["listeners"] = f"PLAINTEXT://{HOST}:{broker.port},BROKER://{HOST}:{ssl_port}"
    try:
        cluster.controller.start()
        broker.start()
        yield cluster, f"{HOST}:{ssl_port}", certs
    finally:
        cluster.close()


def test_forwarded_requests_are_authorized_as_the_client(secured_cluster) -> None:
    cluster, ssl_bootstrap, certs = secured_cluster
    anonymous = ck_admin(cluster.bootstrap)
    (fut,) = anonymous.create_acls([_cluster_acl(AclOperation.ALTER)],
                                   request_timeout=TIMEOUT).values()
    assert _error(fut).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    fs = anonymous.create_topics([NewTopic("relayed", 1, 1)], request_timeout=TIMEOUT)
    assert _error(fs["relayed"]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # User:client (a super user, over the broker's SSL listener) grants it ALTER
    # and CREATE on the cluster; its requests are forwarded the same way
    admin = ck_admin(ssl_bootstrap, **certs.librdkafka(client_cert=True))
    for f in admin.create_acls([_cluster_acl(AclOperation.ALTER),
                                _cluster_acl(AclOperation.CREATE)],
                               request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)

    (fut,) = anonymous.create_acls([_cluster_acl(AclOperation.DESCRIBE)],
                                   request_timeout=TIMEOUT).values()
    fut.result(timeout=TIMEOUT)
    fs = anonymous.create_topics([NewTopic("relayed", 1, 1)], request_timeout=TIMEOUT)
    fs["relayed"].result(timeout=TIMEOUT)

    controller_log = cluster.controller.log_path.read_text(errors="replace")
    # the controller denied the client by name, from its own address, not the broker
    assert "denied CREATE_ACLS ALTER on CLUSTER to User:ANONYMOUS from 127.0.0.1" \
        in controller_log, controller_log[-3000:]
    assert "Traceback" not in controller_log
    (broker,) = cluster.brokers.values()
    assert "Traceback" not in broker.log_path.read_text(errors="replace")
