"""Tiered storage on a 3-broker cluster (RF=3) sharing one file:// remote tier: a
follower that fell below the leader's local start is rebuilt from the remote tier,
then leads after kill -9 of the others and continues copying from its lineage's last
remote offset; every acknowledged record reads back once, in order."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.clients import Out, ck_consume, ck_produce, wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.tiered_helpers import TIERED_BROKER, list_offsets, tiered_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

N = 300


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    base = tmp_path_factory.mktemp("tiered-cluster")
    c = ClusterProcesses(base, brokers=3, overrides={
        **TIERED_BROKER, "rsm.config.url": (base / "remote").as_uri(),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3"}).start()
    try:
        yield c
    finally:
        c.close()


def _outs(start: int, n: int) -> list[Out]:
    return [Out(key=b"k%05d" % i, value=(b"c-%05d-" % i) * (20 + i % 9), partition=0)
            for i in range(start, start + n)]


def _produce(c: ClusterProcesses, topic: str, outs: list[Out]) -> None:
    ck_produce(c.live_bootstrap(), topic, outs, **{"acks": "all", "linger.ms": 0,
                                                   "batch.num.messages": 5,
                                                   "compression.type": "none"})


def _segments(root: Path, topic: str) -> list[tuple[int, int]]:
    from odradek.tiered.metadata_records import decode_value

    out = []
    for p in sorted(root.glob(f"{topic}-*/0/*.metadata")):
        m = decode_value(p.read_bytes())
        out.append((m.start_offset, m.end_offset))  # type: ignore[union-attr]
    return sorted(out)


def test_follower_rebuilt_from_remote_then_leads_and_continues_copying(cluster, topic_name):
    c = cluster
    root = c.base / "remote"
    c.create_topic(topic_name, 1, 3, config={**tiered_topic(), "min.insync.replicas": "2"})
    view = c.partitions(topic_name)[0]
    leader = view.leader
    follower = next(r for r in view.replicas if r != leader)
    # 1. a follower misses everything while the leader copies and deletes locally
    c.brokers[follower].kill9()
    first = _outs(0, N)
    _produce(c, topic_name, first)
    port = c.brokers[leader].port
    wait_until(lambda: list_offsets(port, topic_name, -4, 8)[1] > 0, timeout=60,
               desc="leader copied and deleted locally")
    # 2. back, it is below the leader's local start: it starts over there and takes its
    # leader-epoch cache and producer state from the remote segment below (KIP-405)
    c.brokers[follower].start()
    c.wait_for_partition(topic_name, 0, lambda v: follower in v.isr, "the follower back in sync",
                         timeout_s=60)
    logged = c.brokers[follower].log_tail(200_000)
    assert "follower state built from remote segment" in logged
    started = int(re.search(r"behind the leader's log start (\d+)", logged).group(1))
    checkpoint = Path(c.brokers[follower].data_dir) / f"{topic_name}-0" / "leader-epoch-checkpoint"
    epoch, offset = checkpoint.read_text().split("\n")[2].split()
    assert epoch == "0" and int(offset) < started, (epoch, offset, started)
    # 3. kill -9 the leader and the third replica: the rebuilt follower leads
    for node in view.replicas:
        if node != follower:
            c.brokers[node].kill9()
    c.wait_for_partition(topic_name, 0, lambda v: v.leader == follower, "the follower leads")
    for node in view.replicas:
        if node not in (follower, leader):
            c.brokers[node].start()
    c.wait_for_partition(topic_name, 0, lambda v: len(v.isr) >= 2, "two in sync")
    # 4. it continues copying from its lineage's last remote offset, without a gap
    second = _outs(N, N)
    _produce(c, topic_name, second)
    port = c.brokers[follower].port
    wait_until(lambda: list_offsets(port, topic_name, -5, 9)[1] >= N, timeout=60,
               desc="the new leader copied past the old leader's records")
    segments = _segments(root, topic_name)
    assert segments[0][0] == 0
    for (_, end), (start, _) in itertools.pairwise(segments):
        assert start <= end + 1, segments
    # 5. every acknowledged record reads back once, in order, across both tiers
    got = ck_consume(c.live_bootstrap(), topic_name, 2 * N, timeout=90)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, o.key, o.value) for i, o in enumerate(first + second)]
