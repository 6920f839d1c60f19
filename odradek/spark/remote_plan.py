"""Planning batch reads of the remote tier: which segments, which tasks.

Theory of operation
-------------------
With `remoteRead` = `direct` (or `auto` with `remote.rsm.config.url` set), a
batch read plans one Spark partition per remote segment overlapping the
requested range (`RemoteSegmentPartition`); the offsets no remote segment
holds (the local tail, gaps) stay broker-served `OffsetRangePartition`s. The
executors read remote partitions with remote_segment.py and never touch a
broker.

Segments are found by `discover_segments` in the remote layout of issue 14's
contract (tiered/storage_manager.py)::

    <url>/<topic>-<topicIdBase64Url>/<partition>/<baseOffset:020d>-<segmentId>.<suffix>

A segment is visible once its ``.metadata`` marker exists: the copier writes
it last, holding the segment's `__remote_log_metadata` record value
(RemoteLogSegmentMetadata in state COPY_SEGMENT_FINISHED, decoded with
tiered/metadata_records.py, standard library only), so a copy cut short is
never read. DeleteRecords into the remote tier leaves the partition's new log
start offset in the object ``log-start-offset`` of its directory (written
before the deleted segments go): the planner raises each partition's earliest
offset to it (failOnDataLoss as for any deleted offset), and each remote task
reads it again before reading, so a DeleteRecords between planning and the
task is data loss exactly as the broker path reports it. The topic id comes from the brokers (DescribeTopics): a deleted
and recreated topic's old objects are never read. The markers are read
concurrently (one small GET each); the `__remote_log_metadata` topic carries
the same records, and `RemoteSegment` is what either source fills.

read_committed: the driver reads every ``.txnindex`` of a partition's remote
segments (one small GET each, concurrently) and gives each task the aborted
transactions overlapping its range (`remote_segment.collect_aborted`). A
transaction still open at the end of the last remote segment (its ABORT or
COMMIT marker is only on the brokers) is seen in that segment's producer
``.snapshot`` (Kafka's format: its currentTxnFirstOffset); the segments from
the one holding its first offset onwards are then read through the brokers,
which know its outcome. Without a readable snapshot the segments whose
aborted-transaction search is not complete (Kafka's lastStableOffset rule) are
read through the brokers too: correct, just not direct.
"""

from __future__ import annotations

import base64
import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from odradek.spark.options import SourceOptions, TopicPartitionKey
from odradek.spark.remote_segment import (
    SegmentCorrupt,
    collect_aborted,
    open_url,
    parse_txn_index,
)

log = logging.getLogger("odradek.spark")

MARKER_SUFFIX = ".metadata"  # the copier's visibility marker (tiered/storage_manager.py)
# DeleteRecords into the remote tier: the log start offset, in decimal, in this object of
# the partition's directory (tiered/storage_manager.py START_OFFSET_OBJECT)
START_OFFSET_OBJECT = "log-start-offset"
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # ... currentTxnFirstOffset last


@dataclass(frozen=True)
class RemoteSegment:
    topic: str
    partition: int
    base_offset: int
    end_offset: int  # last offset held (inclusive), as KIP-405's metadata
    log_url: str
    index_url: str
    txnindex_url: str
    snapshot_url: str
    segment_id: str = ""
    size_bytes: int = 0
    # the partition's DeleteRecords log start offset stored in the remote tier when the
    # segments were listed (-1: none), and the object's URL, read again by each task
    log_start_offset: int = -1
    log_start_url: str = ""


@dataclass(frozen=True)
class RemoteSegmentPartition(InputPartition):
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    segment: RemoteSegment
    aborted: tuple[tuple[int, int], ...]
    conf: dict[str, Any]


def segment_dir(url: str, topic: str, topic_id: str, partition: int) -> str:
    return f"{url.rstrip('/')}/{topic}-{topic_id}/{partition}"


def topic_ids(admin: Any, topics: Iterable[str]) -> dict[str, str]:
    """Topic name -> base64url topic id, from the brokers."""
    from confluent_kafka import TopicCollection

    names = sorted(set(topics))
    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=30)
    return {name: kafka_uuid(f.result(timeout=30).topic_id) for name, f in futures.items()}


