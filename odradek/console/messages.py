"""Browsing a partition (from an offset, a timestamp, or its last records) and producing
a test record. A record's key, value and headers are whatever a producer wrote: they
are shown as text, pretty JSON or hex, cut at MAX_SHOWN_BYTES, and the templates escape
them."""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass, field
from typing import Any

from .client import FAILURES, Clients, ConsoleError, text

MAX_RECORDS = 200  # a page never asks for more
MAX_PAGE_BYTES = 16 * 1024 * 1024  # nor reads more: a page stops at the record past this
DEFAULT_RECORDS = 20
MAX_SHOWN_BYTES = 4096  # of a key, value or header value
FORMATS = ("text", "json", "hex")


@dataclass
class Shown:
    text: str | None  # None: a null key/value
    size: int
    truncated: bool = False
    note: str | None = None  # e.g. "not JSON; shown as text"


@dataclass
class Record:
    offset: int
    timestamp: str
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]] = field(default_factory=list)


@dataclass
class Page:
    records: list[Record]
    low: int
    high: int
    start: int
    next_offset: int | None
    error: str | None = None


def show(data: bytes | None, fmt: str, quiet: bool = False) -> Shown:
    """`data` as `fmt`; a key or header (`quiet`) that is not JSON is text, unremarked."""
    if data is None:
        return Shown(None, 0)
    cut = data[:MAX_SHOWN_BYTES]
    truncated = len(data) > MAX_SHOWN_BYTES
    if fmt == "hex":
        return Shown(cut.hex(" "), len(data), truncated)
    decoded = cut.decode("utf-8", errors="replace")
    if fmt == "json":
        if truncated:
            return Shown(decoded, len(data), truncated, "too large to parse; shown as text")
        try:
            return Shown(json.dumps(json.loads(decoded), indent=2, ensure_ascii=False),
                         len(data))
        except ValueError:
            return Shown(decoded, len(data), note=None if quiet else "not JSON; shown as text")
    return Shown(decoded, len(data), truncated)


def _timestamp(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (UTC unless it says)."""
    value = value.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    when = datetime.datetime.fromisoformat(value)
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def browse(clients: Clients, topic: str, partition: int, *, offset: int | None = None,
           timestamp_ms: int | None = None, limit: int = DEFAULT_RECORDS,
           fmt: str = "text") -> Page:
    """Up to `limit` records of topic-partition: from `offset`, from the first record at
    or after `timestamp_ms`, or else the last `limit` ones."""
    from confluent_kafka import TopicPartition

    limit = max(1, min(limit, MAX_RECORDS))
    consumer = clients.consumer()
    try:
        tp = TopicPartition(topic, partition)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=clients.timeout_s)
        except FAILURES as e:
            raise ConsoleError(f"cannot read the offsets of {topic}-{partition}: {text(e)}"
                               ) from None
        if timestamp_ms is not None:
            found = consumer.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)],
                                               timeout=clients.timeout_s)[0]
            start = high if found.offset < 0 else found.offset
        elif offset is not None:
            start = offset
        else:
            start = max(low, high - limit)
        start = min(max(start, low), high)
        records: list[Record] = []
        if start < high:
            records = _poll(clients, consumer, TopicPartition(topic, partition, start),
                            high, limit, fmt)
        last = records[-1].offset if records else start - 1
        next_offset = last + 1 if last + 1 < high else None
        return Page(records, low, high, start, next_offset)
    finally:
        consumer.close()


def _poll(clients: Clients, consumer: Any, tp: Any, high: int, limit: int,
          fmt: str) -> list[Record]:
    consumer.assign([tp])
    records: list[Record] = []
    read = 0
    deadline = time.monotonic() + clients.timeout_s
    while len(records) < limit and time.monotonic() < deadline and read < MAX_PAGE_BYTES:
        msgs = consumer.consume(num_messages=limit - len(records), timeout=0.5)
        for msg in msgs:
            if msg.error():
                if msg.error().name() == "_PARTITION_EOF":
                    return records
                raise ConsoleError(f"cannot read {tp.topic}-{tp.partition}: {text(msg.error())}")
            _kind, ts = msg.timestamp()
            read += len(msg.value() or b"") + len(msg.key() or b"")
            records.append(Record(
                msg.offset(), _timestamp(ts), show(msg.key(), fmt, True), show(msg.value(), fmt),
                [(k, show(v, fmt, True)) for k, v in (msg.headers() or [])]))
        if records and records[-1].offset >= high - 1:
            break  # the end as it was when the page was asked for
    return records[:limit]


@dataclass
class Delivered:
    partition: int
    offset: int


def produce(clients: Clients, topic: str, value: str, key: str | None,
            partition: int | None, headers: list[tuple[str, str]]) -> Delivered:
    """Produce one record and wait for its acknowledgement."""
    result: dict[str, Any] = {}

    def delivered(err: Any, msg: Any) -> None:
        result["err"], result["msg"] = err, msg

    kwargs: dict[str, Any] = {"value": value.encode(), "on_delivery": delivered,
                              "headers": [(k, v.encode()) for k, v in headers]}
    if key:
        kwargs["key"] = key.encode()
    if partition is not None:
        kwargs["partition"] = partition
    producer = clients.producer
    try:
        producer.produce(topic, **kwargs)
    except FAILURES as e:
        raise ConsoleError(f"cannot produce to {topic}: {text(e)}") from None
    producer.flush(clients.timeout_s)
    if "msg" not in result:
        raise ConsoleError(f"no acknowledgement from {topic} in {clients.timeout_s:g} s")
    if result["err"] is not None:
        raise ConsoleError(f"cannot produce to {topic}: {text(result['err'])}")
    return Delivered(result["msg"].partition(), result["msg"].offset())


def parse_headers(lines: str) -> list[tuple[str, str]]:
    out = []
    for line in lines.splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            out.append((key.strip(), value))
    return out
