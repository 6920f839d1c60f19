"""The exactly-once streaming sink on odradek's transactions.

- The driver's commit/abort are no-ops that may be called again; the task-side
  marker check skips batches already committed (in-process, no Spark job).
- One chain of real driver processes (tests/spark/eo_driver.py, `local[2,3]`)
  over one input: the driver is killed with kill -9 as the tasks of a batch
  start, between the task commits of a batch, and after all its tasks
  committed (before Spark's commit log); task attempts fail after and before their
  commit; the broker is killed and restarted while a task holds an open
  transaction. Each run restarts from the checkpoint; the last restart runs in
  this process's session. The output, read with read_committed, holds every
  input row exactly once.

The chain costs three driver start-ups (a JVM each): it is one test on purpose.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from odradek.spark.options import parse_sink_options
from odradek.spark.writer import (
    CRASH_ENV,
    PAUSE_DIR_ENV,
    SinkCommitMessage,
    batch_committed,
    ensure_marker_topic,
    transactional_id,
    write_transactional,
)
from tests.integration.broker_proc import REPO_ROOT, BrokerProcess
from tests.spark.conftest import SPARK_TIMEOUT_S
from tests.spark.helpers import committed_records, create_topic, produce

CHILD_TIMEOUT_S = 240
PARTITIONS = 2
PER_PARTITION = 40
MAX_PER_TRIGGER = 10  # 5 + 5 rows a batch: batches 0..7


def committed_values(bootstrap: str, topic: str) -> list[bytes | None]:
    """Values of partition 0 of `topic` up to its last stable offset, read_committed."""
    return [v for _, _, v in committed_records(bootstrap, topic)]


# --------------------------------------------------------------------------
# (c) commit / abort again, and the task-side marker check
# --------------------------------------------------------------------------


class _FakeTaskContext:
    def __init__(self, query_id: str, batch_id: int, partition: int) -> None:
        self.props = {"sql.streaming.queryId": query_id, "streaming.sql.batchId": str(batch_id)}
        self.partition = partition

    def getLocalProperty(self, key: str) -> str | None:
        return self.props.get(key)

    def partitionId(self) -> int:
        return self.partition

    def attemptNumber(self) -> int:
        return 0


def test_commit_abort_are_noops_and_tasks_skip_committed_batches(
    spark_broker: Any, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import confluent_kafka
    import pyarrow as pa
    import pyspark

    from odradek.spark.writer import OdradekStreamWriter

    bs = spark_broker.bootstrap
    create_topic(bs, topic_name, 1)
    opts = parse_sink_options({"kafka.bootstrap.servers": bs, "topic": topic_name})
    ensure_marker_topic(opts)
    query_id = f"q-{topic_name}"

    def rows(*values: str) -> Any:
        return iter([pa.RecordBatch.from_pydict(
            {"key": [v.encode() for v in values], "value": [v.encode() for v in values]},
            schema=pa.schema([("key", pa.binary()), ("value", pa.binary())]),
        )])

    def task(batch_id: int, partition: int, *values: str) -> SinkCommitMessage:
        ctx = _FakeTaskContext(query_id, batch_id, partition)
        monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: ctx))
        drained: list[Any] = []
        it = rows(*values)

        def counting() -> Any:
            for b in it:
                drained.append(b)
                yield b

        msg = write_transactional(counting(), opts)
        assert drained, "the task must consume its input, written or skipped"
        return msg

    assert task(5, 0, "a", "b", "c") == SinkCommitMessage(0, 3)
    # Spark replays batch 5 (restart) and, wrongly, an older batch: both skipped.
    assert task(5, 0, "a", "b", "c") == SinkCommitMessage(0, 0, skipped=True)
    assert task(4, 0, "z") == SinkCommitMessage(0, 0, skipped=True)
    # Another task partition of batch 5 has its own marker; the next batch writes.
    assert task(5, 1, "d") == SinkCommitMessage(1, 1)
    assert task(6, 0, "e", "f") == SinkCommitMessage(0, 2)

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bs, "group.id": transactional_id(query_id, 0),
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })
    try:
        assert [batch_committed(consumer, b) for b in (0, 5, 6, 7)] == [True, True, True, False]
    finally:
        consumer.close()

    assert Counter(committed_values(bs, topic_name)) == Counter(
        {b"a": 1, b"b": 1, b"c": 1, b"d": 1, b"e": 1, b"f": 1}
    )

    # The driver decides nothing: commit again and abort after commit touch no broker.
    def no_client(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the driver's commit/abort must not talk to the brokers")

    with monkeypatch.context() as m:
        for name in ("Producer", "Consumer"):
            m.setattr(confluent_kafka, name, no_client)
        writer = object.__new__(OdradekStreamWriter)
        writer.opts, writer.exactly_once = opts, True
        msgs: list[Any] = [SinkCommitMessage(0, 3), SinkCommitMessage(1, 1)]
        writer.commit(msgs, 5)
        writer.commit(msgs, 5)
        writer.abort(msgs, 5)
        writer.abort([None, SinkCommitMessage(0, 0, skipped=True)], 5)
        writer.commit([], 6)
    # ... and changed nothing.
    assert Counter(committed_values(bs, topic_name)) == Counter(
        {b"a": 1, b"b": 1, b"c": 1, b"d": 1, b"e": 1, b"f": 1}
    )



# --------------------------------------------------------------------------
# (a), (b), (d): real drivers killed, failing tasks, a broker restart
# --------------------------------------------------------------------------


def _run_driver(
    log_path: Path, bootstrap: str, src: str, dst: str, checkpoint: Path, *,
    master: str = "local[2]", env: dict[str, str] | None = None,
    extra: list[str] | None = None, on_poll: Any = None,
) -> tuple[int, str]:
    cmd = [
        sys.executable, "-m", "tests.spark.eo_driver", "--bootstrap", bootstrap,
        "--src", src, "--dst", dst, "--checkpoint", str(checkpoint), "--master", master,
        "--max-offsets", str(MAX_PER_TRIGGER), *(extra or []),
    ]
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    start = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log:
        log.write(f"\n===== {' '.join(cmd)} env {env}\n".encode())
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=full_env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        while proc.poll() is None:
            if on_poll is not None:
                on_poll()
            assert time.monotonic() < deadline, f"driver did not end in {CHILD_TIMEOUT_S} s"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    with open(log_path, "rb") as f:
        f.seek(start)
        out = f.read().decode(errors="replace")
    return proc.returncode, out


@pytest.mark.timeout(600)  # three driver start-ups: ~3 min on a loaded 2-core box
def test_exactly_once_under_driver_kills_task_failures_and_broker_restart(
    spark: Any, spark_broker: BrokerProcess, tmp_path: Path, topic_name: str
) -> None:
    broker = spark_broker
    bs = broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, src, PARTITIONS)
    create_topic(bs, dst, 1)
    produce(bs, src, (
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), None)
        for p in range(PARTITIONS) for i in range(PER_PARTITION)
    ))
    expected = Counter(f"v{p}-{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION))
    checkpoint = tmp_path / "checkpoint"
    log_path = tmp_path / "drivers.log"
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    restarted: list[int] = []

    def restart_broker_when_paused() -> None:
        for flag in pause_dir.glob("paused-*"):
            broker.restart(hard=True)  # kill -9, same port and data
            restarted.append(int(flag.name.split("-")[1]))
            flag.unlink()

    # Three drivers, each killed with kill -9 at a different moment of a batch;
    # each restarts from the checkpoint and first replays the batch Spark had
    # not committed. They run local[2,3] (a task is tried up to 3 times) and
    # some of their task attempts fail on purpose; in the second, the broker is
    # killed and restarted while a task holds an open transaction.
    # Last item: rows visible to read_committed after the kill (5 + 5 rows a batch).
    runs: list[tuple[str, list[str], tuple[int, int]]] = [
        # batch 0: first attempts fail after commit_transaction (retries skip);
        # batch 1: first attempts fail with their transaction open (retries write);
        # batch 2: killed as its tasks start: batches 0 and 1 are out, nothing of 2
        ("fail-after-commit:0,fail-before-commit:1,task-start:2", [], (20, 20)),
        # batch 2 again: the broker restarts (kill -9) while task 0 has an open
        # transaction; batch 3: task 0 commits, the driver is killed while task 1's
        # transaction is open (it holds back the last stable offset, so task 0's
        # rows may not be visible yet)
        ("pause-before-commit:2,between-commits:3", [], (30, 35)),
        # batch 3 again (task 0 finds its marker), then batch 4: killed when all
        # its tasks committed, before Spark's commit log
        ("after-tasks:4", [], (50, 50)),
    ]
    for points, extra, (low, high) in runs:
        t0 = time.monotonic()
        rc, out = _run_driver(
            log_path, bs, src, dst, checkpoint, master="local[2,3]",
            env={CRASH_ENV: points, PAUSE_DIR_ENV: str(pause_dir)}, extra=extra,
            on_poll=restart_broker_when_paused,
        )
        marks = sorted(
            (f.stat().st_mtime, f"{f.parent.name}/{f.name}")
            for d in ("offsets", "commits") for f in (checkpoint / d).glob("[0-9]*")
        )
        started = time.time() - (time.monotonic() - t0)
        print(
            f"driver {points or extra}: rc {rc} after {time.monotonic() - t0:.1f} s; "
            + " ".join(line.strip() for line in out.splitlines() if line.startswith("EO-SESSION"))
            + "; " + " ".join(f"{n}@{m - started:.0f}s" for m, n in marks if m >= started)
        )
        assert rc == -signal.SIGKILL, f"driver not killed at {points} {extra}: rc {rc}\n{out[-3000:]}"
        for point in points.split(","):
            if point.startswith("fail-"):
                assert f"{point} partition 0: failing attempt 0" in out, f"{point} did not fail a task"
        seen = Counter(committed_values(bs, dst))
        assert not [v for v, n in seen.items() if n > 1], f"duplicates after {points} {extra}"
        assert set(seen) <= set(expected)
        # The kill came where it should: the committed batches are there, no more.
        assert low <= len(seen) <= high, (points, extra, len(seen))
    assert restarted == [2], "the broker was not restarted during batch 2"

    # The last restart runs in this process's session and reads everything
    # (batch 4 again: every task finds its marker; then batches 5-7).
    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", dst)
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(SPARK_TIMEOUT_S), "availableNow query did not finish"
    assert q.exception() is None, q.exception()

    back = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", dst)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("value")
        .collect()
    )
    got = Counter(bytes(r.value) for r in back)
    assert got == expected, (
        f"missing {sorted((expected - got).elements())[:10]}, "
        f"extra {sorted((got - expected).elements())[:10]}"
    )


def _all_values(bootstrap: str, topic: str) -> Counter[bytes]:
    """Every data record of partition 0 of `topic`, read_uncommitted (aborted too)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "all-values",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, 0)])
        got: Counter[bytes] = Counter()
        deadline = time.monotonic() + 60
        while c.position([TopicPartition(topic, 0)])[0].offset < high:
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                got[m.value()] += 1
            assert time.monotonic() < deadline, f"read_uncommitted of {topic} stuck below {high}"
        return got
    finally:
        c.close()


