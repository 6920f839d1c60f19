"""The broker fixture layer itself: start, readiness, stop, crash, restart."""

from __future__ import annotations

import socket

import pytest

from tests.integration.broker_proc import (
    BrokerNotReady,
    BrokerProcess,
    free_port,
    port_accepts,
    tail,
)

pytestmark = pytest.mark.integration


def test_broker_fixture_accepts_tcp_on_its_bootstrap_address(broker: BrokerProcess) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) == broker.port
    with socket.create_connection((host, int(port)), timeout=2):
        pass
    assert broker.is_running()
    assert broker.log_path.exists()


def test_topic_name_is_a_legal_unique_kafka_topic(topic_name: str) -> None:
    assert 0 < len(topic_name) <= 249
    assert all(c.isalnum() or c in "._-" for c in topic_name)


def test_factory_broker_stops_on_sigterm_and_frees_its_port(broker_factory) -> None:
    proc = broker_factory()
    assert port_accepts(proc.port)
    code = proc.stop()
    assert code is not None
    assert not proc.is_running()
    assert not port_accepts(proc.port)


def test_kill9_then_restart_comes_back_on_the_same_port(broker_factory) -> None:
    proc = broker_factory()
    port, data_dir = proc.port, proc.data_dir
    assert proc.kill9() == -9
    assert not port_accepts(port)
    proc.restart()
    assert proc.port == port and proc.data_dir == data_dir
    assert port_accepts(port)
    assert proc.starts == 2
    assert tail(proc.log_path).count("===== start #") >= 2


def test_broker_that_exits_at_once_reports_its_log_tail(tmp_path, broker_kind) -> None:
    # The odradek command line is the contract; a bogus option must make it exit,
    # and tansu rejects an unknown flag the same way.
    proc = BrokerProcess(
        broker_kind,
        data_dir=tmp_path / "d",
        log_path=tmp_path / "b.log",
        extra_args=["--no-such-option-xyzzy"],
        ready_timeout_s=20,
    )
    if broker_kind == "odradek":
        from tests.integration.conftest import _require_startable

        _require_startable("odradek")
    with pytest.raises(BrokerNotReady) as info:
        proc.start()
    assert "exited with code" in str(info.value)
    assert "log " in str(info.value)
    assert not proc.is_running()


def test_free_port_is_bindable_on_loopback() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
