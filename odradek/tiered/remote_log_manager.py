"""The RemoteLogManager (KIP-405): copies closed segments of remote-enabled partitions
to the remote tier, applies retention to the remote tier, and keeps each log's view of
its remote offsets (LocalLog.remote_start_offset / highest_remote_offset), which local
retention, fetches and ListOffsets read.

Theory of operation
-------------------
One asyncio task wakes every `remote.log.manager.task.interval.ms` and, for each hosted
partition whose topic has `remote.storage.enable`, runs one pass (at most one pass per
partition at a time):

* the first pass (and every pass of a follower) loads the visible remote segments of
  the partition from the store (RemoteStorageManager.list_segments: the `metadata`
  markers), so the view survives restarts and leader changes without a second source;
* a leader first removes orphans (copies cut short by a crash: objects without a
  marker), then copies, oldest first, each closed segment whose last offset is past the
  highest offset already in the remote tier *of its lineage* (remote segments whose
  leader epochs agree with the local leader-epoch cache) and below the last stable
  offset (which is at most the high watermark); each copy publishes
  COPY_SEGMENT_STARTED, uploads (copier threads), then publishes COPY_SEGMENT_FINISHED;
* a leader stores the DeleteRecords start offset in the store (storage_manager
  `log-start-offset`) if DeleteRecords' own write failed; every load reads it back;
* a leader then deletes remote segments past total retention (retention.ms over their
  max timestamp, retention.bytes over remote plus not-yet-copied local bytes) or wholly
  below a DeleteRecords start offset: DELETE_SEGMENT_STARTED, delete (expiration
  threads), DELETE_SEGMENT_FINISHED;
* a partition that vanished from the image (topic deleted) loses its remote prefix.

All fsspec I/O runs in the thread pools sized by the broker's pool keys; the event
loop only computes and publishes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..storage.log import PartitionLog
from ..storage.producer_state import snapshot_file_name
from ..storage.segment import LogSegment
from .metadata_records import (
    MetadataRecord,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from .settings import RemoteTierSettings
from .storage_manager import LocalSegmentFiles, RemoteStorageManager

__all__ = ["HostedPartition", "PartitionTier", "RemoteLogManager"]

log = logging.getLogger(__name__)
S = RemoteLogSegmentState


class HostedPartition(Protocol):
    """What the manager reads of a replica (replication.replica_manager.Partition)."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader: int
    leader_epoch: int


@dataclass(slots=True)
class PartitionTier:
    """The remote tier of one partition as this broker knows it."""

    tip: TopicIdPartition
    segments: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    loaded: bool = False
    running: bool = False
    leader_epoch: int = -1  # the epoch this broker last loaded the view as leader in
    stored_start_offset: int = -1  # the DeleteRecords start offset known to be in the store
    start_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    log: PartitionLog | None = None  # the local replica's log (its leader-epoch cache)

    def read_epoch(self, offset: int) -> int:
        """The local leader-epoch cache's epoch for `offset`, -1 when the cache does not
        reach down to it (then any copy holding the offset is read)."""
        cache = self.log.leader_epoch_cache if self.log is not None else None
        earliest = cache.earliest_entry() if cache is not None else None
        if cache is None or earliest is None or offset < earliest[1]:
            return -1
        return cache.epoch_for_offset(offset)

    @property
    def start_offset(self) -> int:
        return self.segments[0].start_offset if self.segments else -1

    @property
    def end_offset(self) -> int:
        return max((m.end_offset for m in self.segments), default=-1)

    @property
    def size_bytes(self) -> int:
        return sum(m.segment_size_in_bytes for m in self.segments)

    def segment_for(self, offset: int, epoch: int = -1) -> RemoteLogSegmentMetadata | None:
        """The remote segment to read `offset` from. With `epoch` (the local leader-epoch
        cache's epoch for `offset`, -1 when the cache does not cover it) only a segment
        whose own epochs put `offset` in that epoch qualifies, as Kafka's reads ask the
        metadata cache for (epoch, offset): a copy from another lineage (a fenced
        leader's late copy, an unclean election) is never served."""
        found = None
        for m in self.segments:
            if m.start_offset <= offset <= m.end_offset and (
                    epoch < 0 or _epoch_in_segment(m, offset) in (-1, epoch)):
                found = m  # the latest copy holding it
        return found


