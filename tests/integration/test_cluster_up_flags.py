"""`odradek cluster up` with the user's ports, node ids, racks and settings, then
`cluster status` and `cluster down` on its data dir.

Two brokers (ids 5 and 6, racks east/west, ports base and base+1) and a controller
on a port of its own choosing (not base+100); `--override num.partitions=3` reaches
every node (a topic created without a partition count gets 3) and
`--node-override 6:log.retention.ms=1234` only broker 6 (DescribeConfigs). confluent-
kafka sees the ids and racks; a record goes round trip. `status -o json` says every
node is up (exit 0); `down` stops it (exit 0, the `up` process exits 0, no node
process is left) and `status` then says down (exit 1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.broker_proc import REPO_ROOT, free_port, port_accepts

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(240)]

UP_TIMEOUT_S = 90


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH")
                                        else "")
    return e


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], check=False,
                          capture_output=True,
                          text=True, env=_env(), cwd=str(REPO_ROOT), timeout=120)


def _ports() -> tuple[int, int]:
    for _ in range(50):
        base, controller = free_port(), free_port()
        if base < 65535 and not port_accepts(base + 1) and controller not in (base, base + 1):
            return base, controller
    raise RuntimeError("no free ports")


def test_cluster_up_with_ports_ids_racks_and_overrides_then_status_and_down(tmp_path: Path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    base, controller_port = _ports()
    data = tmp_path / "cluster"
    up = subprocess.Popen(
        [sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "2",
         "--data-dir", str(data), "--base-port", str(base),
         "--controller-port", str(controller_port), "--first-broker-id", "5",
         "--racks", "east,west", "--override", "num.partitions=3",
         "--node-override", "6:log.retention.ms=1234"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
        cwd=str(REPO_ROOT), start_new_session=True)
    try:
        assert up.stdout is not None
        output = ""
        deadline = time.monotonic() + UP_TIMEOUT_S
        while "Ctrl-C stops it" not in output and time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            output += line
        assert "Ctrl-C stops it" in output, output
        assert f"controller: node 100 (controller) on 127.0.0.1:{controller_port}" in output
        assert f"broker-6: node 6 (broker) on 127.0.0.1:{base + 1}, rack west" in output

        bootstrap = f"127.0.0.1:{base}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = admin.describe_cluster(request_timeout=30).result(60)
        assert {(n.id, n.rack) for n in cluster.nodes} == {(5, "east"), (6, "west")}
        admin.create_topics([NewTopic("flags")])["flags"].result(60)
        md = admin.list_topics("flags", timeout=30)
        assert len(md.topics["flags"].partitions) == 3
        configs = {}
        for node in ("5", "6"):
            res = ConfigResource(ConfigResource.Type.BROKER, node)
            configs[node] = admin.describe_configs([res])[res].result(60)
        assert configs["6"]["log.retention.ms"].value == "1234"
        assert configs["5"]["log.retention.ms"].value != "1234"

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        p.produce("flags", b"through the flags", partition=1)
        assert p.flush(60) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("flags", 1, 0)])
        msg = None
        deadline = time.monotonic() + 60
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(1)
            if msg is not None and msg.error():
                msg = None
        c.close()
        assert msg is not None and msg.value() == b"through the flags"

        status = _cli("cluster", "status", "--data-dir", str(data), "-o", "json")
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["all_up"] is True
        assert [(n["name"], n["state"], n["rack"]) for n in doc["nodes"]] == [
            ("controller", "up", None), ("broker-5", "up", "east"), ("broker-6", "up", "west")]
        pids = [n["pid"] for n in doc["nodes"]]

        down = _cli("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        assert "stopped" in down.stdout
        assert up.wait(30) == 0
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or "odradek" not in Path(
                f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        after = _cli("cluster", "status", "--data-dir", str(data))
        assert after.returncode == 1
        assert after.stdout.count(" down ") == 3, after.stdout
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()


@pytest.mark.parametrize("args, says", [
    (["up", "--base-port", "20000", "--controller-port", "20001"], "overlap"),
    (["up", "--first-broker-id", "100", "--brokers", "1"], "node ids clash"),
    (["up", "--node-override", "log.retention.ms=1"], "NODE_ID:KEY=VALUE"),
    (["up", "--node-override", "9:log.retention.ms=1"], "no node 9"),
    (["up", "--override", "num.partitions"], "KEY=VALUE"),
    (["up", "--racks", "a,,b"], "comma-separated"),
    (["up", "--base-port", "0"], "not in 1..65535"),
    (["status"], "--data-dir"),
])
def test_bad_cluster_flags_are_refused_with_a_reason(args: list[str], says: str):
    r = _cli("cluster", *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert says in r.stderr, r.stderr


def test_status_and_down_of_a_dir_without_a_cluster_say_so(tmp_path: Path):
    for action in ("status", "down"):
        r = _cli("cluster", action, "--data-dir", str(tmp_path))
        assert r.returncode == 2
        assert "cluster.json does not exist" in r.stderr


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = _cli("cluster", "up", "--brokers", "1", "--base-port", str(port),
                 "--data-dir", str(tmp_path / "c"))
    assert r.returncode == 1
    assert f"port(s) {port}" in r.stderr and "already in use" in r.stderr
    assert not (tmp_path / "c").exists()
