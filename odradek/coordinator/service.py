"""The asyncio shell of the group coordinator.

It owns no group logic: it creates `__consumer_offsets` on first need (through
the controller and the metadata quorum, like CreateTopics), loads the
partitions this broker leads into the core by replaying their logs (a task per
partition that yields to the event loop every LOAD_SLICE_MS; meanwhile the
partition's groups answer COORDINATOR_LOAD_IN_PROGRESS), appends
the records the core returns (one batch per partition per call) and resolves
the futures of waiting JoinGroup/SyncGroup requests. The handlers answer only
once the ISR has the group's partition up to its log end (`replicated`,
coordinator/replicated.py), with `offsets.commit.timeout.ms`. A timer task calls
`core.tick` every TICK_MS and `core.expire_offsets` every
`offsets.retention.check.interval.ms`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..clock import steady_ms
from ..configdef import ConfigError
from ..group_config import (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    SHARE_HEARTBEAT_INTERVAL,
    SHARE_SESSION_TIMEOUT,
    group_values,
)
from ..metadata import records as R
from ..metadata.image import MetadataImage
from ..protocol import records as batches
from . import errors as E
from .classic import GroupLimits
from .consumer import ConsumerConfig
from .core import OFFSETS_TOPIC, CoordinatorConfig, GroupCoordinator, Out
from .group_load import GroupLoad
from .host import CoordinatorHost
from .internal_topic import ensure_internal_topic
from .log_replay import log_batches
from .replicated import min_isr_error, wait_replicated
from .share_group import ShareGroupConfig, ShareGroups
from .txn_offsets import held_to_pending, replay_batch

log = logging.getLogger(__name__)

TICK_MS = 100
LOAD_SLICE_MS = 20  # the longest a partition load holds the event loop before yielding
MAX_WAITING_REQUESTS = 100_000  # JoinGroup/SyncGroup requests parked at once
RECORDS_PER_BATCH = 1000

TopicsView = dict[str, tuple[uuid.UUID, int]]


def coordinator_config(broker: CoordinatorHost) -> CoordinatorConfig:
    c = broker.config
    assignors = tuple(a.strip() for a in c.get("group.consumer.assignors") if a.strip())
    return CoordinatorConfig(
        num_partitions=c.get("offsets.topic.num.partitions"),
        limits=GroupLimits(
            min_session_timeout_ms=c.get("group.min.session.timeout.ms"),
            max_session_timeout_ms=c.get("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=c.get("group.initial.rebalance.delay.ms"),
            max_size=c.get("group.max.size"),
        ),
        consumer=ConsumerConfig(
            session_timeout_ms=c.get("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=c.get("group.consumer.heartbeat.interval.ms"),
            max_size=c.get("group.consumer.max.size"),
            assignors=assignors or ("uniform",),
        ),
        offsets_retention_ms=c.get("offsets.retention.minutes") * 60_000,
        offset_metadata_max_bytes=c.get("offset.metadata.max.bytes"),
        migration_policy=c.get("group.consumer.migration.policy").lower(),
    )


class GroupCoordinatorService:
    def __init__(self, broker: CoordinatorHost, clock_ms: Callable[[], int] | None = None) -> None:
        self.broker = broker
        self.core = GroupCoordinator(coordinator_config(broker))
        c = broker.config
        # share groups (KIP-932): membership only, in memory (share_group.py)
        self.share_groups = ShareGroups(ShareGroupConfig(
            session_timeout_ms=c.get("group.share.session.timeout.ms"),
            heartbeat_interval_ms=c.get("group.share.heartbeat.interval.ms"),
            max_size=c.get("group.share.max.size")))
        self.clock_ms = clock_ms or steady_ms
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._topics_cache: tuple[int, TopicsView] | None = None
        self._create_lock = asyncio.Lock()
        self._loads: dict[int, asyncio.Task[None]] = {}  # partition -> its load (group_load.py)
        self.retention_check_ms: int = broker.config.get("offsets.retention.check.interval.ms")
        self.commit_timeout_ms: int = broker.config.get("offsets.commit.timeout.ms")

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self.on_metadata(MetadataImage(), self.broker.image, [])
        self.broker.quorum.listeners.append(self.on_metadata)
        self._task = asyncio.get_running_loop().create_task(self._timer())

    async def stop(self) -> None:
        for task in list(self._loads.values()):
            task.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self._waiting.clear()

    async def _timer(self) -> None:
        last_expiry = self.clock_ms()
        while True:
            await asyncio.sleep(TICK_MS / 1000)
            try:
                now = self.clock_ms()
                out = Out()
                self.core.tick(now, self.topics(), out)
                self.share_groups.expire(now, self.topics())
                if now - last_expiry >= self.retention_check_ms:
                    last_expiry = now
                    expired = self.core.expire_offsets(now, self.topics(), out)
                    if expired:
                        log.info("expired %d committed offsets", expired)
                self.apply(out)
            except Exception:  # the timer must survive a bug in one tick
                log.exception("group coordinator tick failed")

    # -- metadata -------------------------------------------------------------------------------

    def topics(self) -> TopicsView:
        image = self.broker.image
        if self._topics_cache is None or self._topics_cache[0] != image.offset:
            view = {
                name: (t.topic_id, len(t.partitions)) for name, t in image.topics_by_name.items()
            }
            self._topics_cache = (image.offset, view)
        return self._topics_cache[1]

    def on_metadata(self, old: MetadataImage, new: MetadataImage, records: Any) -> None:
        if old.configs is not new.configs:
            self._group_configs(new)
        topic = new.topics_by_name.get(OFFSETS_TOPIC)
        led = set()
        if topic is not None:
            led = {p for p, part in topic.partitions.items() if part.leader == self.broker.node_id}
        out = Out()
        for p in sorted(set(self._loads) - led):
            self._loads.pop(p).cancel()
            self.core.cancel_load(p)
            log.info("stopped loading %s-%d: no longer its leader", OFFSETS_TOPIC, p)
        for p in sorted(self.core.loaded - led):
            self.core.unload(p, out)
            log.info("unloaded %s-%d", OFFSETS_TOPIC, p)
        loop = asyncio.get_running_loop()
        for p in sorted(led - self.core.loaded - set(self._loads)):
            if self.broker.replica_manager.get(OFFSETS_TOPIC, p) is None:
                continue
            task = loop.create_task(self._load(p, self.core.begin_load(p)))
            self._loads[p] = task
            task.add_done_callback(functools.partial(self._load_done, p))
        self.apply(out)

    def _group_configs(self, image: MetadataImage) -> None:
        """The KIP-848 group configs of the image, as the core reads them."""
        default = self.core.config.consumer
        share_default = self.share_groups.config
        configs = {}
        share_configs = {}
        for (rtype, name), entries in image.configs.items():
            if rtype != R.RESOURCE_GROUP:
                continue
            try:
                values = group_values(self.broker.config, entries)
            except ConfigError:  # validated by the controller; keep the defaults
                continue
            configs[name] = dataclasses.replace(
                default, session_timeout_ms=values[SESSION_TIMEOUT],
                heartbeat_interval_ms=values[HEARTBEAT_INTERVAL])
            share_configs[name] = dataclasses.replace(
                share_default, session_timeout_ms=values[SHARE_SESSION_TIMEOUT],
                heartbeat_interval_ms=values[SHARE_HEARTBEAT_INTERVAL])
        self.core.consumer_configs = configs
        self.share_groups.group_configs = share_configs

    def _load_done(self, partition: int, task: asyncio.Task[None]) -> None:
        if self._loads.get(partition) is task:
            del self._loads[partition]
        if not task.cancelled() and task.exception() is not None:
            self.core.cancel_load(partition)
            log.error("loading %s-%d failed", OFFSETS_TOPIC, partition, exc_info=task.exception())

    async def _load(self, partition: int, loader: GroupLoad) -> None:
        """Replay the partition in slices of at most LOAD_SLICE_MS of event-loop
        time, then install it. Records appended meanwhile (transaction markers:
        the partition's group requests are refused until then) are read too:
        the last read and the install happen in one event-loop turn."""
        part = self.broker.replica_manager.get(OFFSETS_TOPIC, partition)
        assert part is not None, "on_metadata starts a load only for a hosted partition"
        started = time.monotonic()
        plog = part.log
        # Transactional offset commits are held until their marker (txn_offsets.py).
        held: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        offset = plog.log_start_offset
        slice_end = time.monotonic() + LOAD_SLICE_MS / 1000
        while offset < plog.log_end_offset:
            before = offset
            for header, records in log_batches(plog, offset, plog.log_end_offset):
                for key, value in replay_batch(header, records, held):
                    loader.feed(key, value)
                offset = header.next_offset
                if time.monotonic() >= slice_end:
                    break
            if offset == before:
                log.warning(
                    "%s-%d: no batch at offset %d below the log end %d; loaded up to it",
                    OFFSETS_TOPIC,
                    partition,
                    offset,
                    plog.log_end_offset,
                )
                break
            if time.monotonic() >= slice_end:
                await asyncio.sleep(0)  # requests run; this partition answers LOAD_IN_PROGRESS
                offset = max(offset, plog.log_start_offset)
                slice_end = time.monotonic() + LOAD_SLICE_MS / 1000
        loader.install(self.core, self.clock_ms())
        held_to_pending(held, self.core.txn_offsets)
        log.info(
            "loaded %s-%d: %d records in %.0f ms",
            OFFSETS_TOPIC,
            partition,
            loader.count,
            (time.monotonic() - started) * 1000,
        )

    async def ensure_offsets_topic(self) -> int:
        """Create `__consumer_offsets` if it does not exist; returns an error code."""
        c = self.broker.config
        return await ensure_internal_topic(
            self.broker,
            self._create_lock,
            OFFSETS_TOPIC,
            c.get("offsets.topic.num.partitions"),
            c.get("offsets.topic.replication.factor"),
            lambda rf: {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(c.get("offsets.topic.segment.bytes")),
            },
        )

    # -- durability (coordinator/replicated.py) -------------------------------------------------

    def _partition_of(self, group_id: str) -> Any:
        return self.broker.replica_manager.get(OFFSETS_TOPIC, self.core.partition_for(group_id))

    def write_refused(self, group_id: str) -> int:
        """NOT_ENOUGH_REPLICAS when the group's partition, coordinated here, has
        fewer in-sync replicas than its min.insync.replicas; asked before the core
        changes anything. NONE otherwise (the core answers its own errors)."""
        if self.core.check(group_id) != E.NONE:
            return E.NONE
        return min_isr_error(self._partition_of(group_id))

    async def replicated(self, group_id: str, *, write: bool = True) -> int:
        """NONE once the ISR has the group's partition up to its log end offset
        as it is now, else the append error (see wait_replicated)."""
        return await wait_replicated(
            self.broker, self._partition_of(group_id), self.commit_timeout_ms, write=write
        )

    # -- effects ------------------------------------------------------------------------------

    def new_waiter(self) -> tuple[int, asyncio.Future[dict[str, Any]]] | None:
        if len(self._waiting) >= MAX_WAITING_REQUESTS:
            return None
        token = next(self._tokens)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        return token, fut

    def forget(self, token: int) -> None:
        self._waiting.pop(token, None)

    def apply(self, out: Out) -> bool:
        """Append `out.records`, then answer `out.replies`; False if an append failed."""
        ok = self._write(out.records)
        out.records = []
        for token, response in out.replies:
            fut = self._waiting.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(response)
        out.replies = []
        return ok

    def _write(self, records: list[tuple[int, bytes, bytes | None]]) -> bool:
        if not records:
            return True
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for p, key, value in records:
            by_partition.setdefault(p, []).append((key, value))
        ok = True
        now = self.clock_ms()
        rm = self.broker.replica_manager
        for p, entries in by_partition.items():
            part = rm.get(OFFSETS_TOPIC, p)
            if part is None:
                log.error(
                    "%s-%d is not hosted here; %d records dropped", OFFSETS_TOPIC, p, len(entries)
                )
                ok = False
                continue
            for i in range(0, len(entries), RECORDS_PER_BATCH):
                chunk = entries[i : i + RECORDS_PER_BATCH]
                batch = bytearray(
                    batches.build_batch(
                        [batches.Record(offset=-1, timestamp=now, key=k, value=v) for k, v in chunk]
                    )
                )
                headers = list(batches.iter_batch_headers(batch))
                try:
                    part.log.append_as_leader(batch, headers, part.leader_epoch)
                except OSError as e:
                    log.error("append to %s-%d failed: %s", OFFSETS_TOPIC, p, e)
                    ok = False
                    break
                # The high watermark: the smallest log end offset over the ISR
                # (alone in it, ours) (replication/leader_replication.py).
                self.broker.replication.on_leader_append(part)
                rm.purgatory.notify((OFFSETS_TOPIC, p))
        return ok
