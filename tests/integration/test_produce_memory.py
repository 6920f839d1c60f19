"""Parked produce requests are bounded by the request pool: `queued.max.request.bytes`,
or odradek's own `odradek.queued.max.request.bytes` while Kafka's key is -1
(its default). Many acks=all producers write to a partition whose follower is
stopped (SIGSTOP, still in the ISR, so every request parks until it replicates):
with a small pool the leader stops reading their sockets once the pool is full,
its RSS stays bounded, and when the follower comes back every record is
acknowledged. Without a pool each connection holds its parked request and its
queued ones (docs/operations.md, "Memory")."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.broker_proc import free_port
from tests.integration.clients import ck_common, wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_connection_limits import RssSampler

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

MiB = 1024 * 1024
PRODUCERS = int(os.environ.get("ODRADEK_PRODUCE_MEMORY_PRODUCERS", "40"))
RECORDS = 300  # per producer
VALUE = b"p" * 10_000  # 3 MB per producer
PARK_S = 8.0  # how long the follower stays stopped once every producer has sent


def _metric(port: int, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rpartition(" ")[2])
    return 0.0


def test_parked_produce_requests_are_bounded_by_the_request_pool(tmp_path: Path,
                                                                 record_property):
    budget = int(os.environ.get("ODRADEK_PRODUCE_MEMORY_BUDGET", str(16 * MiB)))
    ports = {1: free_port(), 2: free_port()}
    cluster = ClusterProcesses(tmp_path, brokers=2, overrides={
        # the stopped follower stays registered and in the ISR: requests park
        "broker.session.timeout.ms": 120_000, "replica.lag.time.max.ms": 120_000,
        "socket.request.max.bytes": 2 * MiB,
        "odradek.queued.max.request.bytes": budget,
    }, broker_overrides={n: {"odradek.metrics.port": p} for n, p in ports.items()})
    cluster.start()
    try:
        topic = "parked"
        cluster.create_topic(topic, 1, 2, {"min.insync.replicas": "2"})
        view = cluster.partitions(topic)[0]
        leader = cluster.brokers[view.leader]
        follower = cluster.brokers[next(n for n in view.replicas if n != view.leader)]
        port = ports[view.leader]
        assert leader.pid is not None and follower.pid is not None
        rss = RssSampler(leader.pid)
        os.kill(follower.pid, signal.SIGSTOP)
        failures: list[str] = []
        delivered = [0]
        lock = threading.Lock()

        def on_delivery(err, _msg) -> None:
            with lock:
                if err is not None:
                    failures.append(str(err))
                else:
                    delivered[0] += 1

        producers = [Producer({**ck_common(leader.bootstrap), "acks": "all",
                               "linger.ms": 20, "batch.size": 1_000_000,
                               "compression.type": "none", "request.timeout.ms": 120_000,
                               "socket.timeout.ms": 120_000,
                               "message.timeout.ms": 180_000,
                               "queue.buffering.max.kbytes": 8 * 1024})
                     for _ in range(PRODUCERS)]
        try:
            peak_pool = 0.0
            for p in producers:
                for _ in range(RECORDS):
                    p.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
                p.poll(0)
            deadline = time.monotonic() + PARK_S
            while time.monotonic() < deadline:  # the load builds while it is parked
                peak_pool = max(peak_pool, _metric(port, "odradek_queued_request_bytes"))
                time.sleep(0.2)
            assert delivered[0] == 0 and not failures  # nothing acknowledged while parked
        finally:
            os.kill(follower.pid, signal.SIGCONT)
        for p in producers:
            assert p.flush(120) == 0
        growth = rss.stop()
        assert not failures, failures[:3]
        assert delivered[0] == PRODUCERS * RECORDS
        wait_until(lambda: _metric(port, "odradek_queued_request_bytes") == 0, 15,
                   desc="the request pool empty again")
        record_property("rss_growth_mib", growth / MiB)
        pool = f"{budget / MiB:.0f} MiB" if budget > 0 else "none"
        print(f"{PRODUCERS} acks=all producers x {RECORDS * len(VALUE) / MiB:.1f} MiB, "
              f"follower stopped {PARK_S:.0f} s, odradek.queued.max.request.bytes "
              f"{pool}: leader peak RSS growth {growth / MiB:.1f} MiB, "
              f"pool peak {peak_pool / MiB:.1f} MiB")
        if budget > 0:
            # non-strict: one request and one read (256 KiB) past it per connection
            assert peak_pool <= budget + 2 * MiB + PRODUCERS * 256 * 1024
            assert growth < budget + 64 * MiB
    finally:
        cluster.close()
