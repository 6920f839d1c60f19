"""`odradek storage format --standalone / --initial-controllers / --no-initial-controllers`
(KIP-853): the bootstrap snapshot, the metadata dir's directory id, Kafka's refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from odradek.metadata.bootstrap import read_bootstrap_records
from odradek.metadata.snapshots import control_records, decode
from odradek.raft.voters import KRAFT_VERSION, KRAFT_VOTERS, decode_kraft_version, decode_voters

CLUSTER = "OdradekTestCluster0001"
DIR1 = "J8aAPcfLQt2bqs1JT_rMgQ"
DIR2 = "b3w6nfvIR_Gq3a6sIoXJzw"


def config(tmp: Path, node_id: int, extra: str = "") -> Path:
    path = tmp / f"c{node_id}.properties"
    path.write_text(
        "process.roles=controller\n"
        f"node.id={node_id}\n"
        f"listeners=CONTROLLER://127.0.0.1:{19090 + node_id}\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
        f"log.dirs={tmp / f'data{node_id}'}\n" + extra)
    return path


def fmt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "storage", "format", "-t", CLUSTER,
                           *args], capture_output=True, text=True, timeout=60, check=False)


def bootstrap_voters(data: Path) -> tuple[int, set[int], dict[int, str], dict]:
    raw = (data / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").read_bytes()
    assert decode(raw) == []  # header, the two KIP-853 records, footer; no metadata
    controls = dict(control_records(raw))
    voters = decode_voters(controls[KRAFT_VOTERS])
    return (decode_kraft_version(controls[KRAFT_VERSION]), set(voters.ids),
            dict(voters.directory_ids), dict(voters.addresses))


def test_standalone_writes_one_voter_with_this_dirs_id(tmp_path):
    c = config(tmp_path, 1, "controller.quorum.bootstrap.servers=127.0.0.1:19091\n")
    done = fmt("-c", str(c), "--standalone")
    assert done.returncode == 0, done.stdout
    version, ids, dirs, addresses = bootstrap_voters(tmp_path / "data1")
    meta = (tmp_path / "data1" / "meta.properties").read_text()
    assert version == 1 and ids == {1}
    assert f"directory.id={dirs[1]}" in meta
    assert (addresses[1].host, addresses[1].port, addresses[1].listener) == (
        "127.0.0.1", 19091, "CONTROLLER")


def test_initial_controllers_use_the_listed_directory_ids(tmp_path):
    c = config(tmp_path, 2, "controller.quorum.bootstrap.servers=127.0.0.1:19091\n")
    done = fmt("-c", str(c), "--initial-controllers",
               f"1@127.0.0.1:19091:{DIR1},2@127.0.0.1:19092:{DIR2}")
    assert done.returncode == 0, done.stdout
    _, ids, dirs, _ = bootstrap_voters(tmp_path / "data2")
    assert ids == {1, 2} and dirs == {1: DIR1, 2: DIR2}
    assert f"directory.id={DIR2}" in (tmp_path / "data2" / "meta.properties").read_text()


def test_refusals(tmp_path):
    static = config(tmp_path, 3, "controller.quorum.voters=3@127.0.0.1:19093\n")
    assert "static quorum" in fmt("-c", str(static), "--standalone").stdout
    dynamic = config(tmp_path, 4, "controller.quorum.bootstrap.servers=127.0.0.1:19094\n")
    assert "give one of --standalone" in fmt("-c", str(dynamic)).stdout
    assert "does not name this node" in fmt(
        "-c", str(dynamic), "-I", f"1@127.0.0.1:19091:{DIR1}").stdout
    assert "not a Kafka Uuid" in fmt("-c", str(dynamic), "-I", "4@h:1:nope").stdout
    done = fmt("-c", str(dynamic), "--no-initial-controllers")
    assert done.returncode == 0
    assert not (tmp_path / "data4" / "__cluster_metadata-0").exists()
    assert fmt("-c", str(static)).returncode == 0  # a static quorum formats as before


def test_feature_levels_go_into_the_bootstrap_records(tmp_path):
    static = config(tmp_path, 5, "controller.quorum.voters=5@127.0.0.1:19095\n")
    done = fmt("-c", str(static), "--feature", "eligible.leader.replicas.version=0",
               "-f", "transaction.version=2")
    assert done.returncode == 0, done.stdout
    records = read_bootstrap_records(tmp_path / "data5")
    assert sorted((r["name"], r["feature_level"]) for r in records) == [
        ("eligible.leader.replicas.version", 0), ("transaction.version", 2)]
    assert "unknown feature" in fmt("-c", str(static), "--ignore-formatted",
                                    "-f", "no.such=1").stdout
    assert "supports levels 0-2" in fmt("-c", str(static), "--ignore-formatted",
                                        "-f", "transaction.version=3").stdout