def kafka_uuid(u: Any) -> str:
    """A confluent-kafka Uuid as Kafka writes it (URL-safe base64, no padding): its
    str() is standard base64, with '+' and '/'."""
    mask = (1 << 64) - 1
    raw = ((u.get_most_significant_bits() & mask) << 64) | (u.get_least_significant_bits() & mask)
    return base64.urlsafe_b64encode(raw.to_bytes(16, "big")).decode().rstrip("=")


def discover_segments(
    url: str, fs_options: dict[str, Any], tps: Iterable[TopicPartitionKey], ids: dict[str, str]
) -> dict[TopicPartitionKey, list[RemoteSegment]]:
    """The visible remote segments of each partition, by start offset: those
    whose ``.metadata`` marker (written last by the copier) holds a
    RemoteLogSegmentMetadata in state COPY_SEGMENT_FINISHED."""
    from odradek.tiered.metadata_records import (
        RemoteLogSegmentMetadata,
        RemoteLogSegmentState,
        decode_value,
        uuid_to_b64,
    )

    fs, _ = open_url(url, fs_options)
    out: dict[TopicPartitionKey, list[RemoteSegment]] = {}
    for topic, partition in tps:
        if topic not in ids:
            continue
        base = segment_dir(url, topic, ids[topic], partition)
        try:
            names = [str(n) for n in fs.ls(open_url(base, fs_options)[1], detail=False)]
        except FileNotFoundError:
            continue
        leaves = [n.rstrip("/").rsplit("/", 1)[-1] for n in names]
        logs = {leaf[:-len(".log")] for leaf in leaves if leaf.endswith(".log")}
        # a marker without its .log (a fenced leader's late marker) is not visible
        markers = [f"{base}/{leaf}" for leaf in leaves
                   if leaf.endswith(MARKER_SUFFIX) and leaf[:-len(MARKER_SUFFIX)] in logs]
        start_url = f"{base}/{START_OFFSET_OBJECT}"
        blobs = _cat_many(fs_options, [*markers, start_url])
        log_start = parse_log_start(blobs.pop(start_url), start_url)
        segments = []
        for marker_url, data in blobs.items():
            if data is None:
                continue  # deleted since the listing
            meta = decode_value(data)
            if not isinstance(meta, RemoteLogSegmentMetadata) or (
                meta.state != RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ):
                continue
            stem = f"{base}/{meta.start_offset:020d}-{uuid_to_b64(meta.segment_id.id)}"
            if marker_url != stem + MARKER_SUFFIX:
                raise SegmentCorrupt(f"{marker_url}: its metadata names segment {stem}")
            segments.append(RemoteSegment(
                topic, partition, meta.start_offset, meta.end_offset, f"{stem}.log",
                f"{stem}.index", f"{stem}.txnindex", f"{stem}.snapshot",
                uuid_to_b64(meta.segment_id.id), meta.segment_size_in_bytes, log_start,
                start_url))
        if segments:
            out[(topic, partition)] = sorted(segments, key=lambda s: (s.base_offset, -s.end_offset))
    return out


def parse_log_start(data: bytes | None, url: str) -> int:
    """The stored DeleteRecords log start offset (-1 without the object). An unreadable
    one fails the read rather than risk returning deleted records."""
    if data is None:
        return -1
    try:
        return int(data.decode("ascii").strip())
    except ValueError as e:
        raise SegmentCorrupt(f"{url}: not a log start offset: {data[:40]!r}") from e


def read_log_start(url: str, fs_options: dict[str, Any]) -> int:
    """The stored DeleteRecords log start offset at `url` now (-1: none)."""
    if not url:
        return -1
    return parse_log_start(_cat_many(fs_options, [url])[url], url)


def stored_log_starts(
    segments: dict[TopicPartitionKey, list[RemoteSegment]],
) -> dict[TopicPartitionKey, int]:
    """Per partition, the DeleteRecords log start offset found in the remote tier."""
    return {tp: max(s.log_start_offset for s in segs) for tp, segs in segments.items() if segs}


