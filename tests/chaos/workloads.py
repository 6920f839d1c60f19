"""The chaos run's clients: each a child process whose lines say what the cluster acknowledged.

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

Each runs its loop (below) in a child process (`python -m tests.chaos.child`)
that prints one line per fact (`ack 2 117 5301`, `commit 12`, ...), read by a
thread here. A client library that dies (librdkafka 2.16 aborted twice in 30-minute
runs: an assertion in `rd_kafka_enq_once_del_source_return`, once a segfault)
takes only its child down: the death is counted and reported, what it had in
flight counts as unknown, and a new child goes on (numbers from a range of its
own, transactions after the last one begun, a new member of the group).
SIGTERM asks a child to finish (flush, close) and exit.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
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
RANGE = 100_000_000  # the numbers of the k-th child of a producer start at k * RANGE
REPO_ROOT = Path(__file__).resolve().parents[2]

Emit = Callable[[str], None]
Stopping = Callable[[], bool]


def _producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 300_000, "retry.backoff.ms": 100, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, **extra}


# -- the loops (run in the child) ------------------------------------------------------------

def numbered_loop(bootstrap: str, interval_s: float, first: int, emit: Emit,
                  stopping: Stopping) -> None:
    producer = Producer(_producer_config(bootstrap))
    done = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        done[0] += 1
        if err is not None:
            emit(f"fail {err}")
        else:
            emit(f"ack {msg.partition()} {msg.offset()} {int(msg.value())}")

    n = first
    while not stopping():
        if n - first - done[0] < MAX_UNACKED:
            producer.produce(NUMBERED, str(n).encode(), partition=n % NUMBERED_PARTITIONS,
                             on_delivery=on_delivery)
            n += 1
        producer.poll(interval_s)
    emit(f"unflushed {producer.flush(300)}")


def keyed_loop(bootstrap: str, interval_s: float, first: int, emit: Emit,
               stopping: Stopping) -> None:
    producer = Producer(_producer_config(bootstrap))
    done = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        done[0] += 1
        if err is not None:
            emit(f"fail {err}")
        else:
            emit(f"ack {msg.key().decode()} {int(msg.value().split(b'.')[0])}")

    n = first
    while not stopping():
        if n - first - done[0] < MAX_UNACKED:
            emit(f"sent {n}")
            producer.produce(COMPACTED, str(n).encode() + b"." + b"v" * 200,
                             key=f"k{n % KEYS}".encode(), on_delivery=on_delivery)
            n += 1
        producer.poll(interval_s)
    emit(f"unflushed {producer.flush(300)}")


def txn_loop(bootstrap: str, interval_s: float, txn_id: str, first: int, emit: Emit,
             stopping: Stopping) -> None:
    config = _producer_config(bootstrap, **{"transactional.id": txn_id,
                                            "transaction.timeout.ms": 120_000,
                                            "message.timeout.ms": 120_000})

    def new_producer() -> Producer:
        p = Producer(config)
        deadline = time.monotonic() + 300
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline or not e.args[0].retriable():
                    raise
                time.sleep(0.5)

    def end(p: Producer, commit: bool) -> None:
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

    p = new_producer()
    txn = first - 1
    while not stopping():
        txn += 1
        abort = txn % 4 == 0
        emit(f"begin {txn}")
        try:
            p.begin_transaction()
            for i in range(TXN_SIZE):
                p.produce(TXN, f"{txn}:{i}".encode(), partition=i % TXN_PARTITIONS)
                p.poll(0)
            if abort:
                p.flush(60)  # written first: librdkafka's abort purges what is unsent
            end(p, commit=not abort)
            emit(f"{'abort' if abort else 'commit'} {txn}")
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                try:
                    end(p, commit=False)
                    emit(f"abort {txn}")
                    continue
                except KafkaException as e2:
                    err = e2.args[0]
            # fatal, or the abort failed too: the outcome is unknown; a new producer
            # (same transactional.id) fences the old one and completes or aborts it
            emit(f"unknown {txn} {err}")
            p = new_producer()
        time.sleep(interval_s)


def group_loop(bootstrap: str, emit: Emit, stopping: Stopping) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000})
    consumer.subscribe([NUMBERED])
    since = 0
    try:
        while not stopping():
            got = [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
            since += len(got)
            if since >= 200:
                try:
                    parts = consumer.commit(asynchronous=False)
                except KafkaException:
                    continue  # a fault: try again with the next batch
                since = 0
                offsets = {tp.partition: tp.offset for tp in parts or []
                           if tp.error is None and tp.offset >= 0}
                if offsets:
                    emit(f"commit {json.dumps(offsets)}")
    finally:
        consumer.close()


def committed_offsets(admin: Any) -> dict[int, int] | None:
    """The group's committed offsets of ``chaos``, or None when the cluster did not say.

    librdkafka 2.16 may abort or crash in here when the group coordinator goes away
    and comes back (a use-after-free: tests/chaos/librdkafka_admin_crash.py); the
    watcher runs in a child process of its own for that."""
    request = ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(NUMBERED, p) for p in range(NUMBERED_PARTITIONS)])
    try:
        result = admin.list_consumer_group_offsets([request], request_timeout=10)
        parts = result[GROUP].result(15).topic_partitions
    except (KafkaException, TimeoutError):  # (a future not done in 15 s)
        return None
    return {tp.partition: tp.offset for tp in parts if tp.error is None and tp.offset >= 0}


def watch_loop(bootstrap: str, emit: Emit, stopping: Stopping) -> None:
    from confluent_kafka.admin import AdminClient

    while not stopping():
        # A client per reading: one kept across coordinator restarts hits
        # librdkafka#5397 (5-7 aborts in 150 s of tests/chaos/librdkafka_admin_crash.py;
        # 0 in 150 s, 575 readings, with a client per reading).
        reading = committed_offsets(AdminClient({"bootstrap.servers": bootstrap}))
        if reading:
            emit(f"reading {json.dumps(reading)}")
        time.sleep(1.0)


# -- the parent's side ------------------------------------------------------------------------

class Client(threading.Thread):
    """Runs one client in child processes, one after another when one dies.

    `crashed` is a failure of this side (the check fails on it); `deaths` are the
    child processes that ended without being asked (the client library's own
    crashes: reported, survived)."""

    kind = ""

    def __init__(self, name: str, bootstrap: str, log_dir: Path) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap = bootstrap
        self.log_dir = log_dir
        self.crashed: str | None = None
        self.deaths: list[str] = []
        self.stop = threading.Event()
        self.children = 0
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def args(self) -> list[str]:
        """The child's arguments after its kind (for the `children`-th child)."""
        return []

    def on_line(self, word: str, rest: str) -> None:
        raise NotImplementedError

    def on_death(self) -> None:
        """A child died: what it had begun is unknown."""

    def run(self) -> None:
        try:
            while True:
                rc = self._one_child()
                if self.stop.is_set() and rc == 0:
                    return
                self.deaths.append(f"{self.name} child {self.children} exited with {rc} "
                                   f"(its stderr: {self.log_dir / f'{self.name}-{self.children}.err'})")
                self.on_death()
                if self.stop.is_set():
                    return
                time.sleep(1.0)
        except BaseException as e:
            self.crashed = f"{type(e).__name__}: {e}"
            raise

    def _one_child(self) -> int:
        self.children += 1
        err = open(self.log_dir / f"{self.name}-{self.children}.err", "w")  # noqa: SIM115
        with self._lock:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.child", self.kind, self.bootstrap,
                 *self.args()],
                stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(REPO_ROOT))
            if self.stop.is_set():
                self._proc.send_signal(signal.SIGTERM)
        err.close()
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            self.on_line(word, rest)
        return self._proc.wait()

    def finish(self) -> None:
        """Ask the running child to finish (SIGTERM); `join` waits for it."""
        with self._lock:
            self.stop.set()
            if self._proc is not None and self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        with self._lock:
            self.stop.set()
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()


