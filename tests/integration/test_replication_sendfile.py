"""The leader sends its followers' records straight from the segment files with
sendfile (storage/file_slice.py, broker/network.py), and a follower ends up
with the leader's bytes exactly.

One follower is stopped (SIGSTOP) while 24 MiB are produced, then resumed: it
catches up with 8 MiB fetches, answers larger than the loopback socket takes at
once, so the leader's writes cover every path: whole ranges by sendfile, a
range cut where the socket filled and its rest read into the transport's
buffer, and ranges read outright behind bytes already buffered. Checked: every
replica's segment files are byte for byte the leader's, a consumer reads every
record back, and the leader's metrics count bytes sent with sendfile.
"""

from __future__ import annotations

import hashlib
import os
import signal
import urllib.request
from pathlib import Path

import pytest

from tests.integration.broker_proc import free_port
from tests.integration.clients import Out, consume, produce, wait_until
from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

RECORDS = 12_000
VALUE_BYTES = 2048


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.rpartition(" ")[2])
    raise AssertionError(f"no metric {name}")


def _segments(data_dir: Path, topic: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((data_dir / f"{topic}-0").glob("*.log"))}


def test_followers_copy_the_leaders_bytes_sent_with_sendfile(tmp_path: Path) -> None:
    ports = {n: free_port() for n in (1, 2, 3)}
    cluster = ClusterProcesses(tmp_path, brokers=3, overrides={
        "replica.fetch.max.bytes": 8 * 1024 * 1024,
        "replica.fetch.response.max.bytes": 16 * 1024 * 1024,
        # the stopped follower stays in the ISR view long enough not to matter
        "broker.session.timeout.ms": 60_000, "replica.lag.time.max.ms": 60_000,
    }, broker_overrides={n: {"odradek.metrics.port": p} for n, p in ports.items()})
    cluster.start()
    try:
        topic = "zero-copy"
        cluster.create_topic(topic, 1, 3, {"segment.bytes": str(16 * 1024 * 1024)})
        view = cluster.partitions(topic)[0]
        leader = cluster.brokers[view.leader]
        lagging = cluster.brokers[next(n for n in view.replicas if n != view.leader)]
        assert lagging.pid is not None
        records = [Out(key=b"%d" % i, value=hashlib.sha256(b"%d" % i).digest() * (VALUE_BYTES // 32))
                   for i in range(RECORDS)]
        os.kill(lagging.pid, signal.SIGSTOP)
        try:
            offsets = produce("confluent", leader.bootstrap, topic, records, acks="1",
                              **{"batch.size": 1_000_000, "linger.ms": 20})
        finally:
            os.kill(lagging.pid, signal.SIGCONT)
        assert [o for _, o in offsets] == list(range(RECORDS))

        def caught_up() -> bool:
            sizes = {sum(len(b) for b in _segments(b.data_dir, topic).values())
                     for b in cluster.brokers.values()}
            return len(sizes) == 1
        wait_until(caught_up, 60, desc="every replica holding the leader's bytes")
        expected = _segments(leader.data_dir, topic)
        assert sum(map(len, expected.values())) > RECORDS * VALUE_BYTES
        for node_id, broker in cluster.brokers.items():
            assert _segments(broker.data_dir, topic) == expected, f"broker {node_id}"

        sent_by_sendfile = _metric(ports[view.leader], "odradek_network_sendfile_bytes_total")
        bytes_out = _metric(ports[view.leader], 'odradek_network_bytes_total{direction="out"}')
        # two followers copied ~25 MB; most of it left the files without a copy
        assert RECORDS * VALUE_BYTES <= sent_by_sendfile <= bytes_out, (
            sent_by_sendfile, bytes_out)

        got = consume("confluent", cluster.bootstrap, topic, RECORDS)
        assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in records]
        for broker in cluster.brokers.values():
            assert "Traceback" not in broker.log_path.read_text(errors="replace")
    finally:
        cluster.close()
