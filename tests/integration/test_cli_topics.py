"""`odradek topics` against a real broker, run as a user would run it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _run(broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", broker.bootstrap,
         "--timeout", "10", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_create_describe_alter_list_delete(broker, topic_name):
    r = _run(broker, "create", topic_name, "--partitions", "3", "--config", "retention.ms=5000")
    assert r.returncode == 0, r.stderr
    assert topic_name in _run(broker, "list").stdout.split()
    out = _run(broker, "describe", topic_name).stdout
    assert f"Topic: {topic_name}\tPartitionCount: 3\tReplicationFactor: 1" in out
    assert "retention.ms=5000" in out
    assert out.count("\tLeader: 1\tReplicas: 1\tIsr: 1") == 3
    r = _run(broker, "alter-config", topic_name, "--set", "segment.ms=60000",
             "--delete", "retention.ms")
    assert r.returncode == 0, r.stderr
    out = _run(broker, "describe", topic_name).stdout
    assert "segment.ms=60000" in out and "retention.ms" not in out
    assert _run(broker, "delete", topic_name).returncode == 0
    assert topic_name not in _run(broker, "list").stdout.split()


def test_errors_are_clear(broker, topic_name):
    r = _run(broker, "create", topic_name, "--config", "no.such.config=1")
    assert r.returncode == 1 and "no.such.config" in r.stderr
    r = _run(broker, "describe", "no-such-topic-" + topic_name)
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = _run(broker, "create", topic_name, "--config", "novalue")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr


def _odradek(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})},
                          check=False)


def test_flags_anywhere_and_brokers_from_the_environment(broker, topic_name):
    # Kafka's tools and rpk take flags after the action; so does odradek
    r = _odradek("topics", "create", topic_name, "--partitions", "2",
                 "--bootstrap-server", broker.bootstrap, "--timeout", "10")
    assert r.returncode == 0, r.stderr
    r = _odradek("topics", "describe", topic_name, "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert f"Topic: {topic_name}\tPartitionCount: 2" in r.stdout
    # no flag at all: $ODRADEK_BROKERS, as rpk reads $RPK_BROKERS
    r = _odradek("topics", "list", env={"ODRADEK_BROKERS": broker.bootstrap})
    assert r.returncode == 0, r.stderr
    assert topic_name in r.stdout.split()
    r = _odradek("groups", "list", "--bootstrap-server", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("GROUP")
