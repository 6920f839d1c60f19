"""The asyncio shell of the share coordinator (core: share_coordinator.py).

It creates `__share_group_state` on first need (cleanup.policy=delete, as
KIP-932, through the controller, `share.coordinator.state.topic.*`), loads the partitions of it this
broker leads by replaying their logs when it becomes their leader (and drops
them when it stops), appends the records the core returns, and answers only
once the ISR has them (coordinator/replicated.py, with
`share.coordinator.write.timeout.ms`): a state a share-partition leader was told
is written survives the loss of the coordinator's broker. Every
`share.coordinator.state.topic.prune.interval.ms` it deletes the records of the
partitions it leads below their redundant offset (share_coordinator.py), as
Kafka's share coordinator prunes the topic with DeleteRecords, and every
`share.coordinator.cold.partition.snapshot.interval.ms` it writes new snapshots
of the keys whose last one is that old.

Requests arrive from share-partition leaders: from this broker's own persister
directly (coordinator/share_persister.py), from other brokers as
Initialize/Read/Write/Delete/ReadShareGroupStateSummary requests
(broker/handlers/share_state.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ..clock import wall_ms
from ..metadata.image import MetadataImage
from ..protocol import records as batches
from . import errors as E
from .host import CoordinatorHost
from .internal_topic import ensure_internal_topic
from .log_replay import keyed_records
from .replicated import GROUP_ERRORS, mapped, min_isr_error, wait_replicated
from .share_coordinator import SHARE_STATE_TOPIC, Record, ShareCoordinator
from .share_state_records import (
    SNAPSHOT,
    Batch,
    CorruptShareRecord,
    Key,
    ShareSnapshot,
    decode_key,
    decode_snapshot,
    decode_update,
)
from .txn_markers import advance_high_watermark

log = logging.getLogger(__name__)


def state_topic_configs(rf: int, min_isr: int, segment_bytes: int) -> dict[str, str | None]:
    """The configs `__share_group_state` is created with: Kafka's
    (cleanup.policy=delete, segment.bytes) and, since odradek writes no
    periodic snapshots of cold keys yet, no time or size retention: the
    coordinator's pruning bounds the log instead."""
    return {
        "cleanup.policy": "delete",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(min(rf, min_isr)),
        "segment.bytes": str(segment_bytes),
        "retention.ms": "-1",
        "retention.bytes": "-1",
    }