class NumberedProducer(Client):
    kind = "numbered"

    def __init__(self, bootstrap: str, interval_s: float, log_dir: Path) -> None:
        super().__init__("numbered-producer", bootstrap, log_dir)
        self.interval_s = interval_s
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in range(NUMBERED_PARTITIONS)}
        self.failed: list[str] = []
        self.unflushed = 0

    def args(self) -> list[str]:
        return [str(self.interval_s), str((self.children - 1) * RANGE)]

    def on_line(self, word: str, rest: str) -> None:
        if word == "ack":
            p, o, v = (int(x) for x in rest.split())
            self.acked[p].append((o, v))
        elif word == "fail":
            self.failed.append(rest)
        elif word == "unflushed":
            self.unflushed = int(rest)

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())


class KeyedProducer(Client):
    kind = "keyed"

    def __init__(self, bootstrap: str, interval_s: float, log_dir: Path) -> None:
        super().__init__("keyed-producer", bootstrap, log_dir)
        self.interval_s = interval_s
        self.last: dict[bytes, int] = {}
        self.sent_values: set[int] = set()
        self.acked = 0
        self.failed: list[str] = []
        self.unflushed = 0

    def args(self) -> list[str]:
        return [str(self.interval_s), str((self.children - 1) * RANGE)]

    def on_line(self, word: str, rest: str) -> None:
        if word == "sent":
            self.sent_values.add(int(rest))
        elif word == "ack":
            key, value = rest.split()
            self.acked += 1
            # acks of one key arrive in order (one partition, idempotent producer)
            if int(value) > self.last.get(key.encode(), -1):
                self.last[key.encode()] = int(value)
        elif word == "fail":
            self.failed.append(rest)
        elif word == "unflushed":
            self.unflushed = int(rest)


