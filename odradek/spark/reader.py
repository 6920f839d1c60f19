"""The source: batch reader, streaming reader, and the executor's read loop.

Theory of operation
-------------------
Offsets, on the driver, are plain dicts `{topic: {"partition": offset}}` — the
same JSON Spark's Kafka source writes to its checkpoint — so a streaming query
restarted from its checkpoint plans exactly the ranges it had planned.

A read task gets an `OffsetRangePartition` (topic, partition, [from, until))
and yields `pyarrow.RecordBatch`es of at most `ARROW_BATCH_ROWS` rows, typed
exactly as `to_arrow_schema(SCHEMA)`, by one of two paths (`brokerReadPath`):
odradek's Fetch client with the batches decoded in bulk (broker_read.py, the
default), or a confluent-kafka Consumer with `assign()` (no group: nothing is
committed). The consumer path stops when its
position reaches `until`; under read_committed the position can pass `until`
without a record at `until - 1` (transaction markers, aborted data), so the
loop watches the consumer's position, not only the offsets it saw.

The streaming reader keeps, between calls, only what Spark's Kafka source
keeps: the time of the last batch (for `minOffsetsPerTrigger` +
`maxTriggerDelay`) and the AvailableNow target. Everything that must survive a
restart is in the offsets Spark checkpoints.

Data loss (`failOnDataLoss`): offsets asked for that are gone (below the log
start offset, or a partition that disappeared, or a start past the end) fail
the query when the option is true (the default) and are skipped otherwise.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark.broker import OffsetReader, client_conf
from odradek.spark.broker_read import DataLossError, read_fetch
from odradek.spark.options import SourceOptions, TopicPartitionKey
from odradek.spark.remote_plan import (
    RemoteSegment,
    RemoteSegmentPartition,
    discover_for,
    plan_remote,
    read_log_start,
    remote_conf,
    stored_log_starts,
)
from odradek.spark.remote_segment import read_segment

log = logging.getLogger("odradek.spark")

ARROW_BATCH_ROWS = 20_000
CONSUME_BATCH = 10_000
CONSUME_WAIT_S = 0.5

OffsetDict = dict[str, dict[str, int]]


def to_offset_dict(offsets: dict[TopicPartitionKey, int]) -> OffsetDict:
    out: OffsetDict = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def from_offset_dict(d: OffsetDict | None) -> dict[TopicPartitionKey, int]:
    return {(t, int(p)): int(off) for t, parts in (d or {}).items() for p, off in parts.items()}


@dataclass(frozen=True)
class OffsetRangePartition(InputPartition):
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    conf: dict[str, Any]  # what the executor needs: bootstrap, kafka.*, flags

    def __post_init__(self) -> None:
        assert 0 <= self.from_offset <= self.until_offset, self


def executor_conf(opts: SourceOptions) -> dict[str, Any]:
    return {
        "bootstrap": opts.bootstrap_servers,
        "kafka": dict(opts.kafka),
        "isolation_level": opts.isolation_level,
        "include_headers": opts.include_headers,
        "fail_on_data_loss": opts.fail_on_data_loss,
        "poll_timeout_ms": opts.poll_timeout_ms,
        "group_id_prefix": opts.group_id_prefix,
        "read_path": opts.broker_read_path,
        "security": dict(opts.security),
    }


def plan_ranges(
    start: dict[TopicPartitionKey, int],
    end: dict[TopicPartitionKey, int],
    opts: SourceOptions,
) -> list[OffsetRangePartition]:
    """Split [start, end) per partition into tasks, honouring minPartitions and
    maxRecordsPerPartition (as Spark's KafkaOffsetRangeCalculator does)."""
    conf = executor_conf(opts)
    ranges = [(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    total = sum(u - f for _, f, u in ranges)
    out: list[OffsetRangePartition] = []
    for (t, p), f, u in ranges:
        size = u - f
        parts = 1
        if opts.min_partitions and opts.min_partitions > len(ranges) and total > 0:
            parts = max(parts, round(size / total * opts.min_partitions))
        if opts.max_records_per_partition:
            parts = max(parts, -(-size // opts.max_records_per_partition))
        parts = max(1, min(parts, size))
        step = size / parts
        bounds = [f + round(step * i) for i in range(parts)] + [u]
        for a, b in itertools.pairwise(bounds):
            if b > a:
                out.append(OffsetRangePartition(t, p, a, b, conf))
    return out


def _check_start_offsets(
    start: dict[TopicPartitionKey, int],
    earliest: dict[TopicPartitionKey, int],
    latest: dict[TopicPartitionKey, int],
    fail: bool,
) -> dict[TopicPartitionKey, int]:
    fixed = dict(start)
    for tp, off in start.items():
        if tp in earliest and off < earliest[tp]:
            msg = (
                f"{tp[0]}-{tp[1]}: offset {off} is below the log start offset {earliest[tp]} "
                "(records were deleted)"
            )
            if fail:
                raise DataLossError(msg + "; set failOnDataLoss=false to skip them")
            log.warning("%s; skipping them (failOnDataLoss=false)", msg)
            fixed[tp] = earliest[tp]
        if tp in latest and off > latest[tp]:
            msg = f"{tp[0]}-{tp[1]}: offset {off} is past the end offset {latest[tp]}"
            if fail:
                raise DataLossError(msg + "; set failOnDataLoss=false to skip it")
            fixed[tp] = latest[tp]
    return fixed


# --------------------------------------------------------------------------
# Executor side
# --------------------------------------------------------------------------


def read_range(part: OffsetRangePartition, schema: StructType) -> Iterator[Any]:
    """Yield Arrow record batches holding the records of [from, until): with
    odradek's Fetch client (broker_read.py) unless brokerReadPath is consumer."""
    conf = part.conf
    if conf.get("read_path", "auto") == "consumer":
        return read_consumer(part, schema)
    from pyspark.sql.pandas.types import to_arrow_schema

    return read_fetch(
        conf["bootstrap"], part.topic, part.partition, part.from_offset, part.until_offset,
        arrow_schema=to_arrow_schema(schema, timezone="UTC"),
        isolation_level=conf["isolation_level"], fail_on_data_loss=conf["fail_on_data_loss"],
        poll_timeout_ms=conf["poll_timeout_ms"], rows_per_batch=ARROW_BATCH_ROWS,
        security=conf.get("security") or {})


def read_consumer(part: OffsetRangePartition, schema: StructType) -> Iterator[Any]:
    """The records of [from, until) through a librdkafka consumer, one Python
    object per record (the path before the Fetch client)."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    conf = part.conf
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    include_headers = conf["include_headers"]
    consumer = Consumer(
        {
            **client_conf(conf["bootstrap"], conf["kafka"]),
            "group.id": conf["kafka"].get("group.id")
            or f"{conf['group_id_prefix']}-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "isolation.level": conf["isolation_level"],
            "enable.partition.eof": False,
        }
    )
    tp = TopicPartition(part.topic, part.partition)
    try:
        start = part.from_offset
        low, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
        if start < low:
            msg = (
                f"{part.topic}-{part.partition}: offsets {start}..{low - 1} were deleted "
                f"before they were read (log start offset {low})"
            )
            if conf["fail_on_data_loss"]:
                raise DataLossError(msg + "; set failOnDataLoss=false to skip them")
            log.warning("%s; skipping them", msg)
            start = low
        until = part.until_offset
        if start >= until:
            return
        consumer.assign([TopicPartition(part.topic, part.partition, start)])
        cols: dict[str, list[Any]] = _empty_cols()
        position = start
        last_progress = time.monotonic()
        poll_timeout_s = conf["poll_timeout_ms"] / 1000
        while position < until:
            msgs = consumer.consume(num_messages=CONSUME_BATCH, timeout=CONSUME_WAIT_S)
            progressed = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise DataLossError(
                            f"{part.topic}-{part.partition}: offset {position} is out of range "
                            f"({err.str()})"
                        )
                    raise RuntimeError(f"{part.topic}-{part.partition}: consume error: {err.str()}")
                off = m.offset()
                assert off is not None, "a consumed record without an error has an offset"
                if off >= until:
                    position = until
                    break
                _append(cols, m, include_headers)
                position = off + 1
                progressed = True
                if len(cols["offset"]) >= ARROW_BATCH_ROWS:
                    yield _to_batch(pa, cols, part.topic, part.partition, arrow_schema)
                    cols = _empty_cols()
            if position >= until:
                break
            if not progressed:
                # Markers and aborted records move the position without a record.
                pos = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset
                if pos >= until:
                    break
                if pos > position:
                    position = pos
                    last_progress = time.monotonic()
                    continue
                if time.monotonic() - last_progress > poll_timeout_s:
                    low, high = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
                    msg = (
                        f"{part.topic}-{part.partition}: no records from offset {position} "
                        f"for {poll_timeout_s:.0f} s (want until {until}, broker has "
                        f"{low}..{high})"
                    )
                    if high < until and not conf["fail_on_data_loss"]:
                        log.warning("%s; giving up on the rest (failOnDataLoss=false)", msg)
                        break
                    raise DataLossError(msg) if high < until else TimeoutError(msg)
            else:
                last_progress = time.monotonic()
        if cols["offset"]:
            yield _to_batch(pa, cols, part.topic, part.partition, arrow_schema)
    finally:
        consumer.close()


def _empty_cols() -> dict[str, list[Any]]:
    return {"key": [], "value": [], "offset": [], "ts": [], "ts_type": [], "headers": []}


def _append(cols: dict[str, list[Any]], m: Any, include_headers: bool) -> None:
    cols["key"].append(m.key())
    cols["value"].append(m.value())
    cols["offset"].append(m.offset())
    ts_type, ts = m.timestamp()
    cols["ts"].append(ts if ts_type else None)
    # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Kafka/Spark: -1, 0, 1.
    cols["ts_type"].append(ts_type - 1)
    if include_headers:
        h = m.headers()
        cols["headers"].append([{"key": k, "value": v} for k, v in h] if h else None)


def _to_batch(pa: Any, cols: dict[str, list[Any]], topic: str, partition: int, schema: Any) -> Any:
    import pyarrow.compute as pc

    n = len(cols["offset"])
    ts_ms = pa.array(cols["ts"], pa.int64())
    ts = pc.multiply(ts_ms, 1000).cast(schema.field("timestamp").type)
    arrays = [
        pa.array(cols["key"], pa.binary()),
        pa.array(cols["value"], pa.binary()),
        pa.array([topic] * n, pa.string()) if n else pa.array([], pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(cols["offset"], pa.int64()),
        ts,
        pa.array(cols["ts_type"], pa.int32()),
    ]
    if "headers" in schema.names:
        arrays.append(pa.array(cols["headers"], schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# --------------------------------------------------------------------------
# Batch
# --------------------------------------------------------------------------


class OdradekBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        reader = OffsetReader(self.opts)
        try:
            tps = reader.partitions()
            if not tps:
                return []
            start = reader.resolve(self.opts.starting, tps, is_start=True)
            end = reader.resolve(self.opts.ending, tps, is_start=False)
            earliest = reader.earliest(tps)
            latest = reader.latest(tps)
            segments = discover_for(self.opts, reader.admin, tps)
        finally:
            reader.close()
        fail = self.opts.fail_on_data_loss
        for tp, stored in stored_log_starts(segments).items():
            # DeleteRecords into the remote tier, as stored there (the brokers' earliest
            # already includes it unless their view is older than the store's)
            earliest[tp] = max(earliest.get(tp, 0), stored)
        asked = dict(start)
        start = _check_start_offsets(start, earliest, {}, fail)
        for tp in tps:
            if end[tp] > latest[tp]:  # Spark fails to fetch those (or skips them)
                msg = (f"{tp[0]}-{tp[1]}: ending offset {end[tp]} is past the end offset "
                       f"{latest[tp]} ({self.opts.ending.option})")
                if fail:
                    raise DataLossError(msg + "; set failOnDataLoss=false to read up to the end")
                log.warning("%s; reading up to the end (failOnDataLoss=false)", msg)
                end[tp] = latest[tp]
            if end[tp] < start[tp]:
                if start[tp] > asked[tp]:  # the whole range was deleted (failOnDataLoss=false)
                    end[tp] = start[tp]
                    continue
                raise ValueError(
                    f"format(\"odradek\"): {tp[0]}-{tp[1]}: ending offset {end[tp]} is before "
                    f"starting offset {start[tp]} ({self.opts.starting.option} / "
                    f"{self.opts.ending.option})"
                )
        if not segments:
            return plan_ranges(start, end, self.opts)
        return plan_with_remote(start, end, segments, self.opts)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, RemoteSegmentPartition):
            return read_remote(partition, self.schema)
        if not isinstance(partition, OffsetRangePartition):
            return iter(())  # Spark asks for one partition even when none were planned
        return read_range(partition, self.schema)


def plan_with_remote(
    start: dict[TopicPartitionKey, int],
    end: dict[TopicPartitionKey, int],
    segments: dict[TopicPartitionKey, list[RemoteSegment]],
    opts: SourceOptions,
) -> list[InputPartition]:
    """One task per remote segment overlapping each partition's range; the rest
    (the local tail, what no segment holds) through the brokers."""
    conf = remote_conf(opts)
    out: list[InputPartition] = []
    rest_start: dict[TopicPartitionKey, int] = {}
    rest_end: dict[TopicPartitionKey, int] = {}
    extra: list[tuple[TopicPartitionKey, int, int]] = []
    for tp in sorted(end):
        if tp not in start or end[tp] <= start[tp]:
            continue
        if tp not in segments:
            rest_start[tp], rest_end[tp] = start[tp], end[tp]
            continue
        remote, broker = plan_remote(segments[tp], start[tp], end[tp], conf, opts.isolation_level)
        out.extend(remote)
        extra.extend((tp, a, b) for a, b in broker)
    ranges = plan_ranges(rest_start, rest_end, opts)
    for tp, a, b in extra:
        ranges.extend(plan_ranges({tp: a}, {tp: b}, opts))
    log.info("planned %d remote-segment and %d broker tasks", len(out), len(ranges))
    return out + list(ranges)


def read_remote(part: RemoteSegmentPartition, schema: StructType) -> Iterator[Any]:
    """Executor side of a remote-segment task: the object store only."""
    from pyspark.sql.pandas.types import to_arrow_schema

    seg = part.segment
    start = part.from_offset
    stored = read_log_start(seg.log_start_url, part.conf["remote_fs"])
    if start < stored:  # a DeleteRecords since planning: as the broker path (broker_read.py)
        msg = (f"{part.topic}-{part.partition}: offsets {start}..{stored - 1} were deleted "
               f"before they were read (log start offset {stored}, from the remote tier)")
        if part.conf.get("fail_on_data_loss", True):
            raise DataLossError(msg + "; set failOnDataLoss=false to skip them")
        log.warning("%s; skipping them", msg)
        start = stored
    if start >= part.until_offset:
        return iter(())
    return read_segment(
        seg.log_url, start, part.until_offset,
        topic=part.topic, partition=part.partition,
        arrow_schema=to_arrow_schema(schema, timezone="UTC"),
        isolation_level=part.conf["isolation_level"], aborted=part.aborted,
        storage_options=part.conf["remote_fs"], index_url=seg.index_url,
        base_offset=seg.base_offset, rows_per_batch=ARROW_BATCH_ROWS, size=seg.size_bytes,
    )


# --------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------


def trigger_clock() -> float:
    """Seconds, for minOffsetsPerTrigger / maxTriggerDelay (a function so tests can move it)."""
    return time.monotonic()


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._reader: OffsetReader | None = None
        self._last_batch_s = trigger_clock()
        self._available_now_target: dict[TopicPartitionKey, int] | None = None

    @property
    def reader(self) -> OffsetReader:
        if self._reader is None:
            self._reader = OffsetReader(self.opts)
        return self._reader

    def initialOffset(self) -> OffsetDict:
        tps = self.reader.partitions()
        return to_offset_dict(self.reader.resolve(self.opts.starting, tps, is_start=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.reader.partitions()
        self._available_now_target = self.reader.latest(tps)

    def _latest(self) -> dict[TopicPartitionKey, int]:
        if self._available_now_target is not None:
            return dict(self._available_now_target)
        return self.reader.latest(self.reader.partitions())

    def latestOffset(self, start: OffsetDict, limit: ReadLimit) -> OffsetDict:
        begin = from_offset_dict(start)
        latest = self._latest()
        gone = sorted(set(begin) - set(latest))
        if gone and self._available_now_target is None:
            msg = f"partitions {[f'{t}-{p}' for t, p in gone]} disappeared (topic deleted?)"
            if self.opts.fail_on_data_loss:
                raise DataLossError(msg + "; set failOnDataLoss=false to go on without them")
            log.warning("%s; going on without them", msg)
        # New partitions are read from their earliest offset, as Spark does.
        new = [tp for tp in latest if tp not in begin]
        from_ = {**self.reader.earliest(new), **begin} if new else dict(begin)
        for tp, off in latest.items():
            if from_.get(tp, 0) > off:
                msg = f"{tp[0]}-{tp[1]}: offset {from_[tp]} is past the end offset {off}"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(msg + " (records were lost); set failOnDataLoss=false")
                log.warning("%s; restarting it from there", msg)
                from_[tp] = off
        available = sum(max(0, latest[tp] - from_.get(tp, 0)) for tp in latest)
        cap: int | None = None
        if isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif isinstance(limit, ReadMinRows):
            waited_ms = (trigger_clock() - self._last_batch_s) * 1000
            if available < limit.min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return start
            cap = self.opts.max_offsets_per_trigger
        end = dict(latest)
        if cap is not None and available > cap:
            end = _rate_limit(from_, latest, cap)
        # Keep partitions we started from that are no longer listed (failOnDataLoss=false).
        if self._available_now_target is None:
            end_dict = to_offset_dict(end)
        else:
            end_dict = to_offset_dict({**begin, **end})
        if end_dict != start:
            self._last_batch_s = trigger_clock()
        return end_dict

    def reportLatestOffset(self) -> OffsetDict | None:
        try:
            return to_offset_dict(self._latest())
        except Exception:  # noqa: BLE001 - a status report must not fail the query
            return None

    def partitions(self, start: OffsetDict, end: OffsetDict) -> Sequence[InputPartition]:
        begin = from_offset_dict(start)
        until = from_offset_dict(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.reader.earliest(new))
        return plan_ranges(begin, until, self.opts)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, OffsetRangePartition):
            return iter(())  # Spark asks for one partition even when none were planned
        return read_range(partition, self.schema)

    def commit(self, end: OffsetDict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing is committed to Kafka

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _rate_limit(
    from_: dict[TopicPartitionKey, int], until: dict[TopicPartitionKey, int], limit: int
) -> dict[TopicPartitionKey, int]:
    """Spread `limit` records over partitions in proportion to their lag
    (KafkaMicroBatchStream.rateLimit)."""
    sizes = {tp: max(0, u - from_.get(tp, 0)) for tp, u in until.items()}
    total = sum(sizes.values())
    out: dict[TopicPartitionKey, int] = {}
    for tp, u in until.items():
        begin = from_.get(tp, 0)
        if total == 0 or sizes[tp] == 0:
            out[tp] = u if tp not in from_ else begin
            continue
        prorate = limit * (sizes[tp] / total)
        step = int(prorate) + (1 if prorate < 1 and prorate > 0 else 0)
        out[tp] = min(begin + step, u)
    return out
