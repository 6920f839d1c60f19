"""DescribeQuorum (API 55) on a 3-voter quorum with two broker-only observers: a
broker forwards it to the active controller, which answers as the Raft leader;
`odradek metadata-quorum describe --status|--replication` prints it. The same
cluster checks AlterReplicaLogDirs' REPLICA_NOT_AVAILABLE (a broker asked to move
a replica it does not host)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import NewTopic

from odradek.protocol import api
from tests.integration.clients import Wire, wait_until
from tests.integration.cluster_proc import CONTROLLER_ID, ClusterProcesses
from tests.integration.test_groups_helpers import kio_call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

VOTERS = [CONTROLLER_ID, CONTROLLER_ID + 1, CONTROLLER_ID + 2]


def describe_quorum(bootstrap: str, version: int = 2, topic: str = "__cluster_metadata"):
    body = {"topics": [{"topic_name": topic, "partitions": [{"partition_index": 0}]}]}
    with Wire(bootstrap) as w:
        return kio_call(w, api.ApiKey.DESCRIBE_QUORUM, version, body)


def cli(bootstrap: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "metadata-quorum", "--bootstrap-server", bootstrap,
         *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_describe_quorum_three_voters_and_an_observer(broker_kind, tmp_path):
    if broker_kind != "odradek":
        pytest.skip("a cluster of odradek processes")
    cluster = ClusterProcesses(tmp_path, brokers=2, controllers=3).start()
    try:
        bs = cluster.brokers[1].bootstrap

        def settled():
            r = describe_quorum(bs)
            p = r.topics[0].partitions[0]
            ok = (r.error_code.value == 0 and p.error_code.value == 0 and len(p.observers) == 2
                  and all(v.log_end_offset > 0 for v in p.current_voters))
            return r if ok else None

        resp = wait_until(settled, desc="a leader that heard from every voter and the broker")
        p = resp.topics[0].partitions[0]
        assert resp.topics[0].topic_name == "__cluster_metadata"
        assert p.leader_id in VOTERS and p.leader_epoch > 0 and p.high_watermark > 0
        assert sorted(v.replica_id for v in p.current_voters) == VOTERS
        assert [o.replica_id for o in p.observers] == [1, 2]
        now_ms = time.time() * 1000
        for r in (*p.current_voters, *p.observers):
            assert r.log_end_offset <= p.high_watermark + 100
            assert now_ms - 60_000 < r.last_fetch_timestamp <= now_ms + 1000
            assert r.last_caught_up_timestamp > 0
        ports = {node_id: c.port for node_id, c in cluster.controllers.items()}
        assert sorted(n.node_id for n in resp.nodes) == VOTERS
        for n in resp.nodes:
            (listener,) = n.listeners
            assert listener.name == "CONTROLLER" and listener.host == "127.0.0.1"
            assert listener.port == ports[n.node_id]
        # v0: no timestamps on the wire; the same leader and voters
        old = describe_quorum(bs, 0).topics[0].partitions[0]
        assert old.leader_id == p.leader_id and len(old.current_voters) == 3
        # a partition that is not the metadata log
        assert describe_quorum(bs, 2, "other").error_code.value == 3  # UNKNOWN_TOPIC_OR_PARTITION

        status = cli(bs, "describe", "--status")
        assert f"LeaderId:               {p.leader_id}" in status, status
        assert "ClusterId:" in status and "CONTROLLER://127.0.0.1:" in status
        rows = json.loads(cli(bs, "--format", "json", "describe", "--replication"))
        assert (rows[0]["node_id"], rows[0]["status"]) == (p.leader_id, "Leader")
        assert sorted(r["node_id"] for r in rows) == [1, 2, *VOTERS]
        assert {r["status"] for r in rows} == {"Leader", "Follower", "Observer"}

        # AlterReplicaLogDirs to a broker that does not host the replica
        admin = cluster.admin()
        admin.create_topics([NewTopic("on-broker-1", 1, replica_assignment=[[1]])])["on-broker-1"] \
            .result(timeout=30)
        cluster.wait_for_partition("on-broker-1", 0, lambda v: v.leader == 1, "a leader")
        other = cluster.brokers[2].bootstrap
        with Wire(other) as w:
            dirs = kio_call(w, api.ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None}).results
            moved = kio_call(w, api.ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
                {"path": dirs[0].log_dir, "topics": [{"name": "on-broker-1", "partitions": [0]}]}
            ]})
        assert moved.results[0].partitions[0].error_code.value == 9  # REPLICA_NOT_AVAILABLE
    finally:
        cluster.close()
