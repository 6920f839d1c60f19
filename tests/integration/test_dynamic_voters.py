"""KIP-853 dynamic controller voters with real processes.

Controller 100 is formatted `--standalone`, 101 and 102
`--no-initial-controllers` (they start as observers of the quorum); a broker
finds them through `controller.quorum.bootstrap.servers`. While a producer
writes to the broker, `odradek metadata-quorum add-controller` grows the quorum
1 -> 3 (each new voter once it has caught up), `describe --status` lists the
three with their directory ids and endpoints, and `remove-controller` removes
the active controller: a new leader is elected from the other two and the
cluster keeps serving (the producer's messages after the removal are acked).
A wiped voter is replaced; a voter restarted on another port sends
UpdateRaftVoter itself and the voter set shows its new endpoint; the CLI
reaches the quorum with --bootstrap-controller.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odradek.cli.storage import random_uuid
from odradek.protocol import api
from odradek.raft.voters import uuid_text
from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.clients import Wire, wait_until
from tests.integration.cluster_proc import CLUSTER_ID, FAST_TIMEOUTS
from tests.integration.test_groups_helpers import kio_call

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


def quorum(bootstrap: str):
    """DescribeQuorum v2 through the broker (forwarded to the leader); None on an error."""
    body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    try:
        with Wire(bootstrap) as w:
            resp = kio_call(w, api.ApiKey.DESCRIBE_QUORUM, 2, body)
    except Exception:  # noqa: BLE001 - a broker between controllers: ask again
        return None
    p = resp.topics[0].partitions[0]
    return p if resp.error_code.value == 0 and p.error_code.value == 0 else None


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
        first = wait_until(lambda: (q := quorum(bs)) and q.leader_id == 100 and q,
                           timeout=30, desc="controller 100 leads alone")
        assert [v.replica_id for v in first.current_voters] == [100]

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
            # the new controller fetches as an observer first ...
            wait_until(lambda n=n: (q := quorum(bs)) and any(
                o.replica_id == n and o.log_end_offset >= q.high_watermark for o in q.observers),
                timeout=30, desc=f"controller {n} caught up as an observer")
            # ... and is added once caught up (REQUEST_TIMED_OUT before: Kafka's rule)
            wait_until(lambda n=n: odradek("metadata-quorum", "--bootstrap-server", bs,
                                           "add-controller", "--controller-config",
                                           str(configs[n]), check=False).returncode == 0,
                       timeout=30, interval=0.2, desc=f"controller {n} added")
        wait_until(lambda: (q := quorum(bs)) and len(q.current_voters) == 3, timeout=20,
                   desc="three voters")
        grown = status(bs)
        voters = {v["id"]: v for v in grown["current_voters"]}
        assert sorted(voters) == list(CONTROLLERS)
        for n, v in voters.items():
            assert v["directoryId"] != "AAAAAAAAAAAAAAAAAAAAAA"
            assert v["endpoints"] == [f"CONTROLLER://{HOST}:{ports[n]}"]
        meta = (tmp_path / "controller-101" / "meta.properties").read_text()
        assert f"directory.id={voters[101]['directoryId']}" in meta

        old = grown["leader_id"]
        odradek("metadata-quorum", "--bootstrap-server", bs, "remove-controller",
                # `=`: a Kafka Uuid in base64 may begin with "-" (argparse would
                # take it for an option; the CI run of 2026-11-26 drew one)
                "--controller-id", str(old),
                f"--controller-directory-id={voters[old]['directoryId']}")
        after = wait_until(
            lambda: (q := quorum(bs)) and q.leader_id not in (-1, old)
            and len(q.current_voters) == 2 and q,
            timeout=30, desc="a new leader among the two voters left")
        assert sorted(v.replica_id for v in after.current_voters) == sorted(
            set(CONTROLLERS) - {old})
        removed_at = time.monotonic()
        wait_until(lambda: sum(t > removed_at for t in acked) >= 20, timeout=30,
                   desc="messages acked after the removal")
    finally:
        stop.set()
        broker.close()
        for p in procs.values():
            p.close()
    assert not errors, errors[:3]


def test_replace_a_wiped_voter(broker_kind, tmp_path):
    """Three voters from --initial-controllers; one loses its disk, is formatted
    again (a new directory id) and replaced: removed under its old id, added
    under its new one."""
    if broker_kind != "odradek":
        pytest.skip("odradek processes")
    from confluent_kafka import Producer

    ports = {n: free_port() for n in CONTROLLERS}
    dirs = {n: random_uuid() for n in CONTROLLERS}
    initial = ",".join(f"{n}@{HOST}:{ports[n]}:{dirs[n]}" for n in CONTROLLERS)
    common = {"controller.listener.names": "CONTROLLER",
              "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
              "controller.quorum.bootstrap.servers": ",".join(
                  f"{HOST}:{p}" for p in ports.values()),
              "cluster.id": CLUSTER_ID, **FAST_TIMEOUTS}
    configs, procs = {}, {}
    for n, port in ports.items():
        data = tmp_path / f"controller-{n}"
        configs[n] = write_properties(tmp_path / f"controller-{n}.properties", {
            **common, "process.roles": "controller", "node.id": n,
            "listeners": f"CONTROLLER://{HOST}:{port}", "log.dirs": data})
        odradek("storage", "format", "-t", CLUSTER_ID, "-c", str(configs[n]),
                "--initial-controllers", initial)
        procs[n] = BrokerProcess(config_file=configs[n], port=port, data_dir=data,
                                 overrides={"listeners": f"CONTROLLER://{HOST}:{port}"})
    broker = BrokerProcess(overrides={**common, "process.roles": "broker", "node.id": 1},
                           data_dir=tmp_path / "broker-1")
    try:
        for p in procs.values():
            p.start()
        broker.start()
        bs = broker.bootstrap
        q = wait_until(lambda: (q := quorum(bs)) and len(q.current_voters) == 3 and q,
                       timeout=30, desc="three voters from --initial-controllers")
        wiped = next(n for n in CONTROLLERS if n != q.leader_id)
        assert {v.replica_id: uuid_text(v.replica_directory_id.bytes)
                for v in q.current_voters} == dirs

        procs[wiped].close()
        shutil.rmtree(tmp_path / f"controller-{wiped}")
        odradek("storage", "format", "-t", CLUSTER_ID, "-c", str(configs[wiped]),
                "--no-initial-controllers")
        meta = (tmp_path / f"controller-{wiped}" / "meta.properties").read_text()
        new_dir = next(line.split("=", 1)[1] for line in meta.splitlines()
                       if line.startswith("directory.id="))
        assert new_dir != dirs[wiped]
        procs[wiped].start()

        # the old voter key must go first: the new disk has none of the log
        odradek("metadata-quorum", "--bootstrap-server", bs, "remove-controller",
                "--controller-id", str(wiped), f"--controller-directory-id={dirs[wiped]}")
        wait_until(lambda: (q := quorum(bs)) and len(q.current_voters) == 2, timeout=30,
                   desc="the wiped voter removed")
        wait_until(lambda: odradek("metadata-quorum", "--bootstrap-server", bs,
                                   "add-controller", "--controller-config",
                                   str(configs[wiped]), check=False).returncode == 0,
                   timeout=30, interval=0.2, desc="the wiped controller added again")
        shown = status(bs)
        voters = {v["id"]: v["directoryId"] for v in shown["current_voters"]}
        assert voters == {**dirs, wiped: new_dir}

        producer = Producer({"bootstrap.servers": bs})
        acked: list[object] = []
        for i in range(20):
            producer.produce("after-replace", str(i).encode(),
                             on_delivery=lambda err, _m: acked.append(err))
        producer.flush(30)
        assert acked == [None] * 20

        # KIP-853 UpdateRaftVoter: a follower voter restarted on another port
        # tells the leader its new endpoint itself (after 3 fetch timeouts)
        q = wait_until(lambda: quorum(bs), timeout=30, desc="a leader")
        moved = next(n for n in CONTROLLERS if n not in (q.leader_id, wiped))
        procs[moved].close()
        new_port = free_port()
        procs[moved] = BrokerProcess(
            config_file=configs[moved], port=new_port, data_dir=tmp_path / f"controller-{moved}",
            overrides={"listeners": f"CONTROLLER://{HOST}:{new_port}"})
        procs[moved].start()
        wait_until(lambda: any(v["id"] == moved and v["endpoints"] == [
            f"CONTROLLER://{HOST}:{new_port}"] for v in status(bs).get("current_voters", [])),
            timeout=45, interval=0.5, desc="the moved voter's new endpoint in the voter set")

        # --bootstrap-controller (KIP-919): a controller that may not lead names
        # the active one (DescribeCluster, endpoint type CONTROLLER)
        follower = next(n for n in CONTROLLERS if n != q.leader_id and n != moved)
        out = odradek("metadata-quorum", "--bootstrap-controller",
                      f"{HOST}:{procs[follower].port}", "--format", "json",
                      "describe", "--status")
        shown = json.loads(out.stdout)
        assert shown["cluster_id"] == CLUSTER_ID and len(shown["current_voters"]) == 3
        out = odradek("features", "--bootstrap-controller", f"{HOST}:{procs[follower].port}",
                      "describe")
        assert "eligible.leader.replicas.version" in out.stdout
        with Wire(f"{HOST}:{procs[follower].port}") as w:
            mismatched = kio_call(w, api.ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert mismatched.error_code.value == 114  # MISMATCHED_ENDPOINT_TYPE
        with Wire(bs) as w:
            mismatched = kio_call(w, api.ApiKey.DESCRIBE_CLUSTER, 1, {
                "include_cluster_authorized_operations": False, "endpoint_type": 2})
        assert mismatched.error_code.value == 114
    finally:
        broker.close()
        for p in procs.values():
            p.close()