class ShareCoordinatorService:
    def __init__(self, broker: CoordinatorHost) -> None:
        self.broker = broker
        c = broker.config
        self.core = ShareCoordinator(
            c.get("share.coordinator.state.topic.num.partitions"),
            c.get("share.coordinator.snapshot.update.records.per.snapshot"))
        self.write_timeout_ms: int = c.get("share.coordinator.write.timeout.ms")
        self.prune_interval_ms: int = c.get("share.coordinator.state.topic.prune.interval.ms")
        self.cold_interval_ms: int = c.get(
            "share.coordinator.cold.partition.snapshot.interval.ms")
        self._timers: list[asyncio.Task[None]] = []
        self._create_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self.writes = 0

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.on_metadata(MetadataImage(), self.broker.image, [])
        self.broker.quorum.listeners.append(self.on_metadata)
        loop = asyncio.get_running_loop()
        self._timers = [loop.create_task(self._every(self.prune_interval_ms, self._prune)),
                        loop.create_task(self._every(self.cold_interval_ms,
                                                     self.snapshot_cold))]

    def close(self) -> None:
        for task in self._timers:
            task.cancel()
        self._timers = []

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:  # a timer must not die: logged, run again
                log.exception("share coordinator timer job failed")

    async def _prune(self) -> int:
        return self.prune()

    async def snapshot_cold(self) -> int:
        """Snapshot the quiet keys of the led partitions again (cold_snapshots)."""
        if self.core.snapshots_only:
            return 0
        n = 0
        for p in sorted(self.core.loaded):
            part = self.broker.replica_manager.get(SHARE_STATE_TOPIC, p)
            if part is None or mapped(GROUP_ERRORS, min_isr_error(part)) != E.NONE:
                continue
            out: list[Record] = []
            n += self.core.cold_snapshots(p, wall_ms(), self.cold_interval_ms, out)
            if out:
                await self._append_to(p, out)
        return n

    def prune(self) -> int:
        """Delete the records below each led partition's redundant offset (not
        past its high watermark); the number of partitions whose log start moved."""
        if self.core.snapshots_only:
            return 0
        moved = 0
        for p in sorted(self.core.loaded):
            part = self.broker.replica_manager.get(SHARE_STATE_TOPIC, p)
            if part is None:
                continue
            plog = part.log
            upto = self.core.redundant_offset(p, plog.high_watermark)
            if upto <= plog.log_start_offset:
                continue
            try:
                plog.delete_records_before(upto)
            except OSError as e:  # the dir went offline (logged by the log manager)
                log.warning("pruning %s-%d below %d failed: %s", SHARE_STATE_TOPIC, p, upto, e)
                continue
            moved += 1
            log.debug("pruned %s-%d below %d", SHARE_STATE_TOPIC, p, upto)
        return moved

    def on_metadata(self, old: MetadataImage, new: MetadataImage, records: Any) -> None:
        policy = new.topic_configs(SHARE_STATE_TOPIC).get("cleanup.policy", "")
        self.core.snapshots_only = "compact" in policy
        topic = new.topics_by_name.get(SHARE_STATE_TOPIC)
        led: set[int] = set()
        if topic is not None:
            led = {p for p, part in topic.partitions.items() if part.leader == self.broker.node_id}
        for p in sorted(self.core.loaded - led):
            self.core.unload(p)
            log.info("unloaded %s-%d", SHARE_STATE_TOPIC, p)
        for p in sorted(led - self.core.loaded):
            self._load(p)
        if old.topics_by_id is not new.topics_by_id and old.topics_by_id:
            # a deleted topic takes the share groups' state of its partitions with it
            gone = old.topics_by_id.keys() - new.topics_by_id.keys()
            keys = [k for k in self.core.states if k[1] in gone]
            if keys:
                task = asyncio.get_running_loop().create_task(self._delete_all(keys))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _delete_all(self, keys: list[Key]) -> None:
        for key in keys:
            code = await self.delete(key)
            if code != E.NONE:
                log.warning("share state of deleted topic %s not deleted: error %d", key, code)

    def _load(self, partition: int) -> None:
        part = self.broker.replica_manager.get(SHARE_STATE_TOPIC, partition)
        if part is None:
            return
        plog = part.log
        end = plog.log_end_offset

        def replay() -> Iterator[tuple[int, int, Key, object | None]]:
            for r in keyed_records(plog, plog.log_start_offset, end):
                assert r.key is not None
                try:
                    record_type, key = decode_key(r.key)
                    value: object | None = None
                    if r.value is not None:
                        value = (decode_snapshot(r.value) if record_type == SNAPSHOT
                                 else decode_update(r.value))
                except (CorruptShareRecord, UnicodeDecodeError, ValueError) as e:
                    log.warning("%s-%d: skipping a record: %s", SHARE_STATE_TOPIC, partition, e)
                    continue
                yield r.offset, record_type, key, value

        n = self.core.load(partition, replay())
        log.info("loaded %s-%d: %d records", SHARE_STATE_TOPIC, partition, n)

    async def ensure_topic(self) -> int:
        c = self.broker.config
        min_isr = c.get("share.coordinator.state.topic.min.isr")
        segment_bytes = c.get("share.coordinator.state.topic.segment.bytes")
        return await ensure_internal_topic(
            self.broker, self._create_lock, SHARE_STATE_TOPIC,
            c.get("share.coordinator.state.topic.num.partitions"),
            c.get("share.coordinator.state.topic.replication.factor"),
            lambda rf: state_topic_configs(rf, min_isr, segment_bytes))

    # -- writing --------------------------------------------------------------------------
    def _refused(self, key: Key) -> int:
        """Asked before the core changes anything: the partition's ISR below its
        min.insync.replicas refuses the write (COORDINATOR_NOT_AVAILABLE)."""
        if self.core.coordinator_error(key) != E.NONE:
            return E.NONE
        part = self.broker.replica_manager.get(SHARE_STATE_TOPIC, self.core.partition_for(key))
        return mapped(GROUP_ERRORS, min_isr_error(part))

    async def _append(self, out: list[Record], key: Key) -> int:
        """Append the records and wait until the ISR has the key's partition up to
        its log end offset; NONE or the error to answer."""
        return await self._append_to(self.core.partition_for(key), out)

    async def _append_to(self, p: int, out: list[Record]) -> int:
        part = self.broker.replica_manager.get(SHARE_STATE_TOPIC, p)
        if part is None:
            return E.NOT_COORDINATOR
        if out:
            batch = bytearray(batches.build_batch(
                [batches.Record(offset=-1, timestamp=wall_ms(), key=k, value=v)
                 for _, k, v in out]))
            headers = list(batches.iter_batch_headers(batch))
            try:
                info = part.log.append_as_leader(batch, headers, part.leader_epoch)
            except OSError as e:
                log.error("append to %s-%d failed: %s", SHARE_STATE_TOPIC, p, e)
                # the memory is ahead of the log: load the partition again
                self.core.unload(p)
                self._load(p)
                return E.COORDINATOR_NOT_AVAILABLE
            self.core.appended(p, info.first_offset, out, part.log.high_watermark)
            advance_high_watermark(self.broker, part)
            self.writes += 1
        code = await wait_replicated(self.broker, part, self.write_timeout_ms, write=bool(out))
        return mapped(GROUP_ERRORS, code)

    # -- requests -------------------------------------------------------------------------
    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> int:
        code = self._refused(key)
        if code != E.NONE:
            return code
        out: list[Record] = []
        code = self.core.initialize(key, state_epoch, start_offset, wall_ms(), out)
        return code if code != E.NONE else await self._append(out, key)

    async def read(self, key: Key, leader_epoch: int) -> tuple[int, ShareSnapshot | None]:
        code = self._refused(key)
        if code != E.NONE:
            return code, None
        out: list[Record] = []
        code, state = self.core.read(key, leader_epoch, wall_ms(), out)
        if code != E.NONE:
            return code, None
        code = await self._append(out, key)
        return (code, state) if code == E.NONE else (code, None)

    async def summary(self, key: Key) -> tuple[int, ShareSnapshot | None]:
        code, state = self.core.summary(key)
        if code != E.NONE:
            return code, None
        code = await self._append([], key)
        return (code, state) if code == E.NONE else (code, None)

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    state_batches: list[Batch]) -> int:
        code = self._refused(key)
        if code != E.NONE:
            return code
        out: list[Record] = []
        code = self.core.write(key, state_epoch, leader_epoch, start_offset, state_batches,
                               wall_ms(), out)
        return code if code != E.NONE else await self._append(out, key)

    async def delete(self, key: Key) -> int:
        code = self._refused(key)
        if code != E.NONE:
            return code
        out: list[Record] = []
        code = self.core.delete(key, out)
        return code if code != E.NONE else await self._append(out, key)
