"""The host's wall clock stepped back and forward under a running broker.

The broker runs with tests/integration/clock_shift.c preloaded: its wall clock
(clock_gettime(CLOCK_REALTIME), gettimeofday, time) is shifted by the seconds
written to a file, its monotonic clock is not, as when an operator or NTP steps
a host's clock. The clients (this process) keep the true time.

What must hold (odradek/clock.py says which clock each use reads):
- a step back: produce is still accepted, LogAppendTime follows the broker's
  clock, every .timeindex stays strictly increasing (a segment indexes its max
  timestamp so far, as Kafka does), and retention deletes nothing early;
- a step forward past retention.ms: closed segments whose largest timestamp is
  now older than retention.ms are deleted. That is Kafka's rule (retention
  compares the segment's largest record timestamp with the wall clock), kept on
  purpose: records stamped by clients carry their own clocks, and retention
  cannot tell a stepped broker clock from a real hour passing;
- a transaction or a group session does not time out because of a step: the
  coordinators measure durations on the monotonic clock.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import (
    Out,
    ck_common,
    ck_consume,
    ck_produce,
    create_topic,
    wait_until,
    watermarks,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

SOURCE = Path(__file__).with_name("clock_shift.c")
ONE_PER_BATCH = {"linger.ms": 0, "batch.num.messages": 1, "compression.type": "none",
                 "acks": "all"}
HOUR_S = 3600


@pytest.fixture(scope="module")
def clock_shift_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the clock-shift library")
    out = tmp_path_factory.mktemp("clock_shift") / "clock_shift.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE), "-ldl"],
                   check=True, capture_output=True, timeout=120)
    return out


class ShiftedBroker:
    """A broker whose wall clock the test steps."""

    def __init__(self, lib: Path, tmp_path: Path, overrides: dict[str, object]) -> None:
        self.shift_file = tmp_path / "clock_shift"
        self.set_shift(0)
        self.proc = BrokerProcess(
            overrides={"log.retention.check.interval.ms": 200, **overrides},
            data_dir=tmp_path / "data",
            env={"LD_PRELOAD": str(lib), "CLOCK_SHIFT_FILE": str(self.shift_file)})
        self.proc.start()

    def set_shift(self, seconds: int) -> None:
        tmp = self.shift_file.with_suffix(".tmp")
        tmp.write_text(f"{seconds}\n")
        tmp.replace(self.shift_file)

    def broker_clock_ms(self, topic: str) -> int:
        """The broker's wall clock, read through LogAppendTime: one record in."""
        producer = Producer({**ck_common(self.proc.bootstrap), **ONE_PER_BATCH})
        stamps: list[int] = []
        producer.produce(topic, b"clock", partition=0,
                         on_delivery=lambda err, msg: stamps.append(msg.timestamp()[1]))
        assert producer.flush(30) == 0
        return stamps[0]


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    entries = [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - 11, 12)]
    return [(ts, off) for ts, off in entries if ts > 0 or off > 0]


def assert_time_indexes_increase(d: Path) -> int:
    count = 0
    for path in sorted(d.glob("*.timeindex")):
        entries = time_index_entries(path)
        stamps = [ts for ts, _ in entries]
        assert stamps == sorted(set(stamps)), (path.name, entries)
        count += len(entries)
    return count


def test_step_back_keeps_produce_time_index_and_retention(clock_shift_lib, tmp_path):
    broker = ShiftedBroker(clock_shift_lib, tmp_path, {"log.index.interval.bytes": 1})
    bootstrap = broker.proc.bootstrap
    kept = f"append-time-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, kept, 1, config={
        "message.timestamp.type": "LogAppendTime", "segment.bytes": "2048",
        "retention.ms": "600000", "file.delete.delay.ms": "100"})
    ck_produce(bootstrap, kept, [Out(value=b"before%03d" % i + b"." * 150, partition=0)
                                 for i in range(30)], **ONE_PER_BATCH)
    before_ms = broker.broker_clock_ms(kept)
    broker.set_shift(-HOUR_S)
    # The step reaches the broker within 100 ms; read the clock until it shows.
    wait_until(lambda: broker.broker_clock_ms(kept) < before_ms - 3_000_000, 30,
               desc="the broker's clock stepped back an hour")
    ck_produce(bootstrap, kept, [Out(value=b"after%03d" % i + b"." * 150, partition=0)
                                 for i in range(30)], **ONE_PER_BATCH)

    # A topic of client timestamps 90 minutes old: an hour and a half past its
    # retention.ms by the true clock, half an hour by the broker's. Its deletion
    # shows the retention task ran on the stepped clock.
    probe = f"old-records-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, probe, 1, config={
        "segment.bytes": "1024", "retention.ms": "60000", "file.delete.delay.ms": "100"})
    old_ms = int(time.time() * 1000) - 90 * 60 * 1000
    ck_produce(bootstrap, probe, [Out(value=b"x" * 200, partition=0, timestamp=old_ms)
                                  for _ in range(20)], **ONE_PER_BATCH)
    wait_until(lambda: watermarks(bootstrap, probe, 0)[0] > 0, 30,
               desc="retention ran after the step")
    # Give retention a few more passes over the kept topic, measured by more
    # deletions of the probe topic.
    probe_low = watermarks(bootstrap, probe, 0)[0]
    ck_produce(bootstrap, probe, [Out(value=b"x" * 200, partition=0, timestamp=old_ms)
                                  for _ in range(20)], **ONE_PER_BATCH)
    wait_until(lambda: watermarks(bootstrap, probe, 0)[0] > probe_low, 30,
               desc="a later retention pass")

    low, high = watermarks(bootstrap, kept, 0)
    assert low == 0, "retention deleted records early after a step back"
    got = ck_consume(bootstrap, kept, high)
    assert [r.offset for r in got] == list(range(high))
    stamps = [r.timestamp or 0 for r in got]
    before = [r.timestamp or 0 for r in got if (r.value or b"").startswith(b"before")]
    after = [r.timestamp or 0 for r in got if (r.value or b"").startswith(b"after")]
    assert len(before) == len(after) == 30
    # LogAppendTime follows the broker's clock, an hour back after the step.
    assert max(after) < min(before) - 3_000_000
    entries = assert_time_indexes_increase(tmp_path / "data" / f"{kept}-0")
    assert entries > 0
    # ListOffsets by time: the first offset whose timestamp is at or after.
    consumer = Consumer({**ck_common(bootstrap), "group.id": uuid.uuid4().hex})
    try:
        found = consumer.offsets_for_times([TopicPartition(kept, 0, min(before))], 30)
        assert found[0].offset == 0
        found = consumer.offsets_for_times([TopicPartition(kept, 0, max(stamps) + 1)], 30)
        assert found[0].offset == -1  # none at or after it: the end
    finally:
        consumer.close()
    broker.proc.close()


