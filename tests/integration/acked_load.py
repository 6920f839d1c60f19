"""An acks=all, idempotent producer of numbered records to one partition, and the
check that every record it saw acknowledged is read back once, in order, at its offset.

Used by the tests that fault the partition's leader while the producer runs
(`test_cluster_partition.py`, `test_process_pause.py`).
"""

from __future__ import annotations

import threading

from confluent_kafka import OFFSET_BEGINNING, Producer
from confluent_kafka.admin import NewTopic

from tests.integration.clients import Rec, ck_consume
from tests.integration.cluster_proc import ClusterProcesses


def create_led_by_3(cluster: ClusterProcesses, topic: str) -> None:
    """One partition, replicas [3, 1, 2], min.insync.replicas=2, broker 3 leading."""
    admin = cluster.admin()
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[3, 1, 2]],
                                           config={"min.insync.replicas": "2"})]).values():
        f.result(timeout=15)
    cluster.wait_for_partition(topic, 0, lambda v: v.leader == 3 and len(v.isr) == 3,
                               "broker 3 leading with the ISR whole")


class NumberedProducer:
    """Produces "0", "1", ... to partition 0 on a thread until `stop()`; records every
    acknowledgement as (offset, number) and every failure as its text."""

    def __init__(self, bootstrap: str, topic: str, message_timeout_ms: int) -> None:
        self.topic = topic
        self.acked: list[tuple[int, int]] = []
        self.failed: list[str] = []
        self._flush_s = message_timeout_ms / 1000 + 30
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True,
                                   "message.timeout.ms": message_timeout_ms,
                                   "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5})
        self._thread = threading.Thread(target=self._send, daemon=True)

    def _done(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            self.acked.append((msg.offset(), int(msg.value())))
        else:
            self.failed.append(str(err))

    def _send(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, str(n).encode(), partition=0,
                                   on_delivery=self._done)
            n += 1
            self._producer.poll(0.005)
        self._producer.flush(self._flush_s)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops producing and waits for every record in flight to be answered."""
        self._stop.set()
        self._thread.join(self._flush_s + 30)
        assert not self._thread.is_alive(), "the producer did not finish its flush"


def read_back_every_acked(bootstrap: str, topic: str,
                          acked: list[tuple[int, int]]) -> list[Rec]:
    """Reads the partition from its start and checks that each number appears once, in
    order, and that every acknowledged (offset, number) is there; returns the records."""
    total = max(o for o, _ in acked) + 1
    got = ck_consume(bootstrap, topic, total, offset=OFFSET_BEGINNING)
    values = [int(r.value) for r in got]
    assert len(values) == len(set(values)), "a record was read twice"
    assert values == sorted(values), "records out of order"
    at = {r.offset: int(r.value) for r in got}
    for offset, value in acked:
        assert at[offset] == value
    return got
