"""The chaos run's clients, each a thread that records what the cluster acknowledged.

- `NumberedProducer`: idempotent, acks=all, numbers to ``chaos`` (3 partitions);
  remembers (offset, number) of every acknowledged record.
- `KeyedProducer`: idempotent, acks=all, to the compacted ``chaos-compact``:
  key k<n mod KEYS>, value n; remembers the last acknowledged value per key.
- `TxnProducer`: transactions of TXN_SIZE records to ``chaos-txn``, each
  committed or (one in four) aborted on purpose; remembers which transactions
  committed, which aborted and which ended unknown (the commit failed in a way
  that does not say: all or nothing is allowed for those).
- `GroupConsumer`: a consumer group member reading ``chaos`` and committing
  synchronously; remembers every successful commit.
- `OffsetWatcher`: reads the group's committed offsets every second through the
  AdminClient; remembers every reading (they must never go backwards).

Every client has long timeouts (faults last seconds) and stops on `stop`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

NUMBERED = "chaos"
NUMBERED_PARTITIONS = 3
COMPACTED = "chaos-compact"
TXN = "chaos-txn"
TXN_PARTITIONS = 2
TXN_SIZE = 10
KEYS = 40
GROUP = "chaos-group"
MAX_UNACKED = 5_000


class Client(threading.Thread):
    """A client thread; an exception that ends it is kept in `crashed` (the
    check fails on it) instead of only being printed."""

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.crashed: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:
            self.crashed = f"{type(e).__name__}: {e}"
            raise

    def work(self) -> None:
        raise NotImplementedError


def _producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 300_000, "retry.backoff.ms": 100, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, **extra}


class NumberedProducer(Client):
    def __init__(self, bootstrap: str, interval_s: float) -> None:
        super().__init__("numbered-producer")
        self.producer = Producer(_producer_config(bootstrap))
        self.interval_s = interval_s
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(NUMBERED_PARTITIONS)}
        self.failed: list[str] = []
        self.sent = 0
        self.unflushed = 0

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append((msg.offset(), int(msg.value())))

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def work(self) -> None:
        n = 0
        while not self.stop.is_set():
            if n - self.acked_count() - len(self.failed) < MAX_UNACKED:
                self.producer.produce(NUMBERED, str(n).encode(),
                                      partition=n % NUMBERED_PARTITIONS, on_delivery=self._done)
                n += 1
                self.sent = n
            self.producer.poll(self.interval_s)
        self.unflushed = self.producer.flush(300)


class KeyedProducer(Client):
    def __init__(self, bootstrap: str, interval_s: float) -> None:
        super().__init__("keyed-producer")
        self.producer = Producer(_producer_config(bootstrap))
        self.interval_s = interval_s
        self.last: dict[bytes, int] = {}
        self.sent_values: set[int] = set()
        self.acked = 0
        self.failed: list[str] = []
        self.unflushed = 0

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
            return
        self.acked += 1
        value = int(msg.value().split(b".")[0])
        key = msg.key()
        # acks of one key arrive in order (one partition, idempotent producer)
        if value > self.last.get(key, -1):
            self.last[key] = value

    def work(self) -> None:
        n = 0
        while not self.stop.is_set():
            if n - self.acked - len(self.failed) < MAX_UNACKED:
                self.sent_values.add(n)
                self.producer.produce(COMPACTED, str(n).encode() + b"." + b"v" * 200,
                                      key=f"k{n % KEYS}".encode(), on_delivery=self._done)
                n += 1
            self.producer.poll(self.interval_s)
        self.unflushed = self.producer.flush(300)


class TxnProducer(Client):
    def __init__(self, bootstrap: str, interval_s: float, seed: int) -> None:
        super().__init__("txn-producer")
        self.bootstrap = bootstrap
        self.interval_s = interval_s
        self.config = _producer_config(bootstrap, **{"transactional.id": f"chaos-txn-{seed}",
                                                      "transaction.timeout.ms": 120_000,
                                                      "message.timeout.ms": 120_000})
        self.committed: set[int] = set()
        self.aborted: set[int] = set()
        self.unknown: set[int] = set()
        self.errors: list[str] = []
        self.restarts = 0

    def _new_producer(self) -> Producer:
        p = Producer(self.config)
        deadline = time.monotonic() + 300
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline or not e.args[0].retriable():
                    raise
                time.sleep(0.5)

    def work(self) -> None:
        p = self._new_producer()
        txn = 0
        while not self.stop.is_set():
            txn += 1
            abort = txn % 4 == 0
            try:
                p.begin_transaction()
                for i in range(TXN_SIZE):
                    p.produce(TXN, f"{txn}:{i}".encode(), partition=i % TXN_PARTITIONS)
                    p.poll(0)
                if abort:
                    p.flush(60)  # written first: librdkafka's abort purges what is unsent
                    self._end(p, commit=False)
                    self.aborted.add(txn)
                else:
                    self._end(p, commit=True)
                    self.committed.add(txn)
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    try:
                        self._end(p, commit=False)
                        self.aborted.add(txn)
                        continue
                    except KafkaException as e2:
                        err = e2.args[0]
                # fatal, or the abort failed too: the outcome is unknown; a new
                # producer (same transactional.id) fences the old one and
                # completes or aborts what it left
                self.unknown.add(txn)
                self.errors.append(str(err))
                self.restarts += 1
                p = self._new_producer()
            time.sleep(self.interval_s)

    def _end(self, p: Producer, commit: bool) -> None:
        """Commit or abort, retrying what librdkafka says is retriable."""
        deadline = time.monotonic() + 300
        while True:
            try:
                (p.commit_transaction if commit else p.abort_transaction)(30)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


class GroupConsumer(Client):
    def __init__(self, bootstrap: str) -> None:
        super().__init__("group-consumer")
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000})
        self.commits: list[dict[int, int]] = []
        self.consumed = 0

    def work(self) -> None:
        self.consumer.subscribe([NUMBERED])
        since = 0
        try:
            while not self.stop.is_set():
                msgs = self.consumer.consume(500, timeout=0.5)
                got = [m for m in msgs if m.error() is None]
                self.consumed += len(got)
                since += len(got)
                if since >= 200:
                    try:
                        parts = self.consumer.commit(asynchronous=False)
                    except KafkaException:
                        continue  # a fault: try again with the next batch
                    since = 0
                    if parts:
                        self.commits.append({tp.partition: tp.offset for tp in parts
                                             if tp.error is None and tp.offset >= 0})
        finally:
            self.consumer.close()


class OffsetWatcher(Client):
    def __init__(self, bootstrap: str) -> None:
        super().__init__("offset-watcher")
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.readings: list[dict[int, int]] = []

    def read(self) -> dict[int, int] | None:
        request = ConsumerGroupTopicPartitions(
            GROUP, [TopicPartition(NUMBERED, p) for p in range(NUMBERED_PARTITIONS)])
        try:
            result = self.admin.list_consumer_group_offsets([request], request_timeout=10)
            parts = result[GROUP].result(15).topic_partitions
        except KafkaException:
            return None
        return {tp.partition: tp.offset for tp in parts if tp.error is None and tp.offset >= 0}

    def work(self) -> None:
        while not self.stop.wait(1.0):
            reading = self.read()
            if reading:
                self.readings.append(reading)


def read_topic(bootstrap: str, topic: str, partitions: int, committed_only: bool,
               timeout_s: float = 120) -> dict[int, list[Any]]:
    """Every record of `topic` (read_committed or read_uncommitted) up to the
    partition ends seen at the start: partition -> [(offset, key, value)]."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-check-{topic}",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if committed_only else
                  "read_uncommitted"})
    out: dict[int, list[Any]] = {p: [] for p in range(partitions)}
    try:
        ends = {}
        for p in range(partitions):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            ends[p] = high
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: read {[len(v) for v in out.values()]} "
                                     f"records by the deadline, ends {ends}")
            for m in c.consume(1000, timeout=1.0):
                if m.error():
                    if (m.error().code() == KafkaError._PARTITION_EOF
                            and m.offset() >= ends[m.partition()]):
                        done.add(m.partition())
                    continue
                out[m.partition()].append((m.offset(), m.key(), m.value()))
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
    finally:
        c.close()
    return out
