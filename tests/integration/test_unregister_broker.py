"""UnregisterBroker (KIP-631) through `odradek cluster unregister`, as
`kafka-cluster.sh unregister`: a dead broker's registration goes (leaderships
and ISR memberships moved as for a fenced broker, Metadata stops listing it);
an unknown id gets BROKER_ID_NOT_REGISTERED; a live broker registers again at
its next heartbeat. The request goes to a broker, which forwards it to the
controller (KIP-590)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.clients import wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_cluster_up_flags import _cli

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _registrations(log: Path) -> int:
    return log.read_text(errors="replace").count("registered with the controller")


def test_unregister_a_dead_broker_then_a_live_one(tmp_path: Path) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=3).start()
    try:
        cluster.wait_for_brokers({1, 2, 3})
        cluster.create_topic("moved", 3, 3)
        bootstrap = cluster.brokers[1].bootstrap
        cluster.brokers[3].kill9()
        # still registered (fenced) until an operator removes it
        for p in range(3):
            cluster.wait_for_partition("moved", p, lambda v: 3 not in v.isr, "3 out of the ISR")
        done = _cli("cluster", "unregister", "--id", "3", "-b", bootstrap)
        assert done.returncode == 0, done.stderr
        assert "Broker 3 is no longer registered" in done.stdout
        cluster.wait_for_brokers({1, 2})
        for view in cluster.partitions("moved").values():
            assert view.leader in (1, 2) and 3 not in view.isr
        again = _cli("cluster", "unregister", "--id", "3", "-b", bootstrap)
        assert again.returncode == 1
        assert "BROKER_ID_NOT_REGISTERED" in again.stderr
        bad = _cli("cluster", "unregister", "--id", "-1", "-b", bootstrap)
        assert bad.returncode == 2 and "broker id" in bad.stderr
        # a live broker is unregistered, then registers again by itself
        registrations = _registrations(cluster.brokers[2].log_path)
        live = _cli("cluster", "unregister", "--id", "2", "-b", bootstrap)
        assert live.returncode == 0, live.stderr
        wait_until(lambda: _registrations(cluster.brokers[2].log_path) > registrations, 30,
                   desc="broker 2 registered again")
        assert "broker 2 unregistered" in cluster.controller.log_path.read_text()
        cluster.wait_for_brokers({1, 2})
        for p in range(3):
            cluster.wait_for_partition("moved", p, lambda v: 2 in v.isr, "2 back in the ISR")
    finally:
        cluster.close()
