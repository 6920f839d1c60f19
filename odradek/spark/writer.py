"""The sink: batch writer and streaming writer (at-least-once or exactly-once).

Theory of operation
-------------------
Each write task gets Arrow record batches of the input rows and produces one
Kafka record per row, by one of two paths (`producerPath`): `batch` (default
through `auto`) encodes the Arrow columns into record batches in bulk and
sends them with odradek's own idempotent/transactional producer
(bulk_writer.py, bulk_producer.py); `client` produces row by row with a
confluent-kafka Producer (the path before issue 17, and what `auto` takes when
a kafka.* option only librdkafka understands is set). Columns: `value` (required, may
be null), optional `key`, `headers`, `topic` (unless the `topic` option is
set, which wins, as in Spark) and `partition` (else librdkafka's partitioner).
The task returns a `SinkCommitMessage` only after every record it produced is
acknowledged (flush, then no delivery error); any delivery error fails it.

Delivery guarantees (`docs/spark.md` has the whole argument):

- batch writes and `deliveryGuarantee=at-least-once`: idempotent producer
  (acks=all, no duplicates from the producer's own retries). A task retried
  by Spark, or a micro-batch replayed after a restart, writes its rows again.
- exactly-once (streaming, `deliveryGuarantee=exactly-once`, or `auto` when
  the broker serves the transaction APIs): every task writes its rows in one
  Kafka transaction under `transactional.id = odradek-spark-<queryId>-<task
  partition id>`, and the same transaction commits the marker "batch <id> of
  task <partition> is done" as a consumer-group offset
  (`send_offsets_to_transaction`). Before writing, the task reads that marker
  (after `init_transactions`, which fences older attempts and settles their
  open transaction); if its batch is already there it writes nothing. So a
  batch's output for a task partition becomes visible to read_committed
  readers exactly once, whatever Spark replays. The driver's `commit` and
  `abort` have nothing left to decide: both are idempotent no-ops with a log line.

Test hook: `ODRADEK_SPARK_TEST_CRASH_AT=<point>:<batch>[,...]` makes the
exactly-once path kill the driver (`kill -9` of the process group named by
`ODRADEK_SPARK_TEST_CRASH_PGID` and of the worker's own group), fail a task
attempt, or pause a task at a given moment of a given micro-batch
(`crash_hook`; the points are listed in docs/spark.md). Unset, it costs one
environment look-up per task.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.spark.broker import broker_supports_transactions, check_login, client_conf
from odradek.spark.options import OdradekOptionError, SinkOptions

log = logging.getLogger("odradek.spark")

FLUSH_TIMEOUT_S = 120.0
TXN_TIMEOUT_S = 60.0
# Where the exactly-once markers live: group odradek-spark-<queryId>-<partition>,
# offset of this topic's partition 0 = last committed batch id + 1.
MARKER_TOPIC = "__odradek_spark_sink_commits"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

HEADERS_TYPE = ArrayType(
    StructType().add("key", StringType(), True).add("value", BinaryType(), True), True
)


@dataclass(frozen=True)
class SinkCommitMessage(WriterCommitMessage):
    partition_id: int
    rows: int
    skipped: bool = False  # exactly-once: this batch was already committed for the partition


def check_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery: the columns the sink uses, by name and type."""
    fields = {f.name.lower(): f for f in schema.fields}

    def bad(col: str, want: str) -> OdradekOptionError:
        return OdradekOptionError(
            f"format(\"odradek\") sink: column '{col}' must be {want}, "
            f"got {fields[col].dataType.simpleString()}"
        )

    if "value" not in fields:
        raise OdradekOptionError("format(\"odradek\") sink: required column 'value' is missing")
    for col in ("key", "value"):
        if col in fields and not isinstance(fields[col].dataType, (StringType, BinaryType)):
            raise bad(col, "string or binary")
    if opts.topic is None and "topic" not in fields:
        raise OdradekOptionError(
            "format(\"odradek\") sink: no topic: set option 'topic' or add a 'topic' column"
        )
    if "topic" in fields and not isinstance(fields["topic"].dataType, StringType):
        raise bad("topic", "string")
    if "partition" in fields and not isinstance(fields["partition"].dataType, IntegerType):
        raise bad("partition", "int")
    if "headers" in fields:
        t = fields["headers"].dataType
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
            and isinstance(t.elementType.fields[0].dataType, StringType)
            and isinstance(t.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise bad("headers", "array<struct<key:string,value:binary>>")


def producer_conf(opts: SinkOptions, **extra: Any) -> dict[str, Any]:
    # acks=all with the idempotent producer unless kafka.acks=0/1 (batch writes and
    # at-least-once only, checked by parse_sink_options): then no idempotence, as the
    # Java client does when acks is not all
    return {
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 500_000,
        # Delivery reports only for failures: produce_batches only collects errors,
        # and a report per record is a Python callback per row in flush().
        "delivery.report.only.error": True,
        **client_conf(opts.bootstrap_servers, opts.kafka),
        "enable.idempotence": opts.acks == "all",
        "acks": opts.acks,
        **extra,
    }


def _columns(batch: Any, opts: SinkOptions) -> tuple[int, dict[str, list[Any]]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    names = {n.lower(): n for n in batch.schema.names}
    out: dict[str, list[Any]] = {}
    for col in ("key", "value"):
        if col in names:
            arr = batch.column(names[col])
            if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                arr = pc.cast(arr, pa.binary())
            out[col] = arr.to_pylist()
    if opts.topic is None:
        out["topic"] = batch.column(names["topic"]).to_pylist()
    if "partition" in names:
        out["partition"] = batch.column(names["partition"]).to_pylist()
    if "headers" in names:
        out["headers"] = [
            [(h["key"], h["value"]) for h in hs] if hs else None
            for hs in batch.column(names["headers"]).to_pylist()
        ]
    return batch.num_rows, out


def produce_batches(producer: Any, batches: Iterator[Any], opts: SinkOptions) -> int:
    """Produce every row; returns the row count. Delivery errors raise at the end."""
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    rows = 0
    for batch in batches:
        n, cols = _columns(batch, opts)
        keys = cols.get("key")
        values = cols["value"]
        topics = cols.get("topic")
        parts = cols.get("partition")
        headers = cols.get("headers")
        if opts.topic and parts is None and headers is None:  # the common case, lean
            rows += _produce_plain(producer, opts.topic, keys, values, on_delivery, errors)
            if errors:
                break
            continue
        for i in range(n):
            topic = opts.topic or (topics[i] if topics else None)
            if topic is None:
                raise ValueError(
                    "format(\"odradek\") sink: null topic in the data; "
                    "set option 'topic' or fill the 'topic' column"
                )
            kwargs: dict[str, Any] = {"on_delivery": on_delivery}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers is not None and headers[i]:
                kwargs["headers"] = headers[i]
            while True:
                try:
                    producer.produce(topic, values[i], **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            if errors:
                break
        producer.poll(0)
        rows += n
        if errors:
            break
    left = producer.flush(FLUSH_TIMEOUT_S)
    if errors:
        raise RuntimeError(f"format(\"odradek\") sink: delivery failed: {errors}")
    if left:
        raise TimeoutError(f"format(\"odradek\") sink: {left} records unacknowledged after flush")
    return rows


def _produce_plain(producer: Any, topic: str, keys: list[Any] | None, values: list[Any],
                   on_delivery: Any, errors: list[str]) -> int:
    """Rows with a value and maybe a key, to one topic, partitioned by librdkafka."""
    produce = producer.produce
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        while True:
            try:
                produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if errors:
            return i + 1
    producer.poll(0)
    return len(values)


def _task_partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        check_login(opts.bootstrap_servers, opts.kafka)  # on the driver
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_at_least_once(iterator, self.opts)


def write_at_least_once(iterator: Iterator[Any], opts: SinkOptions) -> SinkCommitMessage:
    if opts.producer_path == "batch":
        from odradek.spark.bulk_writer import new_producer, produce_arrow

        bulk = new_producer(opts)
        try:
            bulk.init()
            rows = produce_arrow(bulk, iterator, opts)
        finally:
            bulk.close()
        return SinkCommitMessage(_task_partition_id(), rows)
    from confluent_kafka import Producer

    producer = Producer(producer_conf(opts))
    rows = produce_batches(producer, iterator, opts)
    return SinkCommitMessage(_task_partition_id(), rows)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink. `exactly_once` is decided on the driver when the query starts."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.exactly_once = decide_exactly_once(opts)

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        if self.exactly_once:
            if self.opts.producer_path == "batch":
                return write_transactional_bulk(iterator, self.opts)
            return write_transactional(iterator, self.opts)
        return write_at_least_once(iterator, self.opts)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Nothing to decide: every task committed its own transaction with its marker.
        crash_hook("driver-commit", batchId)
        rows = sum(m.rows for m in messages if isinstance(m, SinkCommitMessage))
        log.info("odradek sink: batch %d done, %d rows", batchId, rows)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # At-least-once: what was written stays, the replay writes it again.
        # Exactly-once: each task's transaction is committed or aborted by the
        # task itself; a replay skips the task partitions whose marker is there.
        log.warning("odradek sink: batch %d aborted; it is replayed on restart", batchId)


def decide_exactly_once(opts: SinkOptions) -> bool:
    check_login(opts.bootstrap_servers, opts.kafka)
    if opts.delivery_guarantee == "at-least-once":
        return False
    if opts.acks != "all":  # auto would choose exactly-once, which needs acks=all
        raise OdradekOptionError(
            f"format(\"odradek\") option 'kafka.acks': acks={opts.acks} writes without the "
            "idempotent producer; a streaming write with it needs "
            "deliveryGuarantee=at-least-once (exactly-once needs acks=all)")
    supported = broker_supports_transactions(opts.bootstrap_servers, opts.kafka)
    if opts.delivery_guarantee == "exactly-once" and not supported:
        raise OdradekOptionError(
            "format(\"odradek\") option 'deliveryGuarantee': exactly-once needs a broker "
            "with transactions, and the one at kafka.bootstrap.servers does not serve them "
            "yet; use deliveryGuarantee=at-least-once (or auto)"
        )
    if supported:
        ensure_marker_topic(opts)
    else:
        log.warning(
            "odradek sink: the broker does not serve transactions; streaming sink is "
            "at-least-once (deliveryGuarantee=auto)"
        )
    return supported


def ensure_marker_topic(opts: SinkOptions) -> None:
    """The exactly-once markers are offsets of MARKER_TOPIC-0; create the topic once."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(opts.bootstrap_servers, opts.kafka))
    futures = admin.create_topics([NewTopic(MARKER_TOPIC, 1)], request_timeout=TXN_TIMEOUT_S)
    try:
        futures[MARKER_TOPIC].result(TXN_TIMEOUT_S)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def transactional_id(query_id: str, partition_id: int) -> str:
    return f"odradek-spark-{query_id}-{partition_id}"


def write_transactional(iterator: Iterator[Any], opts: SinkOptions) -> SinkCommitMessage:
    """One task's rows of one micro-batch in one transaction, with its marker."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    query_id, batch_id, pid, attempt = _task_batch()
    tid = transactional_id(query_id, pid)
    group = tid
    crash_hook("task-start", batch_id, pid, attempt)

    producer = Producer(producer_conf(opts, **{"transactional.id": tid}))
    # Fences earlier attempts of this task partition and settles their open
    # transaction (a prepared commit completes, anything else aborts).
    producer.init_transactions(TXN_TIMEOUT_S)
    consumer = Consumer(
        {
            **client_conf(opts.bootstrap_servers, opts.kafka),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # OffsetFetch with require_stable
        }
    )
    try:
        if batch_committed(consumer, batch_id):
            for _ in iterator:  # drain: Spark expects the input consumed
                pass
            log.info("odradek sink: batch %d partition %d already committed", batch_id, pid)
            return SinkCommitMessage(pid, 0, skipped=True)
        producer.begin_transaction()
        try:
            rows = produce_batches(producer, iterator, opts)
            producer.send_offsets_to_transaction(
                [TopicPartition(MARKER_TOPIC, 0, batch_id + 1)],
                consumer.consumer_group_metadata(),
                TXN_TIMEOUT_S,
            )
            crash_hook("before-commit", batch_id, pid, attempt)
            producer.commit_transaction(TXN_TIMEOUT_S)
        except BaseException:
            try:
                producer.abort_transaction(TXN_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 - fenced or already failed: the broker aborts it
                log.warning("odradek sink: abort after failure: %s", e)
            raise
        crash_hook("after-commit", batch_id, pid, attempt)
        return SinkCommitMessage(pid, rows)
    finally:
        consumer.close()


def _task_batch() -> tuple[str, int, int, int]:
    """(query id, batch id, task partition id, attempt) of this exactly-once task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    assert ctx is not None, "exactly-once write outside a Spark task"
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    batch_raw = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_raw is None:
        raise RuntimeError(
            f"format(\"odradek\") exactly-once sink: task has no {QUERY_ID_PROPERTY} / "
            f"{BATCH_ID_PROPERTY} (not a micro-batch streaming query?)"
        )
    return query_id, int(batch_raw), ctx.partitionId(), ctx.attemptNumber()


def write_transactional_bulk(iterator: Iterator[Any], opts: SinkOptions) -> SinkCommitMessage:
    """write_transactional over the bulk producer: the same transactional.id,
    marker group and steps (InitProducerId fences earlier attempts and settles
    their open transaction; the marker is read with require_stable; the rows
    and the marker commit in one transaction)."""
    from odradek.spark.bulk_producer import ProducerError
    from odradek.spark.bulk_writer import new_producer, produce_arrow

    query_id, batch_id, pid, attempt = _task_batch()
    tid = transactional_id(query_id, pid)
    crash_hook("task-start", batch_id, pid, attempt)
    producer = new_producer(opts, tid, int(TXN_TIMEOUT_S * 1000))
    try:
        producer.init()
        if producer.committed_offset(tid, MARKER_TOPIC, 0) > batch_id:
            for _ in iterator:  # drain: Spark expects the input consumed
                pass
            log.info("odradek sink: batch %d partition %d already committed", batch_id, pid)
            return SinkCommitMessage(pid, 0, skipped=True)
        producer.begin_transaction()
        try:
            rows = produce_arrow(producer, iterator, opts)
            producer.send_offsets(tid, MARKER_TOPIC, 0, batch_id + 1)
            crash_hook("before-commit", batch_id, pid, attempt)
            producer.commit_transaction()
        except BaseException:
            if producer.in_transaction:
                try:
                    producer.abort_transaction()
                except ProducerError as e:  # fenced or already failed: the broker aborts it
                    log.warning("odradek sink: abort after failure: %s", e)
            raise
        crash_hook("after-commit", batch_id, pid, attempt)
        return SinkCommitMessage(pid, rows)
    finally:
        producer.close()


def batch_committed(consumer: Any, batch_id: int) -> bool:
    """The task-side check: True if the marker of this consumer's group (one task
    partition of one query) says batch `batch_id` is already committed. The
    consumer reads with read_committed, so OffsetFetch has require_stable: a
    marker still in an open transaction is waited for, not skipped."""
    from confluent_kafka import TopicPartition

    [committed] = consumer.committed([TopicPartition(MARKER_TOPIC, 0)], timeout=TXN_TIMEOUT_S)
    if committed.error is not None:
        raise RuntimeError(f"format(\"odradek\") exactly-once sink: marker fetch failed: {committed.error}")
    # Batch ids below the committed offset are done; a negative offset means none.
    return bool(committed.offset > batch_id)


# --------------------------------------------------------------------------
# Test hook (ODRADEK_SPARK_TEST_CRASH_AT); inert unless the variable is set.
# --------------------------------------------------------------------------

CRASH_ENV = "ODRADEK_SPARK_TEST_CRASH_AT"
CRASH_PGID_ENV = "ODRADEK_SPARK_TEST_CRASH_PGID"
PAUSE_DIR_ENV = "ODRADEK_SPARK_TEST_PAUSE_DIR"
HOOK_WAIT_S = 120.0


class InjectedTaskFailure(RuntimeError):
    """A task attempt failed on purpose (ODRADEK_SPARK_TEST_CRASH_AT=fail-*)."""


def crash_hook(stage: str, batch_id: int, partition: int = 0, attempt: int = 0) -> None:
    """Called at `stage` (task-start, before-commit, after-commit, driver-commit).
    Points (`<point>:<batch>`, comma-separated):

    - task-start: every task of the batch kills the driver before it does anything;
    - between-commits: task partition 0 kills the driver right after its
      commit_transaction, while the other task partitions wait before theirs;
    - after-tasks: the driver's commit() (all tasks committed, commit log not
      yet written) kills the driver;
    - fail-before-commit / fail-after-commit: the first attempt of every task
      raises after producing (transaction open) / after commit_transaction;
    - kill-worker-before-commit: the first attempt of task partition 0 kills
      its own Python worker (SIGKILL) with its rows produced and its
      transaction open; the driver lives and Spark retries the task;
    - pause-before-commit: the first attempt of task partition 0 creates
      `$ODRADEK_SPARK_TEST_PAUSE_DIR/paused-<batch>` before its commit and waits
      until that file is removed (at most HOOK_WAIT_S).
    """
    spec = os.environ.get(CRASH_ENV)
    if not spec:
        return
    for item in spec.split(","):
        point, _, batch = item.strip().partition(":")
        if not batch or int(batch) != batch_id:
            continue
        if point == "task-start" and stage == "task-start":
            _kill_driver(f"{point}:{batch_id} partition {partition}")
        elif point == "between-commits":
            if stage == "after-commit" and partition == 0:
                _kill_driver(f"{point}:{batch_id}")
            elif stage == "before-commit" and partition != 0:
                time.sleep(HOOK_WAIT_S)  # killed meanwhile by partition 0
        elif point == "after-tasks" and stage == "driver-commit":
            _kill_driver(f"{point}:{batch_id}")
        elif point in ("fail-before-commit", "fail-after-commit") and attempt == 0:
            if stage == point[len("fail-"):]:
                _note(f"{point}:{batch_id} partition {partition}: failing attempt 0")
                raise InjectedTaskFailure(f"{point}:{batch_id} partition {partition} attempt 0")
        elif (point == "kill-worker-before-commit" and stage == "before-commit"
              and (partition, attempt) == (0, 0)):
            _note(f"{point}:{batch_id}: kill -9 of this Python worker, transaction open")
            os.kill(os.getpid(), signal.SIGKILL)
        elif point == "pause-before-commit" and stage == "before-commit" and (partition, attempt) == (0, 0):
            _note(f"{point}:{batch_id}: pausing")
            flag = os.path.join(os.environ[PAUSE_DIR_ENV], f"paused-{batch_id}")
            open(flag, "w").close()
            deadline = time.monotonic() + HOOK_WAIT_S
            while os.path.exists(flag) and time.monotonic() < deadline:
                time.sleep(0.1)


def _note(what: str) -> None:
    import sys

    print(f"odradek-spark-test-hook: {what}", file=sys.stderr, flush=True)


def _kill_driver(why: str) -> None:
    _note(f"kill -9 of the driver at {why}")
    pgid = os.environ.get(CRASH_PGID_ENV)
    if pgid:
        os.killpg(int(pgid), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)  # the Python workers' own group
