"""Opening a partition's directory: the segments a log starts with, recovered.

Kafka's ``LogLoader``. ``load_segments`` checks ``partition.metadata`` against the
topic id, finishes or undoes what a crash left of a cleaning
(storage/swap_files.py), removes leftovers of interrupted deletions and
orphaned indexes, opens every segment and CRC-checks those that may hold
offsets past the recovery point, re-learning leader epochs as it scans. What it
returns is what ``PartitionLog.open`` (storage/log.py) builds a log from.

``partition.metadata`` is Kafka's text file, ASCII, two lines::

    version: 0
    topic_id: <topic id as Kafka prints a Uuid: 16 bytes, base64url, no padding>

Recovery (Kafka's rule): after a clean shutdown nothing is recovered (indexes
are still sanity-checked and rebuilt if missing or corrupt); otherwise every
segment that may hold offsets at or past the checkpointed recovery point is
CRC-checked batch by batch, and the first bad batch ends the log: the rest of
that segment and every later segment are removed. With no checkpoint the
trailing segments (the last one, plus any empty ones before it and the last
non-empty one) are recovered.

Imports: storage segment, leader_epoch, log_config, swap_files (never the cleaner). Knows nothing
of PartitionLog.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.protocol.records import BatchHeader
from odradek.storage.checkpoint import fsync
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from odradek.storage.swap_files import complete_interrupted_swaps
from odradek.storage.txn_index import TXN_INDEX_SUFFIX

_log = logging.getLogger(__name__)
PARTITION_METADATA_FILE = "partition.metadata"
_ORPHAN_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DELETED_SUFFIX = DELETED_SUFFIX


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    padded = text.strip() + "=" * (-len(text.strip()) % 4)
    raw = base64.urlsafe_b64decode(padded)
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class InconsistentTopicId(Exception):
    """partition.metadata names another topic id than the one the caller expects."""


def write_partition_metadata(dir: Path, topic_id: uuid.UUID) -> None:
    text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
    tmp = dir / (PARTITION_METADATA_FILE + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        fsync(f.fileno())
    os.replace(tmp, dir / PARTITION_METADATA_FILE)


def read_partition_metadata(dir: Path) -> uuid.UUID | None:
    path = dir / PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise ValueError(f"malformed {path}: {text!r}")
    return parse_kafka_uuid(fields["topic_id"])


@dataclass(slots=True)
class LoadedSegments:
    """What a log opens with: its segments (the last one active) and the offsets
    the load settled on."""

    segments: list[LogSegment]
    leader_epoch_cache: LeaderEpochFileCache
    log_start_offset: int
    recovery_point: int
    truncated_bytes: int  # cut from corrupt or torn tails
    clean: bool  # a clean shutdown and nothing truncated: producer state need not replay
    recovered_bytes: int = 0  # CRC-checked by the recovery scan (0: nothing recovered)


def load_segments(
    dir: Path,
    config: LogConfig,
    topic_id: uuid.UUID | None,
    now_ms: int,
    *,
    recovery_point: int | None,
    log_start_offset: int | None,
    had_clean_shutdown: bool,
) -> LoadedSegments:
    """Open (creating if needed) the segments in ``dir`` and recover what needs it
    (see the module docstring). ``recovery_point`` and ``log_start_offset`` are
    the checkpointed ones, if any."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    stored_id = read_partition_metadata(dir)
    if stored_id is not None and topic_id is not None and stored_id != topic_id:
        raise InconsistentTopicId(
            f"{dir}: partition.metadata has topic id {kafka_uuid_string(stored_id)}, "
            f"expected {kafka_uuid_string(topic_id)}"
        )
    if stored_id is None and topic_id is not None:
        write_partition_metadata(dir, topic_id)
    for action in complete_interrupted_swaps(dir):
        _log.info("%s: %s", dir, action)
    bases = _segment_bases(dir)
    epoch_cache = LeaderEpochFileCache.load(dir)
    epoch_cache.defer_writes()  # one write at the end, if the load changed it
    latest_loaded = epoch_cache.entries[-1] if epoch_cache.entries else None
    recover_from = _first_segment_to_recover(dir, bases, recovery_point, had_clean_shutdown)
    segments: list[LogSegment] = []
    truncated = 0
    scanned = 0
    for i, base in enumerate(bases):
        active = i == len(bases) - 1
        recover = i >= recover_from
        segment = None
        size_before = -1
        if recover and active and i == recover_from and recovery_point is not None:
            # The recovery point is in the last segment: if it is the log end,
            # nothing was written after the last flush and there is nothing to
            # recover (issue 15.4: a crash costs what a clean load costs).
            size_before = (dir / segment_file_name(base, LOG_SUFFIX)).stat().st_size
            segment = _open_if_flushed_to_end(dir, base, config, now_ms, recovery_point)
        if segment is None:
            if recover and i == recover_from:
                # The scan re-learns the epochs of everything it reads.
                epoch_cache.truncate_from_end(base)
            segment = LogSegment.open(
                dir,
                base,
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
                active=active,
                recover=recover,
                segment_jitter_ms=config.segment_jitter_ms,
                on_batch=_epoch_learner(epoch_cache) if recover else None,
            )
            if size_before > segment.size_bytes + segment.recovery_truncated_bytes:
                # the look before (an index rebuild) already cut a torn tail
                segment.recovery_truncated_bytes = size_before - segment.size_bytes
            if recover:
                scanned += segment.size_bytes + segment.recovery_truncated_bytes
        truncated += segment.recovery_truncated_bytes
        segments.append(segment)
        if segment.recovery_truncated_bytes and not active:
            # Kafka's rule: nothing after a corrupt batch can be trusted.
            for later in bases[i + 1 :]:
                _delete_segment_files(dir, later)
            if not segment.active:
                segment.offset_index.make_writable(config.segment_index_bytes)
                segment.time_index.make_writable(config.segment_index_bytes)
                segment.active = True
            break
    if not segments:
        segments.append(
            LogSegment.create(
                dir,
                0 if log_start_offset is None else max(0, log_start_offset),
                index_interval_bytes=config.index_interval_bytes,
                max_index_bytes=config.segment_index_bytes,
                now_ms=now_ms,
                segment_jitter_ms=config.segment_jitter_ms,
            )
        )
    leo = segments[-1].next_offset
    start = segments[0].base_offset
    if log_start_offset is not None:
        start = min(max(log_start_offset, start), leo)
    if had_clean_shutdown and truncated == 0:
        recovered_to = leo
    elif recovery_point is not None:
        recovered_to = min(max(recovery_point, 0), leo)
    else:
        recovered_to = segments[recover_from].base_offset if recover_from < len(
            segments) else leo
    epoch_cache.truncate_from_end(leo)
    if (latest_loaded is not None and latest_loaded[1] == leo
            and latest_loaded[0] > epoch_cache.latest_epoch()):
        # The latest epoch starts at the log end: its leader wrote nothing in
        # it yet (an empty partition's only entry, "0 0"). It still describes
        # the log as it is, so it stays: dropping it would rewrite the
        # checkpoint here and becoming leader in the same epoch would write it
        # back, two fsyncs per such partition on every start.
        epoch_cache.assign(*latest_loaded)
    if not epoch_cache.entries and leo > start:
        first = segments[0].first_batch_header()
        if first is not None and first.partition_leader_epoch >= 0:
            epoch_cache.assign(first.partition_leader_epoch, start)
    epoch_cache.truncate_from_start(start)
    epoch_cache.write_deferred()
    return LoadedSegments(
        segments=segments,
        leader_epoch_cache=epoch_cache,
        log_start_offset=start,
        recovery_point=recovered_to,
        truncated_bytes=truncated,
        clean=had_clean_shutdown and truncated == 0,
        recovered_bytes=scanned,
    )


