"""A log dir that fills up (ENOSPC) and the operator's path back (issue 15.1).

The fault is real: the log dir is a small tmpfs made by the test (as root),
filled by an acks=all producer until the broker takes the dir offline. The
operator grows the filesystem and restarts the broker, which must register its
dir online again, be unfenced, lead the partitions whose ISR is just it, serve
every acknowledged record and take new ones. Without root the broker's files
are bounded with `prlimit --fsize` instead (EFBIG, see small_fs.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Out, ck_consume, ck_produce, create_topic, wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.small_fs import SmallFilesystem

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

MIB = 1024 * 1024
RECORD = 1000


class Deliveries:
    """A producer's delivery reports: (offset, value) per partition, and errors."""

    def __init__(self, partitions: int) -> None:
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []

    def done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.partition()].append((msg.offset(), msg.value()))
        else:
            self.errors.append(str(err))

    def values(self) -> dict[int, list[bytes]]:
        """The acknowledged values per partition, in offset order."""
        return {k: [v for _, v in sorted(vs)] for k, vs in self.acked.items()}


def _fill(bootstrap: str, topic: str, partitions: int, max_records: int) -> dict[int, list[bytes]]:
    """Produce with acks=all until the broker refuses; the acknowledged values
    per partition, in offset order."""
    from confluent_kafka import Producer

    reports = Deliveries(partitions)
    failed, done = reports.errors, reports.done
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 8000, "retries": 2})
    for i in range(max_records):
        p.produce(topic, b"%07d." % i + b"x" * RECORD, partition=i % partitions,
                  on_delivery=done)
        if i % 200 == 0:
            p.poll(0.05)
            if failed:
                break
    p.flush(30)
    assert failed, "the filesystem never filled up"
    return reports.values()


def _assert_all_readable(bootstrap: str, topic: str, acked: dict[int, list[bytes]]) -> None:
    for partition, values in acked.items():
        got = ck_consume(bootstrap, topic, len(values), partitions=[partition], timeout=60)
        assert [r.value for r in got] == values, partition


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def test_single_node_full_disk_comes_back_after_the_space_is_repaired(tmp_path, topic_name):
    with SmallFilesystem(tmp_path / "disk", 6 * MIB) as fs:
        proc = BrokerProcess(data_dir=fs.path / "data", log_path=tmp_path / "broker.log",
                             overrides={"log.segment.bytes": fs.segment_bytes},
                             wrapper=fs.wrapper())
        try:
            proc.start()
            create_topic(proc.bootstrap, topic_name, 2)
            acked = _fill(proc.bootstrap, topic_name, 2, 40_000)
            total = sum(len(v) for v in acked.values())
            assert total > 1000, total
            wait_until(lambda: "Stopped serving replicas in dir" in proc.log_tail(), 15)
            proc.stop()

            fs.grow(64 * MIB)
            proc.wrapper = fs.wrapper()
            proc.start()
            # Registered, unfenced, leading again (was: no broker, leader -1 forever).
            wait_until(lambda: set(_leaders(proc.bootstrap, topic_name).values()) == {1}, 20)
            _assert_all_readable(proc.bootstrap, topic_name, acked)
            more = [Out(value=b"after-%d" % i, partition=i % 2) for i in range(100)]
            ck_produce(proc.bootstrap, topic_name, more, acks="all")
            for partition in (0, 1):
                want = acked[partition] + [o.value for o in more if o.partition == partition]
                got = ck_consume(proc.bootstrap, topic_name, len(want), partitions=[partition])
                assert [r.value for r in got] == want
            print(f"full disk ({'tmpfs' if fs.real else 'prlimit --fsize'}): "
                  f"{total} acknowledged records, all read back after the repair")
        finally:
            proc.close()


def test_cluster_replica_on_a_full_disk_catches_up_and_rejoins_the_isr(tmp_path):
    """Three brokers, RF=3; broker 2's log dir is a small filesystem (its
    metadata log elsewhere). It fills, the dir goes offline, the others go on
    taking acks=all writes; once grown and restarted it catches up and rejoins
    every ISR."""
    with SmallFilesystem(tmp_path / "disk2", 4 * MIB) as fs:
        meta = tmp_path / "broker-2-meta"
        cluster = ClusterProcesses(tmp_path, brokers=3, broker_overrides={
            2: {"log.dirs": str(fs.path / "data"), "metadata.log.dir": str(meta),
                "log.segment.bytes": fs.segment_bytes}})
        cluster.brokers[2].wrapper = fs.wrapper()
        try:
            cluster.start()
            topic = "full-disk"
            cluster.create_topic(topic, 2, 3, config={"min.insync.replicas": "2"})
            from confluent_kafka import Producer

            reports = Deliveries(2)
            errors, done = reports.errors, reports.done
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 5,
                          "message.timeout.ms": 120000,
                          "topic.metadata.refresh.interval.ms": 1000})
            b2 = cluster.brokers[2]
            sent = 0
            while "Stopped serving replicas in dir" not in b2.log_tail() and sent < 40_000:
                for _ in range(200):
                    p.produce(topic, b"%07d." % sent + b"y" * RECORD, partition=sent % 2,
                              on_delivery=done)
                    sent += 1
                p.poll(0.05)
            assert "Stopped serving replicas in dir" in b2.log_tail(), "broker 2 never filled"
            for _ in range(5):  # writes go on without broker 2's replicas
                for _ in range(200):
                    p.produce(topic, b"%07d." % sent + b"y" * RECORD, partition=sent % 2,
                              on_delivery=done)
                    sent += 1
                p.poll(0.05)
            assert p.flush(120) == 0 and not errors, errors[:3]
            for part in (0, 1):  # the controller's ISR change reaches Metadata soon after
                cluster.wait_for_partition(
                    topic, part, lambda v: 2 not in v.isr and v.leader in (1, 3),
                    "broker 2 out of the ISR", timeout_s=60)

            b2.stop()
            fs.grow(64 * MIB)
            b2.wrapper = fs.wrapper()
            b2.start()
            cluster.wait_for_brokers({1, 2, 3})
            for part in (0, 1):
                cluster.wait_for_partition(topic, part, lambda v: v.isr == (1, 2, 3),
                                           "broker 2 back in the ISR", timeout_s=60)
            values = reports.values()
            assert sum(len(v) for v in values.values()) == sent
            _assert_all_readable(cluster.live_bootstrap(), topic, values)
        finally:
            cluster.close()
