"""Tiered storage on a 3-broker cluster (RF=3) sharing one file:// remote tier: a
follower that fell below the leader's local start is rebuilt from the remote tier,
then leads after kill -9 of the others and continues copying from its lineage's last
remote offset; every acknowledged record reads back once, in order. kill -9 of the
leader in the middle of a copy, under a live acks=all producer: the new leader goes
on copying with no gap, the killed copy's objects are removed, every acknowledged
record reads back from offset 0. kill -9 of the leader while a consumer reads the
remote tier (SeaweedFS S3) from offset 0: it goes on with the new leader and gets
every record once, in order."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.clients import Out, ck_consume, ck_produce, wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.s3_server import s3_server  # noqa: F401 - the session fixture
from tests.integration.tiered_helpers import TIERED_BROKER, list_offsets, tiered_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

N = 300


def _cluster(base: Path, **extra: str) -> ClusterProcesses:
    return ClusterProcesses(base, brokers=3, overrides={
        **TIERED_BROKER, "rsm.config.url": (base / "remote").as_uri(),
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3", **extra}).start()


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = _cluster(tmp_path_factory.mktemp("tiered-cluster"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def slow_copy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    # 30 kB/s of uploads per broker: a 4 kB segment takes ~0.15 s, a backlog of tens of
    # segments several seconds, so a kill lands in the middle of a copy
    c = _cluster(tmp_path_factory.mktemp("tiered-cluster-slow"),
                 **{"remote.log.manager.copy.max.bytes.per.second": "30000"})
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


def _stems(d: Path) -> tuple[set[str], set[str]]:
    """(stems of every object, stems with a `.metadata` marker) of a remote partition."""
    names = [p.name for p in d.iterdir()] if d.exists() else []
    return ({n.split(".", 1)[0] for n in names if n[0].isdigit()},
            {n.split(".", 1)[0] for n in names if n.endswith(".metadata")})


class _LiveProducer:
    """An idempotent acks=all producer sending a numbered record every few ms until
    stopped; `acked` holds the values the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "compression.type": "none", "message.timeout.ms": 120000,
                                  "reconnect.backoff.max.ms": 500,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.topic = topic
        self.acked: list[bytes] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())

    def _run(self) -> None:
        while not self._stop.is_set():
            value = b"r%06d-" % self.sent + b"x" * 120
            try:
                self.producer.produce(self.topic, value=value, partition=0,
                                      on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self) -> _LiveProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0, "records still unacknowledged"


def test_leader_killed_mid_copy_new_leader_copies_on(slow_copy_cluster, topic_name):
    c = slow_copy_cluster
    root = c.base / "remote"
    c.create_topic(topic_name, 1, 3, config={**tiered_topic(), "min.insync.replicas": "2"})
    leader = c.partitions(topic_name)[0].leader
    producer = _LiveProducer(c.bootstrap, topic_name).start()
    try:
        # the leader is copying: some segment's objects are in the store, its marker not
        def part_dir() -> Path | None:
            found = sorted(root.glob(f"{topic_name}-*/0"))
            return found[0] if found else None

        def mid_copy() -> set[str]:
            d = part_dir()
            if d is None:
                return set()
            stems, marked = _stems(d)
            return stems - marked

        wait_until(lambda: len(_stems(part_dir())[1]) >= 5 if part_dir() else False,
                   timeout=60, desc="five segments copied")
        wait_until(mid_copy, timeout=30, interval=0.005, desc="a copy in progress")
        c.brokers[leader].kill9()
        cut_short = mid_copy()  # what the killed copy left (the new leader's come later)
        assert cut_short
        acked_at_kill = len(producer.acked)
        view = c.wait_for_partition(topic_name, 0, lambda v: v.leader not in (-1, leader),
                                    "a new leader", timeout_s=60)
        # the new leader copies on past what the killed one had copied
        port = c.brokers[view.leader].port
        before = list_offsets(port, topic_name, -5, 9)[1]
        wait_until(lambda: len(producer.acked) > acked_at_kill + 300, timeout=60,
                   desc="records acknowledged by the new leader")
    finally:
        producer.stop()
    wait_until(lambda: list_offsets(port, topic_name, -5, 9)[1] > max(before, 0) + 100,
               timeout=60, desc="the new leader copying")
    # the objects of the copy cut short are removed by the new leader (no marker: never
    # visible), the visible segments cover 0.. with no gap
    wait_until(lambda: not (cut_short & _stems(part_dir())[0]), timeout=30,
               desc="the killed copy's objects removed")
    segments = _segments(root, topic_name)
    assert segments[0][0] == 0
    for (_, end), (start, _) in itertools.pairwise(segments):
        assert start <= end + 1, segments
    assert segments[-1][1] >= list_offsets(port, topic_name, -5, 9)[1]
    assert list_offsets(port, topic_name, -4, 8)[1] > segments[0][1]  # reads cross tiers
    # every acknowledged record reads back from offset 0, once, in offset order
    end = list_offsets(port, topic_name, -1, 9)[1]
    got = ck_consume(c.live_bootstrap(), topic_name, end, timeout=90)
    values = [r.value for r in got]
    assert [r.offset for r in got] == list(range(end))
    assert len(set(values)) == len(values), "a record read twice"
    assert set(producer.acked) <= set(values)
    assert values == sorted(values)  # the producer's order


