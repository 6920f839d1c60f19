"""KIP-853 dynamic controller voters with real processes.

Controller 100 is formatted `--standalone`, 101 and 102
`--no-initial-controllers` (they start as observers of the quorum); a broker
finds them through `controller.quorum.bootstrap.servers`. While a producer
writes to the broker, `odradek metadata-quorum add-controller` grows the quorum
1 -> 3 (each new voter once it has caught up), `describe --status` lists the
three with their directory ids and endpoints, and `remove-controller` removes
the active controller: a new leader is elected from the other two and the
cluster keeps serving (the producer's messages after the removal are acked).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import wait_until
from tests.integration.cluster_proc import CLUSTER_ID, FAST_TIMEOUTS

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

CONTROLLERS = (100, 101, 102)


def odradek(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True,
                          text=True, timeout=60, check=False)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def status(bootstrap: str) -> dict:
    out = odradek("metadata-quorum", "--bootstrap-server", bootstrap, "--format", "json",
                  "describe", "--status", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def write_properties(path: Path, props: dict[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def test_grow_one_to_three_voters_then_remove_the_active_controller(broker_kind, tmp_path):
    if broker_kind != "odradek":
        pytest.skip("odradek processes")
    from confluent_kafka import Producer

    ports = {n: free_port() for n in CONTROLLERS}
    bootstrap_servers = ",".join(f"{HOST}:{p}" for p in ports.values())
    common = {"controller.listener.names": "CONTROLLER",
              "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
              "controller.quorum.bootstrap.servers": bootstrap_servers,
              "cluster.id": CLUSTER_ID, **FAST_TIMEOUTS}
    configs, procs = {}, {}
    for n, port in ports.items():
        data = tmp_path / f"controller-{n}"
        configs[n] = write_properties(tmp_path / f"controller-{n}.properties", {
            **common, "process.roles": "controller", "node.id": n,
            "listeners": f"CONTROLLER://{HOST}:{port}", "log.dirs": data})
        odradek("storage", "format", "-t", CLUSTER_ID, "-c", str(configs[n]),
                "--standalone" if n == 100 else "--no-initial-controllers")
        procs[n] = BrokerProcess(config_file=configs[n], port=port, data_dir=data,
                                 overrides={"listeners": f"CONTROLLER://{HOST}:{port}"})
    broker = BrokerProcess(overrides={**common, "process.roles": "broker", "node.id": 1},
                           data_dir=tmp_path / "broker-1")
    stop = threading.Event()
    acked: list[float] = []
    errors: list[str] = []
    try:
        for p in procs.values():
            p.start()
        broker.start()
        bs = broker.bootstrap
        first = wait_until(lambda: status(bs).get("leader_id") == 100 and status(bs),
                           timeout=30, desc="controller 100 leads alone")
        assert [v["id"] for v in first["current_voters"]] == [100]

        producer = Producer({"bootstrap.servers": bs, "linger.ms": 5})

        def on_delivery(err, _msg):
            if err is None:
                acked.append(time.monotonic())
            else:
                errors.append(str(err))

        def produce_loop():
            i = 0
            while not stop.is_set():
                producer.produce("grow", str(i).encode(), on_delivery=on_delivery)
                producer.poll(0.02)
                i += 1
            producer.flush(30)

        writer = threading.Thread(target=produce_loop, daemon=True)
        writer.start()

        for n in (101, 102):
            # REQUEST_TIMED_OUT until the observer has caught up: Kafka's rule
            wait_until(lambda n=n: odradek("metadata-quorum", "--bootstrap-server", bs,
                                           "add-controller", "--controller-config",
                                           str(configs[n]), check=False).returncode == 0,
                       timeout=30, interval=0.5, desc=f"controller {n} added")
        grown = wait_until(
            lambda: (s := status(bs)) and len(s.get("current_voters", [])) == 3 and s,
            timeout=20, desc="three voters")
        voters = {v["id"]: v for v in grown["current_voters"]}
        assert sorted(voters) == list(CONTROLLERS)
        for n, v in voters.items():
            assert v["directoryId"] != "AAAAAAAAAAAAAAAAAAAAAA"
            assert v["endpoints"] == [f"CONTROLLER://{HOST}:{ports[n]}"]
        meta = (tmp_path / "controller-101" / "meta.properties").read_text()
        assert f"directory.id={voters[101]['directoryId']}" in meta

        old = grown["leader_id"]
        odradek("metadata-quorum", "--bootstrap-server", bs, "remove-controller",
                "--controller-id", str(old), "--controller-directory-id",
                voters[old]["directoryId"])
        after = wait_until(
            lambda: (s := status(bs)) and s.get("leader_id") not in (None, old)
            and len(s["current_voters"]) == 2 and s,
            timeout=30, desc="a new leader among the two voters left")
        assert sorted(v["id"] for v in after["current_voters"]) == sorted(set(CONTROLLERS) - {old})
        removed_at = time.monotonic()
        wait_until(lambda: sum(t > removed_at for t in acked) >= 20, timeout=30,
                   desc="messages acked after the removal")
    finally:
        stop.set()
        broker.close()
        for p in procs.values():
            p.close()
    assert not errors, errors[:3]