def test_step_forward_past_retention_deletes_by_kafkas_rule(clock_shift_lib, tmp_path):
    broker = ShiftedBroker(clock_shift_lib, tmp_path, {})
    bootstrap = broker.proc.bootstrap
    topic = f"append-time-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1, config={
        "message.timestamp.type": "LogAppendTime", "segment.bytes": "2048",
        "retention.ms": "1800000", "file.delete.delay.ms": "100"})
    ck_produce(bootstrap, topic, [Out(value=b"r%03d" % i + b"." * 150, partition=0)
                                  for i in range(40)], **ONE_PER_BATCH)
    d = tmp_path / "data" / f"{topic}-0"
    segments = sorted(d.glob("*.log"))
    assert len(segments) >= 3
    assert watermarks(bootstrap, topic, 0) == (0, 40)
    broker.set_shift(HOUR_S)
    # An hour on, every closed segment is past its 30-minute retention: deleted,
    # as Kafka would. The active segment stays (odradek never deletes it).
    active_base = int(segments[-1].name[:20])
    wait_until(lambda: watermarks(bootstrap, topic, 0)[0] == active_base, 30,
               desc="closed segments deleted by retention")
    wait_until(lambda: sorted(p.name for p in d.glob("*.log")) == [segments[-1].name], 30,
               desc="deleted files removed")
    # Produce still works, stamped an hour on.
    stamp = broker.broker_clock_ms(topic)
    assert stamp > int(time.time() * 1000) + 3_000_000
    assert watermarks(bootstrap, topic, 0) == (active_base, 41)
    broker.proc.close()


def test_transaction_and_session_survive_clock_steps(clock_shift_lib, tmp_path):
    broker = ShiftedBroker(clock_shift_lib, tmp_path, {
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1})
    bootstrap = broker.proc.bootstrap
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    # A group member with a 10 s session, polling throughout.
    member = Consumer({**ck_common(bootstrap), "group.id": f"g-{uuid.uuid4().hex[:8]}",
                       "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    assigned: list[list[int]] = []
    member.subscribe([topic], on_assign=lambda c, ps: assigned.append([p.partition for p in ps]))
    wait_until(lambda: (member.poll(0.2), bool(assigned))[1], 60, desc="member assigned")

    long_txn = Producer({**ck_common(bootstrap), "transactional.id": f"long-{uuid.uuid4().hex}",
                         "transaction.timeout.ms": 60000})
    long_txn.init_transactions(30)
    long_txn.begin_transaction()
    for i in range(10):
        long_txn.produce(topic, b"v%d" % i, partition=0)
    assert long_txn.flush(30) == 0

    for shift in (2 * HOUR_S, -2 * HOUR_S):
        broker.set_shift(shift)
        # A transaction with a 2 s timeout, begun after the step: the coordinator
        # aborts it once 2 s have really passed, which shows its timer ran on the
        # stepped clock meanwhile.
        tid = f"short-{uuid.uuid4().hex}"
        short = Producer({**ck_common(bootstrap), "transactional.id": tid,
                          "transaction.timeout.ms": 2000, "socket.timeout.ms": 2000,
                          "message.timeout.ms": 2000})
        short.init_transactions(30)
        short.begin_transaction()
        short.produce(topic, b"short", partition=0)
        assert short.flush(30) == 0
        line = f"aborting transaction of {tid!r}"
        wait_until(lambda line=line: (member.poll(0.1), line in broker.proc.log_tail())[1], 60,
                   desc="the short transaction timed out")

    long_txn.commit_transaction(30)
    got: list[bytes] = []
    wait_until(lambda: (got.extend(m.value() for m in [member.poll(0.2)]
                                   if m is not None and not m.error()), len(got) >= 10)[1],
               60, desc="the long transaction's records")
    assert got == [b"v%d" % i for i in range(10)]
    assert assigned == [[0]], "the member was never rebalanced out"
    member.close()
    broker.proc.close()
