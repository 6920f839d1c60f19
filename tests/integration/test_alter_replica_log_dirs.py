"""AlterReplicaLogDirs (API 34): a partition moves between the broker's two log
dirs while a confluent-kafka producer (acks=all) keeps writing to it; the copy is
throttled so that DescribeLogDirs shows the future replica on its way; nothing
acknowledged is lost; the error codes of Kafka's ReplicaManager."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from odradek.protocol import api
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import (
    Out,
    Wire,
    ck_admin,
    ck_consume,
    ck_produce,
    ck_producer,
    create_topic,
    wait_until,
)
from tests.integration.test_groups_helpers import kio_call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PRELOAD = 4000  # 1 KB records before the move: ~4 MB to copy at 2 MB/s


def describe_log_dirs(bs: str, topic: str) -> dict[str, list]:
    """log dir -> [(partition, is_future, offset_lag)] of `topic`."""
    with Wire(bs) as w:
        r = kio_call(w, api.ApiKey.DESCRIBE_LOG_DIRS, 4,
                     {"topics": [{"topic": topic, "partitions": [0]}]})
    return {d.log_dir: [(p.partition_index, p.is_future_key, p.offset_lag)
                        for t in d.topics if t.name == topic for p in t.partitions]
            for d in r.results}


def alter(bs: str, path: str, topic: str, partition: int = 0) -> int:
    body = {"dirs": [{"path": path, "topics": [{"name": topic, "partitions": [partition]}]}]}
    with Wire(bs) as w:
        r = kio_call(w, api.ApiKey.ALTER_REPLICA_LOG_DIRS, 2, body)
    return r.results[0].partitions[0].error_code.value


def test_move_a_partition_between_log_dirs_under_produce_load(broker_kind, tmp_path, topic_name):
    if broker_kind != "odradek":
        pytest.skip("odradek's log dirs")
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    proc = BrokerProcess(broker_kind, overrides={
        "log.dirs": ",".join(str(d) for d in dirs),
        "replica.alter.log.dirs.io.max.bytes.per.second": 2_000_000,
    }, data_dir=tmp_path / "data", log_path=tmp_path / "broker.log").start()
    try:
        bs = proc.bootstrap
        create_topic(bs, topic_name, 1)
        pre = [f"pre-{i}".ljust(1000).encode() for i in range(PRELOAD)]
        ck_produce(bs, topic_name, [Out(v) for v in pre], acks="all")
        where = describe_log_dirs(bs, topic_name)
        (src,) = [d for d, ps in where.items() if ps]
        (dest,) = [d for d in where if d != src]

        acked: list[bytes] = []
        stop = threading.Event()

        def produce() -> None:
            p = ck_producer(bs, acks="all")
            i = 0
            while not stop.is_set():
                value = f"live-{i}".encode()
                p.produce(topic_name, value, partition=0,
                          on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                p.poll(0)
                i += 1
                if i % 50 == 0:
                    p.flush(10)
                    stop.wait(0.02)  # a steady load, at most ~2,500 records/s
            p.flush(30)

        writer = threading.Thread(target=produce, daemon=True)
        writer.start()
        wait_until(lambda: len(acked) > 100, desc="the producer under way")
        assert alter(bs, dest, topic_name) == 0
        seen_future = wait_until(
            lambda: any(f for _, f, _ in describe_log_dirs(bs, topic_name).get(dest, [])),
            desc="the future replica in the destination dir")
        assert seen_future
        wait_until(lambda: describe_log_dirs(bs, topic_name) == {src: [], dest: [(0, False, 0)]},
                   timeout=90, desc="the partition moved to the destination dir")
        wait_until(lambda: len(acked) > 300, desc="produce goes on after the move")
        stop.set()
        writer.join(60)
        assert not writer.is_alive()
        assert (Path(dest) / f"{topic_name}-0").is_dir()
        wait_until(lambda: not (Path(src) / f"{topic_name}-0").exists(),
                   desc="the old copy removed")
        total = len(pre) + len(acked)
        got = ck_consume(bs, topic_name, total)
        values = [r.value for r in got]
        assert values[:len(pre)] == pre
        assert set(acked) <= set(values)  # nothing acknowledged is lost
        assert [r.offset for r in got] == list(range(total))

        # Kafka's error codes
        assert alter(bs, str(tmp_path / "elsewhere"), topic_name) == 57  # LOG_DIR_NOT_FOUND
        assert alter(bs, dest, "no-such-topic") == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert alter(bs, dest, topic_name, 5) == 3
        assert alter(bs, dest, topic_name) == 0  # already there: nothing to do

        # `odradek partitions reassign` with log_dirs moves it back (kafka-reassign-partitions)
        node = next(iter(ck_admin(bs).list_topics(timeout=30).brokers))
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic_name, "partition": 0, "replicas": [node], "log_dirs": [src]}]}))

        def reassign(action: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "odradek", "partitions", "reassign", "--bootstrap-server",
                 bs, "--reassignment-json-file", str(plan), action],
                capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert f"Successfully started log directory move for: {topic_name}-0-{node}" in reassign(
            "--execute")
        wait_until(lambda: f"Reassignment of replica {topic_name}-0-{node} is completed."
                   in reassign("--verify"), timeout=90, desc="the CLI's move back")
        assert describe_log_dirs(bs, topic_name) == {src: [(0, False, 0)], dest: []}
        src, dest = dest, src

        # the moved log is the partition's after a restart (the controller was told
        # its new dir, KIP-858), whole
        proc.restart()
        assert describe_log_dirs(bs, topic_name) == {src: [], dest: [(0, False, 0)]}
        again = ck_consume(bs, topic_name, total)
        assert [r.value for r in again] == values
    finally:
        proc.close()