def _cat_many(fs_options: dict[str, Any], urls: list[str]) -> dict[str, bytes | None]:
    """Fetch small objects concurrently; None for a missing one."""
    if not urls:
        return {}
    fs, _ = open_url(urls[0], fs_options)
    paths = {open_url(u, fs_options)[1]: u for u in urls}
    got = fs.cat(list(paths), on_error="return")
    out: dict[str, bytes | None] = {}
    for p, u in paths.items():
        v = got.get(p)
        if isinstance(v, FileNotFoundError) or v is None:
            out[u] = None
        elif isinstance(v, BaseException):
            raise v
        else:
            out[u] = bytes(v)
    return out


def open_txns_at_end(data: bytes | None) -> list[tuple[int, int]] | None:
    """(producer id, first offset) of the transactions open in a producer
    snapshot (Kafka's format); None if there is no snapshot or it is unreadable."""
    if data is None or len(data) < _SNAPSHOT_HEAD.size:
        return None
    version, _crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != 1 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        return None
    out = []
    for i in range(count):
        fields = _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
        if fields[-1] >= 0:
            out.append((fields[0], fields[-1]))
    return out


def plan_remote(
    segments: list[RemoteSegment],
    start: int,
    end: int,
    conf: dict[str, Any],
    isolation_level: str,
) -> tuple[list[RemoteSegmentPartition], list[tuple[int, int]]]:
    """Remote tasks for the part of [start, end) the segments hold, and the
    ranges left for the brokers."""
    chosen: list[tuple[RemoteSegment, int, int]] = []
    cursor = start
    for seg in segments:
        lo, hi = max(cursor, seg.base_offset, start), min(end, seg.end_offset + 1)
        if hi > lo:
            chosen.append((seg, lo, hi))
            cursor = hi
    if not chosen:
        return [], [(start, end)] if end > start else []
    aborted_per: list[tuple[tuple[int, int], ...]] = [()] * len(chosen)
    direct = [True] * len(chosen)
    if isolation_level == "read_committed":
        later = [s for s in segments if s.base_offset >= chosen[0][0].base_offset]
        blobs = _cat_many(conf["remote_fs"], [s.txnindex_url for s in later]
                          + [segments[-1].snapshot_url])
        indexes = [parse_txn_index(blobs[s.txnindex_url] or b"", s.txnindex_url) for s in later]
        open_at_end = open_txns_at_end(blobs[segments[-1].snapshot_url])
        first_open = min((f for _, f in open_at_end), default=None) if open_at_end is not None else None
        for i, (seg, lo, hi) in enumerate(chosen):
            k = later.index(seg)
            found, complete = collect_aborted(indexes[k:], lo, hi)
            aborted_per[i] = tuple(found)
            if complete:
                continue
            if open_at_end is None:
                direct[i] = False  # no snapshot: the outcome of an open txn is unknown
            elif first_open is not None and first_open < hi:
                direct[i] = False  # a txn open at the tier's end has records here
    remote: list[RemoteSegmentPartition] = []
    broker: list[tuple[int, int]] = []
    cursor = start
    for (seg, lo, hi), aborted, ok in zip(chosen, aborted_per, direct, strict=True):
        if lo > cursor:
            broker.append((cursor, lo))
        if ok:
            remote.append(RemoteSegmentPartition(seg.topic, seg.partition, lo, hi, seg, aborted, conf))
        else:
            broker.append((lo, hi))
        cursor = hi
    if end > cursor:
        broker.append((cursor, end))
    return remote, _merge(broker)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def remote_conf(opts: SourceOptions) -> dict[str, Any]:
    return {
        "remote_fs": dict(opts.remote_fs),
        "isolation_level": opts.isolation_level,
        "include_headers": opts.include_headers,
        "fail_on_data_loss": opts.fail_on_data_loss,
    }


def discover_for(
    opts: SourceOptions, admin: Any, tps: list[TopicPartitionKey]
) -> dict[TopicPartitionKey, list[RemoteSegment]]:
    """Remote segments per partition under the options' remoteRead mode ({} when
    the brokers are to serve everything)."""
    if opts.remote_read == "off" or not opts.remote_url:
        return {}
    try:
        ids = topic_ids(admin, {t for t, _ in tps})
        return discover_segments(opts.remote_url, opts.remote_fs, tps, ids)
    except Exception as e:  # auto: anything that stops the listing (re-raised for direct)
        if opts.remote_read == "direct":
            raise
        log.warning("remote tier at %s not readable (%s); reading through the brokers",
                    opts.remote_url, e)
        return {}