@pytest.fixture
def s3_cluster(tmp_path_factory: pytest.TempPathFactory, s3_server: Any  # noqa: F811
               ) -> Iterator[ClusterProcesses]:
    # the remote tier on the session's SeaweedFS; remote reads at 20 kB/s per broker so
    # that a consumer reading the backlog spends seconds in remote reads
    bucket = s3_server.bucket()
    c = ClusterProcesses(tmp_path_factory.mktemp("tiered-cluster-s3"), brokers=3, overrides={
        **TIERED_BROKER, "rsm.config.url": f"s3://{bucket}/tier",
        "rsm.config.fs.endpoint_url": s3_server.endpoint_url,
        "rsm.config.fs.key": s3_server.key, "rsm.config.fs.secret": s3_server.secret,
        "remote.log.manager.fetch.max.bytes.per.second": "20000",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3"}).start()
    try:
        yield c
    finally:
        c.close()


def test_leader_killed_during_a_remote_read_consumer_goes_on(s3_cluster, topic_name):
    """kill -9 of the leader while a consumer reads the remote tier (S3) from offset 0:
    the consumer continues on the new leader, which serves the rest of the remote part
    itself, and gets every acknowledged record once, in order."""
    from confluent_kafka import TopicPartition

    from tests.integration.clients import ck_consumer

    c = s3_cluster
    c.create_topic(topic_name, 1, 3, config={**tiered_topic(), "min.insync.replicas": "2"})
    outs = _outs(0, N)
    _produce(c, topic_name, outs)  # acks=all: every one acknowledged
    replicas = c.partitions(topic_name)[0].replicas

    def local_start(node: int) -> int:
        # the first local segment's base offset (ListOffsets -4 answers the leader only)
        part = Path(c.brokers[node].data_dir) / f"{topic_name}-0"
        return min((int(p.name.split(".")[0]) for p in part.glob("*.log")), default=-1)

    # every replica copied (leader) or learnt (followers) the remote tier and deleted its
    # local copies: whoever leads next serves the first half from the remote tier
    wait_until(lambda: all(local_start(b) > N // 2 for b in replicas), timeout=60,
               desc="every replica's local start past half the records")
    leader = c.partitions(topic_name)[0].leader
    starts = {b: local_start(b) for b in replicas}
    consumer = ck_consumer(c.bootstrap, **{"fetch.max.bytes": 4096, "message.max.bytes": 4096,
                                           "max.partition.fetch.bytes": 4096,
                                           "reconnect.backoff.max.ms": 500,
                                           "topic.metadata.refresh.interval.ms": 1000})
    got: list[tuple[int, bytes, bytes]] = []
    killed_at = -1
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        deadline = time.monotonic() + 90
        while len(got) < N:
            assert time.monotonic() < deadline, f"consumed {len(got)} of {N}"
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            got.append((m.offset(), m.key(), m.value()))
            if killed_at < 0 and len(got) >= 20:
                # mid-way through the remote part: kill -9 the leader serving it
                killed_at = m.offset()
                assert killed_at + 1 < min(starts.values()), (killed_at, starts)
                c.brokers[leader].kill9()
    finally:
        consumer.close()
    view = c.partitions(topic_name)[0]
    assert view.leader not in (-1, leader)
    # the new leader held locally only from its local start on: it served the rest of
    # the remote part (killed_at + 1 .. local start - 1) from the remote tier
    assert got == [(i, o.key, o.value) for i, o in enumerate(outs)]
