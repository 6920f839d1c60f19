"""A byte rots in a closed segment: the scrubber finds it, and a follower repairs it.

Three brokers, RF=3, 64 KiB segments, the scrubber at 64 MiB/s, every segment re-checked every 2 s. After records
are acknowledged (acks=all), one byte in the middle of a closed segment of a
follower's copy is flipped on disk while it runs. The follower's scrubber logs
the corrupt segment, counts it (metric), cuts its log there and fetches the
rest again from the leader; the ISR is whole again, no closed segment of any
replica is corrupt any more, and once the repaired follower leads alone every
acknowledged record is read from it, byte for byte. On the leader, a corrupt
segment is logged and counted but left (it is the only good copy it knows).
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer
from confluent_kafka.admin import NewTopic

from odradek.storage.scrub import scan_closed_segment
from tests.integration.broker_proc import free_port
from tests.integration.clients import ck_consume
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

RECORDS = 3000


def _closed_segments(dir: Path) -> list[Path]:
    logs = sorted(dir.glob("*.log"))
    return logs[:-1]


def _corrupt_segments(dir: Path) -> list[Path]:
    out = []
    for path in _closed_segments(dir):
        base = int(path.stem)
        if scan_closed_segment(path, base, path.stat().st_size) is not None:
            out.append(path)
    return out


def _flip_byte(path: Path) -> int:
    position = path.stat().st_size // 2
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0x5A]))
    return position


def _wait_log(broker, text: str, timeout_s: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while text not in broker.log_tail(1 << 20):
        assert time.monotonic() < deadline, f"no {text!r} in the log"
        time.sleep(0.2)


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")


def test_a_corrupt_follower_segment_is_found_and_fetched_again(tmp_path: Path) -> None:
    metrics = {b: free_port() for b in (1, 2, 3)}
    cluster = ClusterProcesses(
        tmp_path, brokers=3,
        overrides={"odradek.log.scrub.bytes.per.second": 64 * 1024 * 1024,
                   "odradek.log.scrub.interval.ms": 2000},
        broker_overrides={b: {"odradek.metrics.port": metrics[b]} for b in (1, 2, 3)})
    try:
        cluster.start()
        topic = "rot"
        admin = cluster.admin()
        for f in admin.create_topics([NewTopic(
                topic, num_partitions=1, replica_assignment=[[1, 2, 3]],
                config={"min.insync.replicas": "2", "segment.bytes": "65536"})]).values():
            f.result(timeout=15)
        cluster.wait_for_partition(topic, 0, lambda v: v.leader == 1 and len(v.isr) == 3,
                                   "broker 1 leading, ISR whole")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5, "batch.size": 8192})
        for i in range(RECORDS):
            p.produce(topic, b"%06d." % i + b"r" * 200, partition=0)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        follower_dir = cluster.brokers[3].data_dir / f"{topic}-0"
        leader_dir = cluster.brokers[1].data_dir / f"{topic}-0"
        victims = _closed_segments(follower_dir)
        assert len(victims) >= 4, victims
        victim = victims[1]
        _flip_byte(victim)
        assert _corrupt_segments(follower_dir) == [victim]

        _wait_log(cluster.brokers[3], "is corrupt")
        _wait_log(cluster.brokers[3], "to fetch the rest again from leader 1")
        assert _metric(metrics[3], "odradek_log_scrub_corrupt_segments") >= 1
        assert _metric(metrics[3], "odradek_log_scrub_repaired_segments") >= 1
        cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "ISR whole again",
                                   timeout_s=60)
        deadline = time.monotonic() + 60
        while _corrupt_segments(follower_dir) or len(_closed_segments(follower_dir)) < len(
                victims):
            assert time.monotonic() < deadline, "the follower's copy was not repaired"
            time.sleep(0.5)
        assert not _corrupt_segments(leader_dir)

        # the leader's own corrupt segment is found and left in place
        leader_victim = _closed_segments(leader_dir)[0]
        _flip_byte(leader_victim)
        _wait_log(cluster.brokers[1], "this node leads it")
        assert _metric(metrics[1], "odradek_log_scrub_corrupt_segments") >= 1
        assert _metric(metrics[1], "odradek_log_scrub_repaired_segments") == 0
        _flip_byte(leader_victim)  # undone: XOR twice

        cluster.brokers[1].stop()
        cluster.brokers[2].stop()
        cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3, "broker 3 leading",
                                   timeout_s=30)
        got = ck_consume(cluster.live_bootstrap(), topic, RECORDS, offset=OFFSET_BEGINNING)
        assert [r.value for r in got] == [b"%06d." % i + b"r" * 200 for i in range(RECORDS)]
    finally:
        cluster.close()
        os.sync()
