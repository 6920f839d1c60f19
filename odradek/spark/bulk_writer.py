"""The sink's bulk path (producerPath=batch): Arrow batches of a write task to
record batches (batch_encode.py), produced by odradek's own idempotent or
transactional producer (bulk_producer.py), with no Python object per row.

Arrow batches are gathered up to SEND_BYTES, then, per gathered batch: the rows of each topic (the `topic` option, else the `topic`
column; a null topic fails the task, as in Spark), a partition per row (the
`partition` column where it is set, else the Java client's default
partitioner: murmur2 of the key; rows with a null key go to one partition per
Arrow batch, round robin across batches, as the sticky partitioner spreads
them; "one Arrow batch" is one gathered batch), record batches of at most
BATCH_MAX_BYTES per partition, then one `BulkProducer.send` that returns when
every batch is acknowledged.

Partitioning differs from the client path (librdkafka's consistent_random:
CRC32 of the key) and matches Spark's Kafka sink (the Java client).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from odradek.spark.batch_encode import (
    CODECS,
    SinkColumns,
    encode_records,
    group_rows,
    key_partitions,
    now_ms,
)
from odradek.spark.bulk_producer import BulkProducer
from odradek.spark.options import SinkOptions


def new_producer(opts: SinkOptions, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60_000) -> BulkProducer:
    producer = BulkProducer(opts.bootstrap_servers, security=opts.security or None,
                            transactional_id=transactional_id, acks=opts.acks,
                            compression=CODECS[opts.compression],
                            transaction_timeout_ms=transaction_timeout_ms)
    return producer


class _Sticky:
    """The partition of null-key rows: one per Arrow batch, the next one each time."""

    def __init__(self) -> None:
        self.next = random.randrange(1 << 30)

    def take(self, partitions: int) -> int:
        self.next += 1
        return self.next % partitions


# Arrow batches are gathered up to this many bytes before they are encoded and
# sent: Spark may hand a task small batches (a streaming read's), and one Produce
# round trip per small batch would bound the task by latency.
SEND_BYTES = 4 * 1024 * 1024


def produce_arrow(producer: BulkProducer, batches: Iterator[Any], opts: SinkOptions,
                  send_bytes: int = SEND_BYTES) -> int:
    """Produce every row of every Arrow batch; returns the rows written once
    every one is acknowledged. Encoding (this thread) overlaps sending (a
    sender thread, at most SENDS_QUEUED gathered batches ahead): the task keeps
    taking its input from Spark while the broker appends the previous batch."""
    sticky = _Sticky()
    gathered: list[Any] = []
    size = 0
    sender = _Sender(producer)
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            gathered.append(batch)
            size += batch.nbytes
            if size >= send_bytes:
                sender.submit(encode_batch(producer, _concat(gathered), opts, sticky))
                gathered, size = [], 0
        if gathered:
            sender.submit(encode_batch(producer, _concat(gathered), opts, sticky))
    except BaseException:
        sender.stop(abandon=True)
        raise
    return sender.stop()


SENDS_QUEUED = 2


class _Sender:
    """One thread calling producer.send in order; its first error is raised in
    the task's thread at the next submit or at stop."""

    def __init__(self, producer: BulkProducer) -> None:
        import queue
        import threading

        self.producer = producer
        self.queue: queue.Queue[list[tuple[str, int, bytes, int, int]] | None] = queue.Queue(
            SENDS_QUEUED)
        self.error: BaseException | None = None
        self.abandon = False
        self.rows = 0
        self.thread = threading.Thread(target=self._run, name="odradek-bulk-sender",
                                       daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is not None or self.abandon:
                continue  # drain: nothing more is sent after an error
            try:
                self.rows += self.producer.send(item)
            except BaseException as e:  # noqa: BLE001 - raised again in the task's thread
                self.error = e

    def submit(self, batches: list[tuple[str, int, bytes, int, int]]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(batches)

    def stop(self, abandon: bool = False) -> int:
        self.abandon = abandon
        self.queue.put(None)
        self.thread.join()
        if self.error is not None and not abandon:
            raise self.error
        return self.rows


def _concat(batches: list[Any]) -> Any:
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def encode_batch(producer: BulkProducer, batch: Any, opts: SinkOptions,
                 sticky: _Sticky) -> list[tuple[str, int, bytes, int, int]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    names = {n.lower(): n for n in batch.schema.names}
    cols = SinkColumns.of(batch)
    row_bytes = cols.row_bytes()
    ts = now_ms()
    explicit = batch.column(names["partition"]) if "partition" in names else None
    if opts.topic is not None:
        by_topic: list[tuple[str, Any]] = [(opts.topic, None)]
    else:
        topic_col = batch.column(names["topic"])
        if topic_col.null_count:
            raise ValueError("format(\"odradek\") sink: null topic in the data; "
                             "set option 'topic' or fill the 'topic' column")
        by_topic = [(t, pc.indices_nonzero(pc.equal(topic_col, t)).cast(pa.int64()))
                    for t in pc.unique(topic_col).to_pylist()]
    out: list[tuple[str, int, bytes, int, int]] = []
    for topic, rows in by_topic:
        n = producer.num_partitions(topic)
        parts = key_partitions(cols, n)
        if explicit is not None:
            bad = pc.or_(pc.less(explicit, 0), pc.greater_equal(explicit, n))
            if pc.any(bad).as_py():
                raise ValueError(f"format(\"odradek\") sink: a partition in the data outside "
                                 f"topic {topic}'s {n} partitions")
            parts = pc.coalesce(explicit, parts)
        if rows is not None:
            parts = pc.take(parts, rows)
        parts = pc.if_else(pc.equal(parts, -1), pa.scalar(sticky.take(n), pa.int32()), parts)
        sizes = row_bytes if rows is None else pc.take(row_bytes, rows)
        for partition, positions in group_rows(parts, sizes):
            if rows is not None:
                positions = _take_rows(rows, positions)
            out.append((topic, partition, encode_records(positions, cols), len(positions), ts))
    return out


def _take_rows(rows: Any, positions: Any) -> Any:
    """rows[positions] as an int64 buffer (both int64)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from odradek.spark.batch_encode import _i64

    pos = pa.Array.from_buffers(pa.int64(), len(positions), [None, pa.py_buffer(positions)])
    return _i64(pc.take(rows, pos))