@pytest.mark.timeout(400)  # one driver start-up
def test_exactly_once_when_a_python_worker_is_killed_with_its_transaction_open(
    spark_broker: BrokerProcess, tmp_path: Path, topic_name: str
) -> None:
    """kill -9 of the Python worker running a sink task, its rows acknowledged in
    the log and its transaction open; the driver lives, Spark retries the task,
    the retry's InitProducerId aborts the open transaction: read_committed holds
    every row once, the log holds the killed attempt's rows as aborted."""
    bs = spark_broker.bootstrap
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bs, src, PARTITIONS)
    create_topic(bs, dst, 1)
    per_partition = 20
    produce(bs, src, (
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), None)
        for p in range(PARTITIONS) for i in range(per_partition)
    ))
    expected = Counter(f"v{p}-{i}".encode() for p in range(PARTITIONS) for i in range(per_partition))
    rc, out = _run_driver(tmp_path / "driver.log", bs, src, dst, tmp_path / "checkpoint",
                          master="local[2,3]", env={CRASH_ENV: "kill-worker-before-commit:1"})
    assert "kill-worker-before-commit:1: kill -9 of this Python worker" in out, out[-3000:]
    assert rc == 0 and "EO-DONE" in out, f"rc {rc}\n{out[-3000:]}"
    assert Counter(committed_values(bs, dst)) == expected
    # The killed attempt's rows are in the log, aborted: batch 1 of task partition 0
    # (5 rows of input partition 0) appears once more to read_uncommitted.
    extra = _all_values(bs, dst) - expected
    assert sum(extra.values()) == MAX_PER_TRIGGER // PARTITIONS, extra
    assert all(v.startswith(b"v") for v in extra), extra
