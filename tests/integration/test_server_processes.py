"""`odradek server --processes N`: one command, N brokers of one cluster on this host.

The supervisor runs 2 processes in combined mode (process 0, node 1, is also the KRaft
controller; node 2 is a broker). A client that knows one port sees both brokers; an RF=2
topic takes acks=all records; node 2 is killed with SIGKILL and the supervisor restarts
it; it comes back into the ISR of every partition and every acknowledged record is read
back; SIGTERM to the supervisor stops both processes. Bad --processes values and a port
clash are usage errors (exit code 2) reported before anything starts. A supervisor
killed with SIGKILL takes its brokers with it. `odradek cluster up
--processes-per-host 2` runs two such "hosts" with their own racks, and rack-aware
placement puts the two replicas of every partition on different hosts.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_proc import HOST, REPO_ROOT, port_accepts
from tests.integration.clients import wait_until
from tests.integration.cluster_proc import FAST_TIMEOUTS
from tests.integration.host_proc import HostProcesses, free_ports

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

TOPIC = "spread"
PARTITIONS = 2
RECORDS_BEFORE = 500
RECORDS_DURING = 300


def _isr(admin: AdminClient) -> dict[int, set[int]]:
    md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    return {p.id: set(p.isrs) for p in md.partitions.values()}


def _produce(bootstrap: str, first: int, count: int) -> set[int]:
    acked: set[int] = set()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 30000})

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(int(msg.value()))

    for i in range(first, first + count):
        producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS,
                         on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(40) == 0
    return acked


def _consume_all(bootstrap: str) -> set[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    ends = {}
    for p in range(PARTITIONS):
        _lo, hi = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        ends[p] = hi
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: set[int] = set()
    positions = dict.fromkeys(range(PARTITIONS), 0)
    deadline = time.monotonic() + 30
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=1):
            if m.error() is None:
                seen.add(int(m.value()))
                positions[m.partition()] = m.offset() + 1
    consumer.close()
    return seen


def test_two_processes_serve_one_cluster_and_a_killed_one_is_restarted_into_the_isr(
        tmp_path: Path) -> None:
    host = HostProcesses(tmp_path / "data", 2, {"broker.rack": "host-a", **FAST_TIMEOUTS})
    with host:
        bootstrap = host.bootstrap(0)  # one port: the client learns the other from Metadata
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: set(admin.list_topics(timeout=5).brokers) == {1, 2}, 30,
                   desc="brokers 1 and 2 in Metadata")
        brokers = admin.list_topics(timeout=5).brokers
        assert {b.port for b in brokers.values()} == set(host.ports)
        other = AdminClient({"bootstrap.servers": host.bootstrap(1)})
        assert set(other.list_topics(timeout=10).brokers) == {1, 2}  # any port bootstraps
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)]).values():
            f.result(timeout=30)
        wait_until(lambda: _isr(admin) == {p: {1, 2} for p in range(PARTITIONS)}, 30,
                   desc="both replicas in sync")

        acked = _produce(bootstrap, 0, RECORDS_BEFORE)
        assert len(acked) == RECORDS_BEFORE

        victim = host.children()[2]
        victim.kill()  # SIGKILL
        victim.wait(10)
        # node 1 (the controller, which the client bootstrapped from) keeps serving
        acked |= _produce(bootstrap, RECORDS_BEFORE, RECORDS_DURING)
        assert len(acked) == RECORDS_BEFORE + RECORDS_DURING

        restarted = wait_until(lambda: (c := host.children().get(2)) and c.pid != victim.pid
                               and c, 30, desc="the supervisor to restart node 2")
        wait_until(lambda: _isr(admin) == {p: {1, 2} for p in range(PARTITIONS)}, 40,
                   desc="node 2 back in the ISR of every partition")
        assert "node 2 (pid" in host.log_tail(64_000)
        assert "restarting it" in host.log_tail(64_000)

        assert acked <= _consume_all(bootstrap)

        pids = [c.pid for c in host.children().values()]
        assert restarted.pid in pids
        assert host.stop() == 0
        for pid in pids:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        tail = host.log_tail(64_000)
        assert "node 2 stopped (code 0)" in tail and "node 1 stopped (code 0)" in tail


def _server(*args: str) -> subprocess.CompletedProcess[str]:
    import os
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "odradek", "server", *args], check=False,
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize(("value", "says"), [("0", "out of range"),
                                             ("two", "'two' is not an integer")])
def test_a_bad_number_of_processes_is_a_usage_error(value: str, says: str) -> None:
    r = _server("--processes", value)
    assert r.returncode == 2
    assert f"argument --processes: {value}" in r.stderr or says in r.stderr
    assert says in r.stderr


def test_a_port_in_use_is_a_usage_error_and_nothing_starts(tmp_path: Path) -> None:
    first = free_ports(3)
    with socket.socket() as taken:
        taken.bind((HOST, first + 1))  # process 1's port
        taken.listen()
        r = _server("--processes", "2", "--override",
                    f"listeners=PLAINTEXT://{HOST}:{first}",
                    "--override", f"log.dirs={tmp_path / 'data'}")
    assert r.returncode == 2
    assert f"port {first + 1}" in r.stderr and "in use" in r.stderr
    assert not (tmp_path / "data" / "node-1").exists()


def test_two_processes_on_one_port_is_a_usage_error(tmp_path: Path) -> None:
    first = free_ports(3)
    r = _server("--processes", "2", "--override",
                f"listeners=PLAINTEXT://{HOST}:{first},CONTROLLER://{HOST}:{first + 1}",
                "--override", "controller.listener.names=CONTROLLER",
                "--override", f"controller.quorum.voters=1@{HOST}:{first + 1}",
                "--override", f"log.dirs={tmp_path / 'data'}")
    assert r.returncode == 2
    assert f"port {first + 1} is used twice" in r.stderr


def test_a_killed_supervisor_leaves_no_broker_behind(tmp_path: Path) -> None:
    host = HostProcesses(tmp_path / "data", 2, {"broker.rack": "host-a", **FAST_TIMEOUTS})
    with host:
        children = wait_until(lambda: len(c := host.children()) == 2 and c, 30,
                              desc="two broker processes")
        assert host.proc is not None
        host.proc.kill()  # SIGKILL: no chance to stop its children
        host.proc.wait(10)
        _gone, alive = psutil.wait_procs(list(children.values()), timeout=40)
        assert not alive, f"still running after the supervisor died: {alive}"


def test_cluster_up_runs_hosts_of_processes_and_places_replicas_on_two_hosts(
        tmp_path: Path) -> None:
    """`odradek cluster up --brokers 4 --processes-per-host 2`: two supervisors (racks
    host-1: nodes 1, 2; host-2: nodes 3, 4); an RF=2 topic has a replica on each host."""
    import os
    base = free_ports(101)  # the brokers' 4 ports, the controller's at base + 100
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1"}
    up = subprocess.Popen(
        [sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "4",
         "--processes-per-host", "2", "--base-port", str(base),
         "--data-dir", str(tmp_path / "cluster")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        cwd=str(REPO_ROOT), start_new_session=True)
    try:
        assert up.stdout is not None
        output = ""
        deadline = time.monotonic() + 90
        while "Ctrl-C stops it" not in output and time.monotonic() < deadline:
            line = up.stdout.readline()
            if not line:
                break
            output += line
        assert "host-2: nodes 3-4 (broker, rack host-2)" in output, output
        admin = AdminClient({"bootstrap.servers": f"{HOST}:{base}"})
        wait_until(lambda: set(admin.list_topics(timeout=5).brokers) == {1, 2, 3, 4}, 30,
                   desc="4 brokers in Metadata")
        for f in admin.create_topics([NewTopic("racks", 8, 2)]).values():
            f.result(timeout=30)
        md = wait_until(lambda: (t := admin.list_topics("racks", timeout=5).topics["racks"])
                        .error is None and len(t.partitions) == 8 and t, 30,
                        desc="topic racks")
        host_of = {1: 1, 2: 1, 3: 2, 4: 2}
        for p in md.partitions.values():
            assert {host_of[r] for r in p.replicas} == {1, 2}, (p.id, p.replicas)
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            code = up.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            raise
    assert code == 0
    for port in (base, base + 1, base + 2, base + 3, base + 100):
        assert not port_accepts(port)
