"""A bounded fault run: brokers killed with SIGKILL and restarted under an acks=all stream.

A producer (confluent-kafka, acks=all, enable.idempotence=true) sends a
numbered stream to a topic with 3 partitions, RF=3 and min.insync.replicas=2,
while the brokers are killed with kill -9 and restarted one at a time for
`FAULT_RUN_S` seconds. Afterwards every acknowledged record must be read back
exactly once, in order per partition (the numbers of a partition increase),
and acknowledged offsets must hold the acknowledged values.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.integration.cluster_proc import ClusterProcesses

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

FAULT_RUN_S = float(os.environ.get("ODRADEK_FAULT_RUN_S", "60"))  # tests/chaos runs more kinds
DOWN_S = 3.0  # how long a killed broker stays down
UP_S = 5.0  # how long all brokers run between two kills
PARTITIONS = 3
SEND_INTERVAL_S = 0.002
MAX_IN_FLIGHT_RECORDS = 20_000  # the producer stops adding when this many are unacked


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path_factory.mktemp("faults"), brokers=3).start()
    try:
        yield c
    finally:
        c.close()


class NumberedProducer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5,
        })
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        self.sent = 0
        self.stop_event = threading.Event()

    def _done(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked[msg.partition()].append((msg.offset(), int(msg.value())))

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            if n - self.acked_count() - len(self.failed) < MAX_IN_FLIGHT_RECORDS:
                self.producer.produce(self.topic, str(n).encode(), partition=n % PARTITIONS,
                                      on_delivery=self._done)
                n += 1
                self.sent = n
            self.producer.poll(SEND_INTERVAL_S)
        self.producer.flush(150)


def _read_all(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[tuple[int, int]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-check",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "auto.offset.reset": "earliest"})
    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        done: set[int] = {p for p, end in ends.items() if end == 0}
        while len(done) < PARTITIONS:
            assert time.monotonic() < deadline, f"read {[len(v) for v in out.values()]}"
            for m in c.consume(1000, timeout=1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[m.partition()]:
                            done.add(m.partition())
                        continue
                    continue
                out[m.partition()].append((m.offset(), int(m.value())))
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
    finally:
        c.close()
    return out


# the run itself takes FAULT_RUN_S; the suite's per-test timeout (300 s) is
# too close to that plus start-up and the read-back on a loaded machine
@pytest.mark.timeout(FAULT_RUN_S + 300)
def test_acked_records_survive_kill9_of_brokers_one_at_a_time(cluster: ClusterProcesses) -> None:
    topic = "faults"
    cluster.create_topic(topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
    producer = NumberedProducer(cluster.bootstrap, topic)
    producer.start()
    kills = 0
    started = time.monotonic()
    victim = 1
    try:
        while time.monotonic() - started < FAULT_RUN_S:
            time.sleep(UP_S)
            cluster.brokers[victim].kill9()
            kills += 1
            time.sleep(DOWN_S)
            cluster.brokers[victim].restart()
            cluster.wait_for_brokers({1, 2, 3}, timeout_s=30)
            victim = victim % 3 + 1
    finally:
        producer.stop_event.set()
        producer.join(180)
    assert not producer.is_alive()
    assert not producer.failed, producer.failed[:5]
    assert kills >= 3
    acked = producer.acked
    total = producer.acked_count()
    assert total > 1000, f"only {total} records acknowledged in {FAULT_RUN_S}s"
    # every partition fully replicated again, then read everything
    for p in range(PARTITIONS):
        cluster.wait_for_partition(topic, p, lambda v: len(v.isr) == 3, "ISR whole",
                                   timeout_s=60)
    ends = {p: max((o for o, _ in acked[p]), default=-1) + 1 for p in range(PARTITIONS)}
    read = _read_all(cluster.bootstrap, topic, ends)
    for p in range(PARTITIONS):
        values = [v for _, v in read[p]]
        # once: no value twice; in order: numbers of a partition increase
        assert len(values) == len(set(values)), f"partition {p}: duplicates"
        assert values == sorted(values), f"partition {p}: out of order"
        at = dict(read[p])
        for offset, value in acked[p]:
            assert at.get(offset) == value, (
                f"partition {p}: acked {value} at offset {offset}, read {at.get(offset)}"
            )
    print(f"fault run: {FAULT_RUN_S:.0f} s, {kills} kills, {total} acked records, "
          f"{producer.sent} sent")