class TxnProducer(Client):
    kind = "txn"

    def __init__(self, bootstrap: str, interval_s: float, seed: int, log_dir: Path) -> None:
        super().__init__("txn-producer", bootstrap, log_dir)
        self.interval_s = interval_s
        self.txn_id = f"chaos-txn-{seed}"
        self.committed: set[int] = set()
        self.aborted: set[int] = set()
        self.unknown: set[int] = set()
        self.errors: list[str] = []
        self.begun = 0
        self._open: int | None = None

    def args(self) -> list[str]:
        return [str(self.interval_s), self.txn_id, str(self.begun + 1)]

    def on_line(self, word: str, rest: str) -> None:
        if word == "begin":
            self.begun = self._open = int(rest)
            return
        txn = int(rest.split()[0])
        {"commit": self.committed, "abort": self.aborted, "unknown": self.unknown}[word].add(txn)
        if word == "unknown":
            self.errors.append(rest)
        self._open = None

    def on_death(self) -> None:
        if self._open is not None:
            self.unknown.add(self._open)
            self._open = None


class GroupConsumer(Client):
    kind = "group"

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        super().__init__("group-consumer", bootstrap, log_dir)
        self.commits: list[dict[int, int]] = []

    def on_line(self, word: str, rest: str) -> None:
        if word == "commit":
            self.commits.append({int(k): v for k, v in json.loads(rest).items()})


class OffsetWatcher(Client):
    kind = "watch"

    def __init__(self, bootstrap: str, log_dir: Path) -> None:
        super().__init__("offset-watcher", bootstrap, log_dir)
        self.readings: list[dict[int, int]] = []

    def on_line(self, word: str, rest: str) -> None:
        if word == "reading":
            self.readings.append({int(k): v for k, v in json.loads(rest).items()})

    def read(self) -> dict[int, int] | None:
        """One reading from this process (after the run, for the check)."""
        from confluent_kafka.admin import AdminClient

        return committed_offsets(AdminClient({"bootstrap.servers": self.bootstrap}))


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