def _epoch_in_segment(m: RemoteLogSegmentMetadata, offset: int) -> int:
    """The leader epoch `m`'s own epoch entries give `offset` (-1 when none starts at or
    below it)."""
    return max(((o, e) for e, o in m.segment_leader_epochs.items() if o <= offset),
               default=(-1, -1))[1]


def _checkpoint_text(entries: Iterable[tuple[int, int]]) -> bytes:
    rows = list(entries)
    return ("0\n" + f"{len(rows)}\n" + "".join(f"{e} {o}\n" for e, o in rows)).encode()


class RemoteLogManager:
    def __init__(self, settings: RemoteTierSettings, node_id: int,
                 partitions: Callable[[], Iterable[HostedPartition]],
                 topic_exists: Callable[[uuid.UUID], bool],
                 publish: Callable[[MetadataRecord], Awaitable[None]] | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.settings = settings
        self.node_id = node_id
        self._partitions = partitions
        self._topic_exists = topic_exists
        self.publish = publish  # the metadata topic's publisher (broker/remote_metadata.py)
        self._clock_ms = clock_ms
        self.rsm = RemoteStorageManager(settings.url, settings.fs_options,
                                        settings.copy_max_bytes_per_second,
                                        settings.fetch_max_bytes_per_second)
        self.copier = ThreadPoolExecutor(settings.copier_threads, "rlm-copier")
        self.expirer = ThreadPoolExecutor(settings.expiration_threads, "rlm-expiration")
        self.reader = ThreadPoolExecutor(settings.reader_threads, "rlm-reader")
        self.tiers: dict[tuple[str, int], PartitionTier] = {}
        self._task: asyncio.Task[None] | None = None
        self._passes: set[asyncio.Task[None]] = set()
        self.segments_copied = 0
        self.copy_errors = 0

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._passes) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.rsm.copy_limit.close()
        self.rsm.fetch_limit.close()
        for pool in (self.copier, self.expirer, self.reader):
            pool.shutdown(wait=False, cancel_futures=True)

    async def _loop(self) -> None:
        # the first pass at once: until a partition's view is loaded its fetches below
        # the local start wait (handlers/fetch.py) instead of answering out of range
        interval = self.settings.task_interval_ms / 1000.0
        while True:
            try:
                await self.run_once(wait=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager pass failed")
            await asyncio.sleep(interval)

    async def run_once(self, wait: bool = True) -> None:
        """Start a pass for every remote-enabled partition not already in one."""
        hosted = {}
        disabled = {}
        for part in self._partitions():
            if part.log.offline:
                continue
            if not part.log.config.remote_storage_enable:
                disabled[(part.topic, part.partition)] = part
                continue
            key = (part.topic, part.partition)
            hosted[key] = part
            tier = self.tiers.get(key)
            if tier is None or tier.tip.topic_id != part.topic_id:
                tier = self.tiers[key] = PartitionTier(
                    TopicIdPartition(part.topic_id, part.topic, part.partition))
            if not tier.running:
                tier.running = True
                task = asyncio.get_running_loop().create_task(self._pass(part, tier))
                self._passes.add(task)
                task.add_done_callback(self._passes.discard)
        for key, tier in list(self.tiers.items()):
            if key not in hosted and not tier.running:
                off = disabled.get(key)
                if off is not None and not off.log.config.remote_log_delete_on_disable:
                    continue  # turned off, data kept: what the remote tier holds stays readable
                del self.tiers[key]
                if not self._topic_exists(tier.tip.topic_id):
                    await self._run(self.expirer, self.rsm.delete_partition, tier.tip)
                    log.info("%s: topic deleted: removed its remote tier", tier.tip)
                elif off is not None and off.log.config.remote_log_delete_on_disable:
                    # KIP-950: remote storage turned off with remote.log.delete.on.disable
                    off.log.remote_start_offset = off.log.highest_remote_offset = -1
                    if off.leader == self.node_id:
                        await self._run(self.expirer, self.rsm.delete_partition, tier.tip)
                        log.info("%s: remote storage disabled: removed its remote tier",
                                 tier.tip)
        if wait:
            await asyncio.gather(*list(self._passes), return_exceptions=True)

    async def run_io(self, pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in one of the manager's thread pools."""
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    _run = run_io

    async def _emit(self, rec: MetadataRecord) -> None:
        if self.publish is not None:
            try:
                await self.publish(rec)
            except Exception as e:  # noqa: BLE001 - the store's markers stay the truth
                log.warning("cannot publish remote log metadata %s: %s", rec, e)

    # -- one pass ------------------------------------------------------------------------
    async def _pass(self, part: HostedPartition, tier: PartitionTier) -> None:
        tier.log = part.log
        try:
            leader = part.leader == self.node_id
            # reload as a follower every pass, and as leader once per leader epoch (a
            # new leader removes what its predecessor's cut-short copies left)
            if not tier.loaded or not leader or tier.leader_epoch != part.leader_epoch:
                tier.leader_epoch = part.leader_epoch if leader else -1
                tier.segments, orphans = await self._run(self.expirer, self.rsm.scan,
                                                         tier.tip)
                stored = await self._run(self.expirer, self.rsm.read_start_offset, tier.tip)
                tier.stored_start_offset = max(tier.stored_start_offset, stored)
                plog = part.log
                plog.remote_deleted_before = max(plog.remote_deleted_before, stored)
                tier.loaded = True
                if leader and orphans:
                    log.info("%s: removing %d object(s) of copies cut short",
                             tier.tip, len(orphans))
                    await self._run(self.expirer, self.rsm.delete_paths, orphans)
            self._publish_offsets(part.log, tier)
            if leader:  # a DeleteRecords whose store write failed: again
                await self.store_start_offset(part)
            if leader and not part.log.config.remote_log_copy_disable:
                await self._copy_segments(part, tier)
            if leader:
                await self._expire(part, tier)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the store may be down: retried next pass
            self.copy_errors += 1
            # the next pass lists the store again and removes what a failed copy left
            tier.loaded = False
            log.warning("%s: tiered storage pass failed (retried in the next pass): %r",
                        tier.tip, e)
        finally:
            tier.running = False

    def _publish_offsets(self, plog: PartitionLog, tier: PartitionTier) -> None:
        plog.remote_start_offset = tier.start_offset
        plog.highest_remote_offset = self._lineage_end(plog, tier)
        plog.remote_view_loaded = True

    def _lineage_end(self, plog: PartitionLog, tier: PartitionTier) -> int:
        """The highest remote offset of a segment whose leader epochs agree with the
        local leader-epoch cache (KIP-405: a new leader continues from its lineage)."""
        cache = plog.leader_epoch_cache
        earliest = cache.earliest_entry()
        end = -1
        for m in tier.segments:
            ok = all(o < (earliest[1] if earliest else 0) or cache.epoch_for_offset(o) == e
                     for e, o in m.segment_leader_epochs.items())
            if ok:
                end = max(end, m.end_offset)
        return end

    async def _copy_segments(self, part: HostedPartition, tier: PartitionTier) -> None:
        plog = part.log
        segments = plog.segments
        for seg, nxt in itertools.pairwise(segments):
            end = nxt.base_offset - 1
            if end <= plog.highest_remote_offset or seg.size_bytes == 0:
                continue
            if end >= plog.last_stable_offset or part.leader != self.node_id:
                break
            await self._copy_one(part, tier, seg, nxt.base_offset)
            self._publish_offsets(plog, tier)

    async def _copy_one(self, part: HostedPartition, tier: PartitionTier, seg: LogSegment,
                        next_base: int) -> None:
        plog = part.log
        end = next_base - 1
        cache = plog.leader_epoch_cache
        epochs = [(e, o) for e, o in cache.entries if o <= end]
        in_segment = {e: o for e, o in epochs if o > seg.base_offset}
        first_epoch = cache.epoch_for_offset(seg.base_offset)
        if first_epoch >= 0:
            in_segment[first_epoch] = seg.base_offset
        now = self._clock_ms()
        meta = RemoteLogSegmentMetadata(
            RemoteLogSegmentId(tier.tip, uuid.uuid4()), seg.base_offset, end, self.node_id,
            seg.max_timestamp, now, in_segment, seg.size_bytes)
        snapshot = plog.dir / snapshot_file_name(next_base)
        files = LocalSegmentFiles(
            str(seg.log_path), str(seg.offset_index.path), str(seg.time_index.path),
            str(seg.txn_index.path), str(snapshot) if snapshot.exists() else None,
            _checkpoint_text(epochs))
        await self._emit(meta)
        done = RemoteLogSegmentMetadata(
            meta.segment_id, meta.start_offset, meta.end_offset, meta.broker_id,
            meta.max_timestamp_ms, now, meta.segment_leader_epochs,
            meta.segment_size_in_bytes, S.COPY_SEGMENT_FINISHED,
            txn_index_empty=not seg.txn_index.path.exists()
            or seg.txn_index.path.stat().st_size == 0)
        await self._run(self.copier, self.rsm.copy_segment, done, files)
        tier.segments.append(done)
        tier.segments.sort(key=lambda m: m.start_offset)
        self.segments_copied += 1
        await self._emit(RemoteLogSegmentMetadataUpdate(meta.segment_id, self.node_id,
                                                        self._clock_ms(),
                                                        S.COPY_SEGMENT_FINISHED))
        log.info("%s: copied segment [%d, %d] (%d bytes) to the remote tier", tier.tip,
                 meta.start_offset, end, meta.segment_size_in_bytes)

    async def store_start_offset(self, part: HostedPartition) -> None:
        """Write the log's DeleteRecords start offset (LocalLog.remote_deleted_before) to
        the store when it moved past what the store holds, so that no restart or new
        leader makes the deleted records readable again (DeleteRecords awaits this)."""
        tier = self.tiers.get((part.topic, part.partition))
        if tier is None or tier.tip.topic_id != part.topic_id:
            tier = self.tiers[(part.topic, part.partition)] = PartitionTier(
                TopicIdPartition(part.topic_id, part.topic, part.partition))
        async with tier.start_lock:
            offset = part.log.remote_deleted_before
            if offset > tier.stored_start_offset:
                await self._run(self.expirer, self.rsm.write_start_offset, tier.tip, offset)
                tier.stored_start_offset = offset
                log.info("%s: log start offset %d stored in the remote tier", tier.tip, offset)

    # -- retention of the remote tier ------------------------------------------------------
    async def _expire(self, part: HostedPartition, tier: PartitionTier) -> None:
        plog = part.log
        config = plog.config
        now = self._clock_ms()
        doomed: list[RemoteLogSegmentMetadata] = []
        # bytes of local segments not yet in the remote tier count towards retention.bytes
        local_only = sum(s.size_bytes for s in plog.segments
                         if s.base_offset > plog.highest_remote_offset)
        total = tier.size_bytes + local_only
        for m in tier.segments:
            by_time = config.retention_ms >= 0 and now - m.max_timestamp_ms > config.retention_ms
            by_size = (config.retention_bytes >= 0
                       and total - m.segment_size_in_bytes >= config.retention_bytes)
            by_start = m.end_offset < plog.remote_deleted_before
            if not (by_time or by_size or by_start):
                break
            if m.end_offset >= plog.log_start_offset and not by_start:
                # only what the local tier also holds beyond may go by retention
                break
            doomed.append(m)
            total -= m.segment_size_in_bytes
        for m in doomed:
            await self.delete_segment(tier, m)
        if doomed:
            self._publish_offsets(plog, tier)

    async def delete_segment(self, tier: PartitionTier, m: RemoteLogSegmentMetadata) -> None:
        await self._emit(RemoteLogSegmentMetadataUpdate(m.segment_id, self.node_id,
                                                        self._clock_ms(),
                                                        S.DELETE_SEGMENT_STARTED))
        tier.segments.remove(m)
        await self._run(self.expirer, self.rsm.delete_segment, m)
        await self._emit(RemoteLogSegmentMetadataUpdate(m.segment_id, self.node_id,
                                                        self._clock_ms(),
                                                        S.DELETE_SEGMENT_FINISHED))
        log.info("%s: deleted remote segment [%d, %d]", tier.tip, m.start_offset, m.end_offset)

    # -- views for fetches, ListOffsets and metrics ------------------------------------------
    def hosted(self) -> list[HostedPartition]:
        """The hosted partitions of remote-enabled topics."""
        return [p for p in self._partitions()
                if not p.log.offline and p.log.config.remote_storage_enable]

    def tier_of(self, topic: str, partition: int) -> PartitionTier | None:
        tier = self.tiers.get((topic, partition))
        return tier if tier is not None and tier.loaded else None
