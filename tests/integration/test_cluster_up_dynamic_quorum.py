"""`odradek cluster up --dynamic-quorum`: a KIP-853 quorum as Kafka's quick start
makes it. Controller 100 is formatted --standalone, 101 and 102
--no-initial-controllers and added as voters by `up` once caught up; after
`cluster down`, a second `up` on the same dir elects a leader among the three
voters read back from the metadata log (nothing formatted or added again) and
serves every acknowledged record. (test_dynamic_voters.py removes the active
controller of such a quorum.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker_proc import REPO_ROOT, free_port, port_accepts
from tests.integration.clients import wait_until
from tests.integration.test_cluster_up_flags import _cli, _env

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(300)]

UP_TIMEOUT_S = 120


def _ports() -> tuple[int, int]:
    for _ in range(50):
        base, controller = free_port(), free_port()
        if base < 65535 and controller + 2 < 65536 and not any(
                port_accepts(p) for p in (base + 1, controller + 1, controller + 2)) \
                and {base, base + 1}.isdisjoint(range(controller, controller + 3)):
            return base, controller
    raise RuntimeError("no free ports")


def _up(data: Path, base: int, controller: int) -> tuple[subprocess.Popen[str], str]:
    up = subprocess.Popen(
        [sys.executable, "-m", "odradek", "cluster", "up", "--dynamic-quorum",
         "--controllers", "3", "--brokers", "1", "--data-dir", str(data),
         "--base-port", str(base), "--controller-port", str(controller),
         "--override", "offsets.topic.replication.factor=1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
        cwd=str(REPO_ROOT), start_new_session=True)
    assert up.stdout is not None
    output = ""
    deadline = time.monotonic() + UP_TIMEOUT_S
    while "Ctrl-C stops it" not in output and time.monotonic() < deadline:
        line = up.stdout.readline()
        if not line:
            break
        output += line
    return up, output


def _status(bootstrap: str) -> dict[str, Any]:
    done = _cli("metadata-quorum", "--bootstrap-server", bootstrap, "--format", "json",
                "describe", "--status")
    return json.loads(done.stdout) if done.returncode == 0 else {}


def _down(data: Path, up: subprocess.Popen[str]) -> None:
    done = _cli("cluster", "down", "--data-dir", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    assert up.wait(60) == 0


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    acked: list[bytes] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 60000})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, m: err is None and acked.append(m.value()))
    assert p.flush(90) == 0
    assert sorted(acked) == sorted(values)


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def test_cluster_up_dynamic_quorum_grows_to_three_voters_and_keeps_them_across_restart(tmp_path: Path) -> None:
    base, controller = _ports()
    data = tmp_path / "cluster"
    bootstrap = f"127.0.0.1:{base}"
    up, output = _up(data, base, controller)
    try:
        assert "Ctrl-C stops it" in output, output
        assert "controller-101: a voter of the metadata quorum" in output, output
        assert "controller-102: a voter of the metadata quorum" in output, output
        status = wait_until(lambda: (s := _status(bootstrap)) and len(
            s["current_voters"]) == 3 and s, timeout=30, desc="three voters")
        voters = {v["id"]: v for v in status["current_voters"]}
        assert sorted(voters) == [100, 101, 102]
        for n, v in voters.items():
            assert v["endpoints"] == [f"CONTROLLER://127.0.0.1:{controller + n - 100}"]
            meta = (data / f"controller-{n}" / "meta.properties").read_text()
            assert f"directory.id={v['directoryId']}" in meta
            props = (data / f"controller-{n}.properties").read_text()
            assert "controller.quorum.bootstrap.servers=" in props
            assert "controller.quorum.voters" not in props

        first = [b"a%d" % i for i in range(100)]
        _produce(bootstrap, "dq", first)
    finally:
        _down(data, up)

    # a second `up` on the same dir: no format, nobody added again, data kept
    up, output = _up(data, base, controller)
    try:
        assert "Ctrl-C stops it" in output, output
        status = wait_until(lambda: (s := _status(bootstrap)) and len(
            s["current_voters"]) == 3 and s, timeout=60, desc="three voters again")
        assert {v["id"]: v["directoryId"] for v in status["current_voters"]} == {
            n: v["directoryId"] for n, v in voters.items()}
        second = [b"b%d" % i for i in range(100)]
        _produce(bootstrap, "dq", second)
        assert sorted(_consume(bootstrap, "dq", 200)) == sorted(first + second)
    finally:
        _down(data, up)