def _open_if_flushed_to_end(
    dir: Path, base: int, config: LogConfig, now_ms: int, recovery_point: int
) -> LogSegment | None:
    """The active segment opened as after a clean shutdown, if it ends exactly at
    the recovery point with no byte after its last whole batch: everything in
    it was flushed (the recovery point says so), so a CRC scan would find what a
    clean load finds. Else None (the caller recovers it)."""
    segment = LogSegment.open(
        dir, base, index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes, now_ms=now_ms, active=True,
        segment_jitter_ms=config.segment_jitter_ms,
    )
    if segment.next_offset == recovery_point and segment.whole_batches_end() == (
            segment.size_bytes):
        return segment
    segment.close_files()
    return None


def _first_segment_to_recover(
    dir: Path, bases: list[int], recovery_point: int | None, had_clean_shutdown: bool
) -> int:
    """Index of the first segment to CRC-check on open (len(bases): none)."""
    if had_clean_shutdown or not bases:
        return len(bases)
    if recovery_point is not None:
        return max(0, bisect_right(bases, recovery_point) - 1)
    # No checkpoint: recover back to the last non-empty segment (a crash just
    # after a roll leaves the previous segment's tail as unflushed as the new one).
    i = len(bases) - 1
    while i > 0 and (dir / segment_file_name(bases[i], LOG_SUFFIX)).stat().st_size == 0:
        i -= 1
    return i


def _epoch_learner(cache: LeaderEpochFileCache) -> Callable[[BatchHeader], None]:
    def learn(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        if epoch > cache.latest_epoch():
            cache.assign(epoch, header.base_offset)

    return learn


def _delete_segment_files(dir: Path, base: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        (dir / segment_file_name(base, suffix)).unlink(missing_ok=True)


def _segment_bases(dir: Path) -> list[int]:
    """Base offsets of the segments in ``dir``; removes orphaned index files and
    leftovers of interrupted deletions."""
    bases: set[int] = set()
    orphans: list[Path] = []
    for entry in os.scandir(dir):
        name = entry.name
        if name.endswith(_DELETED_SUFFIX):
            os.unlink(entry.path)
            continue
        stem, _, suffix = name.partition(".")
        if len(stem) != 20 or not stem.isdigit():
            continue
        if "." + suffix == LOG_SUFFIX:
            bases.add(int(stem))
        elif "." + suffix in _ORPHAN_SUFFIXES:
            orphans.append(Path(entry.path))
    for path in orphans:
        if int(path.name[:20]) not in bases:
            path.unlink(missing_ok=True)
    return sorted(bases)
