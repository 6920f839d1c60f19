"""A cluster whose brokers replicate and reach the controller over mutual TLS.

One controller (CONTROLLER listener: SSL, `ssl.client.auth=required`) and three
brokers, each with a PLAINTEXT listener for the test's clients and a BROKER listener
(SSL, client certificates required) that `inter.broker.listener.name` names. Every
node uses the same certificate (CN=broker, SANs 127.0.0.1 and localhost) and checks
host names (`ssl.endpoint.identification.algorithm=https`, the default). A topic with
RF=3 takes acks=all writes, which need the followers' fetches over TLS, and the
brokers' registrations and heartbeats to the controller go over TLS too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.broker_proc import HOST, free_port
from tests.integration.clients import Out, consume, produce
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.tls_certs import TlsFiles

pytestmark = pytest.mark.integration


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    certs = TlsFiles(tmp_path / "certs")
    ssl_keys = certs.server_pem_config(client_auth="required")
    overrides = {
        "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT,BROKER:SSL",
        "inter.broker.listener.name": "BROKER",
        **ssl_keys,
    }
    cluster = ClusterProcesses(tmp_path, brokers=3, overrides=overrides)
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"PLAINTEXT://{HOST}:{b.port},BROKER://{HOST}:{free_port()}"
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


def test_acks_all_rf3_over_tls_between_brokers_and_to_the_controller(
        tls_cluster: ClusterProcesses, topic_name: str) -> None:
    tls_cluster.create_topic(topic_name, 1, 3)
    records = [Out(value=f"v{i}".encode() * 500, key=str(i).encode()) for i in range(500)]
    offsets = produce("confluent", tls_cluster.bootstrap, topic_name, records, acks="all")
    assert [o for _, o in offsets] == list(range(500))
    view = tls_cluster.partitions(topic_name)[0]
    assert len(view.isr) == 3
    got = consume("confluent", tls_cluster.bootstrap, topic_name, 500)
    assert [r.value for r in got] == [r.value for r in records]
    controller_log = tls_cluster.controller.log_path.read_text(errors="replace")
    # trustme gives the certificate an OU of its own
    assert re.search(r"on listener CONTROLLER: TLSv1\.3 \S+, principal User:CN=broker,OU=[^,]+,"
                     r"O=odradek", controller_log), controller_log[-3000:]
    # the followers fetch from the leader's BROKER listener with their certificate
    leader_log = tls_cluster.brokers[view.leader].log_path.read_text(errors="replace")
    assert len(re.findall(r"on listener BROKER: TLSv1\.3 \S+, principal User:CN=broker",
                          leader_log)) >= 2, leader_log[-3000:]
    for b in tls_cluster.brokers.values():
        assert "Traceback" not in b.log_path.read_text(errors="replace")
