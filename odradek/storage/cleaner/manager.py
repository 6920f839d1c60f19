"""The log cleaner of a broker: which log to clean when, and swapping the result in.

Theory of operation (Kafka's ``LogCleaner`` + ``LogCleanerManager``)
--------------------------------------------------------------------
With ``log.cleaner.enable`` and ``log.cleaner.threads`` > 0 the broker runs
that many cleaner loops on its event loop, each paired with a worker process
(storage/cleaner/worker.py). A loop:

1. picks the filthiest log (``grab_filthiest_log``): among the online logs
   whose ``cleanup.policy`` contains ``compact`` and that no other loop is
   cleaning, those with dirty bytes and either a dirty ratio of at least
   ``min.cleanable.dirty.ratio`` or a dirty segment older than
   ``max.compaction.lag.ms`` (by its first batch's timestamp); the highest
   ratio wins. With none, a log whose earliest pending delete horizon has
   passed (its tombstones or markers can now go) is taken. With none of
   those either, the loop sleeps ``log.cleaner.backoff.ms``.
2. snapshots the log's segments into a ``CleanTask`` and runs ``clean_log``
   (storage/cleaner/cleaner.py) in its worker process;
3. swaps each cleaned group in (storage/cleaner/swap.py): the ``.cleaned ->
   .swap`` renames and directory fsyncs on a thread, the renames that change
   what the log serves on the event loop in one step. A group whose old
   segments are no longer exactly the log's (retention or DeleteRecords
   removed one, the log was deleted or truncated) is discarded, and the
   cleaning is not counted: the checkpoint stays;
4. records the new first dirty offset in ``cleaner-offset-checkpoint`` of the
   log's dir (Kafka's text checkpoint, storage/checkpoint.py), written on a
   thread.

The dirty section is ``[first dirty, first uncleanable)``. First dirty is the
checkpointed offset, or the log start offset when there is none or it lies
outside ``[log start, log end]``. First uncleanable is the least of: the
active segment's base (the active segment is never cleaned), the last stable
offset (an open transaction's records are not cleaned; the high watermark
when there is no transaction support), the base of the segment holding the
recovery point (only flushed segments are cleaned; not in Kafka, which
relies on the roll's flush), and with ``min.compaction.lag.ms`` > 0 the base
of the first dirty segment holding a record newer than that lag. The dirty
ratio is dirty bytes / (clean + dirty bytes), both counted in whole segments.

A log whose cleaning fails (a corrupt batch, an I/O error) is marked
uncleanable until the broker restarts, as in Kafka, and the error logged.

Bounds: ``log.cleaner.threads`` loops and processes;
``log.cleaner.dedupe.buffer.size`` / threads bytes of offset map per worker;
``log.cleaner.io.buffer.size`` / threads of I/O buffers per worker (half for
reads, half for writes); ``log.cleaner.io.max.bytes.per.second`` / threads
of I/O per worker.

Test knob: ``ODRADEK_CLEANER_STEP_DELAY_MS`` (environment) makes a cleaning
pause that long between its steps (each group written, each rename), so a
test can kill the broker in the middle of a swap.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import time
from bisect import bisect_right
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.storage.checkpoint import CorruptCheckpoint, OffsetCheckpointFile, fsync_dir
from odradek.storage.cleaner import swap, worker
from odradek.storage.cleaner.cgroup import IdleCgroup
from odradek.storage.cleaner.task import CleanedGroup, CleanResult, CleanTask, SegmentInfo
from odradek.storage.log import KafkaStorageError, PartitionLog, wall_clock_ms
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
STEP_DELAY_ENV = "ODRADEK_CLEANER_STEP_DELAY_MS"
# How long stop() waits for the workers to exit before killing them. They run
# SCHED_IDLE in an idle cgroup, so on a busy machine even an idle worker can wait
# seconds for the CPU it needs to exit (every broker stop in the tests paid 5 s).
# Killing one is safe: a cleaning in progress leaves only `.cleaned` files, which
# the next start removes (storage/swap_files.py), as after a crash.
STOP_TIMEOUT_S = 1.0
LONG_MAX = 2**63 - 1
MB = 1024 * 1024

TopicPartition = tuple[str, int]


def is_compacted(config: LogConfig) -> bool:
    return "compact" in config.cleanup_policy.split(",")


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True  # log.cleaner.enable
    threads: int = 1  # log.cleaner.threads
    dedupe_buffer_size: int = 134217728  # log.cleaner.dedupe.buffer.size
    io_buffer_size: int = 524288  # log.cleaner.io.buffer.size
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    backoff_ms: int = 15000  # log.cleaner.backoff.ms
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    step_delay_ms: int = 0  # ODRADEK_CLEANER_STEP_DELAY_MS (tests)
    cgroup_idle: bool = True  # odradek.log.cleaner.cgroup.idle
    # odradek.log.cleaner.idle.max.ms: a worker call that takes longer at idle
    # priority is lifted to nice 19 SCHED_OTHER for its rest (0: never)
    idle_max_ms: int = 30000

    @classmethod
    def from_broker_config(cls, config: Any) -> CleanerConfig:
        rate = float(config.get("log.cleaner.io.max.bytes.per.second"))
        return cls(
            enable=bool(config.get("log.cleaner.enable")),
            threads=int(config.get("log.cleaner.threads")),
            dedupe_buffer_size=int(config.get("log.cleaner.dedupe.buffer.size")),
            io_buffer_size=int(config.get("log.cleaner.io.buffer.size")),
            io_buffer_load_factor=float(config.get("log.cleaner.io.buffer.load.factor")),
            backoff_ms=int(config.get("log.cleaner.backoff.ms")),
            io_max_bytes_per_second=rate if rate < 1.7e308 else float("inf"),
            step_delay_ms=int(os.environ.get(STEP_DELAY_ENV, "0") or 0),
            cgroup_idle=bool(config.get("odradek.log.cleaner.cgroup.idle")),
            idle_max_ms=int(config.get("odradek.log.cleaner.idle.max.ms")),
        )


@dataclass(frozen=True, slots=True)
class LogToClean:
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int  # > 0: max.compaction.lag.ms passed by this much

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def need_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0


def _last_stable_offset(plog: PartitionLog) -> int:
    # The transaction code gives logs a last_stable_offset; without it, the HW.
    lso = getattr(plog, "last_stable_offset", None)
    return plog.high_watermark if lso is None else min(int(lso), plog.high_watermark)


def cleanable_offsets(
    plog: PartitionLog, checkpointed: int | None, now_ms: int
) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) of a log."""
    start, end = plog.log_start_offset, plog.log_end_offset
    first_dirty = start if checkpointed is None or not start <= checkpointed <= end else (
        checkpointed)
    segments = plog.segments
    bases = [s.base_offset for s in segments]
    candidates = [segments[-1].base_offset, _last_stable_offset(plog)]
    holding_recovery_point = bisect_right(bases, plog.recovery_point) - 1
    if holding_recovery_point >= 0:
        candidates.append(bases[holding_recovery_point])
    lag_ms = max(plog.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment in segments[:-1]:
            if segment.next_offset <= first_dirty:
                continue
            if segment.largest_timestamp_ms() > now_ms - lag_ms:
                candidates.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(candidates))


def max_compaction_delay_ms(plog: PartitionLog, first_dirty: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not)."""
    lag_ms = max(plog.config.max_compaction_lag_ms, 0)
    if lag_ms >= LONG_MAX:
        return 0
    earliest = LONG_MAX
    for segment in plog.segments[:-1]:
        if segment.next_offset <= first_dirty or segment.size_bytes == 0:
            continue
        first_timestamp = segment.rolling_based_timestamp_ms
        if first_timestamp is not None and first_timestamp > 0:
            earliest = min(earliest, first_timestamp)
    clean_until = now_ms - lag_ms
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(plog: PartitionLog, checkpointed: int | None, now_ms: int) -> LogToClean:
    first_dirty, uncleanable = cleanable_offsets(plog, checkpointed, now_ms)
    clean = dirty = 0
    for segment in plog.segments:
        if segment.base_offset < first_dirty:
            clean += segment.size_bytes
        if segment.next_offset > first_dirty and segment.base_offset < uncleanable:
            dirty += segment.size_bytes
    return LogToClean(plog, first_dirty, uncleanable, clean, dirty,
                      max_compaction_delay_ms(plog, first_dirty, now_ms))


def make_task(
    config: CleanerConfig, ltc: LogToClean, segments: list[LogSegment], now_ms: int
) -> CleanTask:
    """The worker's task for ``ltc``, with this worker's share of the cleaner's
    memory and I/O budgets."""
    plog, log_config, threads = ltc.log, ltc.log.config, max(config.threads, 1)
    return CleanTask(
        dir=str(plog.dir),
        topic=plog.topic,
        partition=plog.partition,
        segments=tuple(SegmentInfo(s.base_offset, s.size_bytes, s.next_offset)
                       for s in segments),
        log_start_offset=plog.log_start_offset,
        first_dirty_offset=ltc.first_dirty_offset,
        first_uncleanable_offset=ltc.first_uncleanable_offset,
        now_ms=now_ms,
        delete_retention_ms=log_config.delete_retention_ms,
        segment_bytes=log_config.segment_bytes,
        segment_index_bytes=log_config.segment_index_bytes,
        index_interval_bytes=log_config.index_interval_bytes,
        map_memory_bytes=max(1, min(config.dedupe_buffer_size // threads, 2**31 - 1)),
        map_load_factor=config.io_buffer_load_factor,
        io_buffer_bytes=max(config.io_buffer_size // threads, 1),
        max_message_bytes=log_config.max_message_bytes,
        max_io_bytes_per_second=config.io_max_bytes_per_second / threads,
        step_delay_ms=config.step_delay_ms,
    )


def clean_now(
    plog: PartitionLog, config: CleanerConfig, checkpointed: int | None, now_ms: int
) -> tuple[LogToClean, CleanResult]:
    """Clean ``plog`` once, synchronously, in this process, and swap the result in
    (tests and tools; the broker uses ``LogCleaner``). Returns what was cleaned."""
    from odradek.storage.cleaner.cleaner import LogCleaning

    ltc = log_to_clean(plog, checkpointed, now_ms)
    segments = plog.segments
    cleaning = LogCleaning(make_task(config, ltc, segments, now_ms))
    by_base = {s.base_offset: s for s in segments}
    for i in range(len(cleaning.groups)):
        group = cleaning.clean_group(i)
        swap.commit_cleaned(plog.dir, group)
        swap.swap_in(plog, [by_base[b] for b in group.old_bases], group, now_ms)
    fsync_dir(plog.dir)
    return ltc, cleaning.finish()


class LogCleaner:
    """See the module docstring."""

    def __init__(
        self,
        config: CleanerConfig,
        log_manager: LogManager,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.log_manager = log_manager
        self._clock_ms = clock_ms
        self._first_dirty: dict[TopicPartition, int] = {}
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._pools: list[ProcessPoolExecutor] = []  # one single-process pool per thread
        self._pids: dict[int, int] = {}  # worker index -> its process id (ready())
        self.promotions = 0  # worker calls lifted out of idle priority (starvation bound)
        self._stop_event: Any = None
        self._cgroup: IdleCgroup | None = None  # the workers' idle cpu cgroup, if any
        self._checkpoint_lock = asyncio.Lock()
        self.cleanings = 0  # completed cleanings, for tests and metrics
        self._swap_ms = 0.0  # longest swap_in of the cleaning under way
        self.last_stats: dict[TopicPartition, CleanResult] = {}

    @property
    def enabled(self) -> bool:
        return self.config.enable and self.config.threads > 0

    # -- lifecycle ---------------------------------------------------------------------------
    def load_checkpoints(self) -> None:
        for dir in self.log_manager.online_dirs():
            try:
                offsets = OffsetCheckpointFile(dir / CLEANER_OFFSET_CHECKPOINT).read()
            except (CorruptCheckpoint, UnicodeDecodeError, OSError) as e:
                log.warning("ignoring %s: %s", dir / CLEANER_OFFSET_CHECKPOINT, e)
                continue
            self._first_dirty.update(offsets)

    def start(self) -> None:
        self.load_checkpoints()
        if not self.enabled:
            log.info("log cleaner disabled (log.cleaner.enable=%s, log.cleaner.threads=%d)",
                     self.config.enable, self.config.threads)
            return
        self._stop_event = multiprocessing.get_context("spawn").Event()
        if self.config.cgroup_idle:
            self._cgroup = IdleCgroup.create_for_this_process()
        loop = asyncio.get_running_loop()
        for i in range(self.config.threads):
            # One process per cleaner thread: a cleaning's offset map stays in
            # its process while its groups are cleaned and swapped one by one.
            self._pools.append(self._new_pool())
            self._tasks.append(loop.create_task(self._run(i), name=f"log-cleaner-{i}"))
        log.info(
            "log cleaner started: %d thread(s), %.1f MB offset map each (%d keys at load "
            "factor %.2f)", self.config.threads, self._map_bytes() / MB,
            int(self._map_bytes() // 24 * self.config.io_buffer_load_factor),
            self.config.io_buffer_load_factor,
        )

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=worker.init_worker,
            initargs=(os.getpid(), self._stop_event,
                      str(self._cgroup.procs_file) if self._cgroup is not None else None),
        )

    async def _start_worker(self, index: int) -> None:
        """Start worker ``index``'s process now (not at the first cleaning) and log
        where its CPU priority comes from."""
        try:
            pid, placement = await asyncio.get_running_loop().run_in_executor(
                self._pools[index], worker.ready)
        except BrokenProcessPool:
            return  # the next cleaning finds out and starts another
        self._pids[index] = pid
        log.info("cleaner worker %d: pid %d, %s", index, pid, placement)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if not self._pools:
            self._remove_cgroup()
            return
        self._stop_event.set()
        pools, self._pools = self._pools, []

        def shutdown() -> None:
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)

        try:
            await asyncio.wait_for(asyncio.to_thread(shutdown), STOP_TIMEOUT_S)
        except TimeoutError:
            for pool in pools:
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.kill()
                    process.join(1.0)  # the idle cgroup can go once it is empty
            log.info("killed cleaner workers that did not exit within %.1f s", STOP_TIMEOUT_S)
        self._remove_cgroup()

    def _remove_cgroup(self) -> None:
        group, self._cgroup = self._cgroup, None
        if group is not None and not group.remove():
            log.warning("could not remove the cleaner cgroup %s", group.path)

    def _map_bytes(self) -> int:
        return max(1, min(self.config.dedupe_buffer_size // max(self.config.threads, 1),
                          2**31 - 1))

    # -- choosing --------------------------------------------------------------------------------
    def grab_filthiest_log(self, now_ms: int | None = None) -> LogToClean | None:
        """The log to clean next (marked in progress), or None."""
        now_ms = self._clock_ms() if now_ms is None else now_ms
        candidates: list[LogToClean] = []
        expired: list[LogToClean] = []
        for plog in self.log_manager.online_logs():
            key = (plog.topic, plog.partition)
            if not is_compacted(plog.config) or key in self._in_progress or (
                    key in self._uncleanable):
                continue
            ltc = log_to_clean(plog, self._first_dirty.get(key), now_ms)
            if ltc.cleanable_bytes > 0 and (
                ltc.need_compaction_now
                or ltc.cleanable_ratio >= plog.config.min_cleanable_dirty_ratio
            ):
                candidates.append(ltc)
                continue
            horizon = self._delete_horizons.get(key, -1)
            if 0 <= horizon <= now_ms and ltc.clean_bytes > 0:
                expired.append(ltc)
        chosen: LogToClean | None = None
        if candidates:
            chosen = max(candidates, key=lambda c: (c.need_compaction_now, c.cleanable_ratio))
        elif expired:
            chosen = expired[0]
        if chosen is not None:
            self._in_progress.add((chosen.log.topic, chosen.log.partition))
        return chosen

    # -- cleaning --------------------------------------------------------------------------------
    async def _run(self, index: int) -> None:
        backoff_s = max(self.config.backoff_ms, 10) / 1000
        await self._start_worker(index)
        while True:
            ltc = self.grab_filthiest_log()
            if ltc is None:
                await asyncio.sleep(backoff_s)
                continue
            key = (ltc.log.topic, ltc.log.partition)
            try:
                await self.clean(ltc, index)
            except asyncio.CancelledError:
                raise
            except BrokenProcessPool:
                # The worker died (killed, out of memory): not the log's fault.
                log.error("cleaner worker %d died while cleaning %s-%d; starting another",
                          index, *key)
                self._pools[index] = self._new_pool()
                await self._start_worker(index)
            except Exception as e:
                if self._gone(ltc.log):
                    log.info("stopped cleaning %s-%d: the log went away", *key)
                else:
                    self._uncleanable.add(key)
                    log.error("cleaning %s-%d failed; it is not cleaned again until the "
                              "broker restarts: %s", *key, e, exc_info=not isinstance(e, OSError))
            finally:
                self._in_progress.discard(key)

    def _gone(self, plog: PartitionLog) -> bool:
        return plog.offline or self.log_manager.get(plog.topic, plog.partition) is not plog

    def make_task(self, ltc: LogToClean, segments: list[LogSegment]) -> CleanTask:
        return make_task(self.config, ltc, segments, self._clock_ms())

    async def clean(self, ltc: LogToClean, index: int = 0) -> bool:
        """Clean one log (already marked in progress) with worker ``index``, swapping
        each group in as it is done; True if the whole cleaning was swapped in."""
        plog = ltc.log
        key = (plog.topic, plog.partition)
        segments = plog.segments
        task = self.make_task(ltc, segments)
        pool = self._pools[index]
        group_count: int = await self._call(index, pool, worker.begin, task)
        by_base = {s.base_offset: s for s in segments}
        sizes = {s.base_offset: s.size_bytes for s in task.segments}
        for i in range(group_count):
            group: CleanedGroup = await self._call(index, pool, worker.clean_group, i)
            old = [by_base[b] for b in group.old_bases]
            if not await self._swap(plog, old, group, sizes):
                log.info("cleaning of %s-%d stopped after %d of %d group(s): its segments "
                         "changed meanwhile", *key, i, group_count)
                return False
        result: CleanResult = await self._call(index, pool, worker.finish)
        swap_ms, self._swap_ms = self._swap_ms, 0.0
        self._first_dirty[key] = result.end_offset
        self._delete_horizons[key] = result.earliest_delete_horizon_ms
        self.cleanings += 1
        self.last_stats[key] = result
        await self.write_checkpoint(self.log_manager.dir_of(plog))
        _log_stats(plog, ltc, result, swap_ms)
        return True

    async def _call(self, index: int, pool: ProcessPoolExecutor, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in worker ``index``. The starvation bound: a worker runs at idle
        priority, so on a CPU-saturated machine it may get no CPU at all (Kafka's cleaner
        threads have no such priority and always progress). A call still running after
        ``odradek.log.cleaner.idle.max.ms`` is lifted to nice 19 SCHED_OTHER, out of the
        idle cgroup, for its rest: it then gets a small but certain share. The worker
        goes back to idle priority at its next call (worker.py)."""
        fut = asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        bound_s = self.config.idle_max_ms / 1000.0
        if bound_s <= 0:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), bound_s)
        except TimeoutError:
            self._promote(index, bound_s)
        return await fut

    def _promote(self, index: int, bound_s: float) -> None:
        pid = self._pids.get(index)
        if pid is None:
            return
        try:
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        except (OSError, AttributeError) as e:
            log.warning("cleaner worker %d (pid %d) starved at idle priority for %.0f s and "
                        "cannot be raised: %s", index, pid, bound_s, e)
            return
        if self._cgroup is not None:
            self._cgroup.release(pid)
        self.promotions += 1
        log.info("cleaner worker %d (pid %d) had no CPU at idle priority for %.0f s "
                 "(odradek.log.cleaner.idle.max.ms): raised to nice 19 for the rest of this "
                 "step", index, pid, bound_s)

    async def _swap(self, plog: PartitionLog, old: list[LogSegment], group: CleanedGroup,
                    sizes: dict[int, int]) -> bool:
        delay = self.config.step_delay_ms
        if self._gone(plog) or not self._still_there(plog, old, sizes):
            await asyncio.to_thread(swap.discard, plog.dir, group)
            return False
        await asyncio.to_thread(swap.commit_cleaned, plog.dir, group, delay)
        if self._gone(plog) or not self._still_there(plog, old, sizes):
            swap.discard(plog.dir, group)
            return False
        started = time.monotonic()
        try:
            swap.swap_in(plog, old, group, self._clock_ms(), delay)
        except OSError as e:
            if plog.on_io_error is not None:
                plog.on_io_error(plog, e)
            raise KafkaStorageError(f"swapping cleaned segments into {plog.dir}: {e}") from e
        # What the event loop spent swapping (it serves nothing meanwhile).
        self._swap_ms = max(self._swap_ms, (time.monotonic() - started) * 1000)
        await asyncio.to_thread(fsync_dir, plog.dir)
        return True

    @staticmethod
    def _still_there(plog: PartitionLog, old: list[LogSegment], sizes: dict[int, int]) -> bool:
        segments = plog.segments
        try:
            i = next(i for i, s in enumerate(segments) if s is old[0])
        except StopIteration:
            return False
        run = segments[i : i + len(old)]
        return (
            len(run) == len(old)
            and all(a is b for a, b in zip(run, old))
            and i + len(old) < len(segments)  # never the active segment
            and all(s.size_bytes == sizes.get(s.base_offset) for s in old)
        )

    async def write_checkpoint(self, dir: Path) -> None:
        """Write ``cleaner-offset-checkpoint`` of ``dir`` from the logs it holds."""
        offsets = {
            (plog.topic, plog.partition): self._first_dirty[(plog.topic, plog.partition)]
            for plog in self.log_manager.online_logs()
            if (plog.topic, plog.partition) in self._first_dirty
            and self.log_manager.dir_of(plog) == dir
        }
        async with self._checkpoint_lock:
            try:
                await asyncio.to_thread(
                    OffsetCheckpointFile(dir / CLEANER_OFFSET_CHECKPOINT).write, offsets)
            except OSError as e:
                self.log_manager.mark_dir_offline(dir, e)

    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        return self._first_dirty.get((topic, partition))


def _log_stats(plog: PartitionLog, ltc: LogToClean, result: CleanResult,
               swap_ms: float) -> None:
    s = result.stats
    seconds = s.map_seconds + s.clean_seconds
    processed = s.bytes_read + s.map_bytes_read
    log.info(
        "cleaned %s-%d: dirty section [%d, %d) of [%d, %d), %d group(s); %.1f MB processed in "
        "%.2f s (%.1f MB/s; map %.2f s, %d records, %d/%d slots%s); %d/%d records and "
        "%.1f/%.1f MB kept (%d tombstones, %d aborted records, %d markers removed); "
        "longest swap on the event loop %.1f ms%s",
        plog.topic, plog.partition, ltc.first_dirty_offset, result.end_offset,
        ltc.first_dirty_offset, ltc.first_uncleanable_offset, len(result.groups),
        processed / MB, seconds, processed / MB / seconds if seconds > 0 else 0.0,
        s.map_seconds, s.map_records, result.map_entries, result.map_slots,
        ", map full" if result.map_full else "", s.records_retained, s.records_read,
        s.bytes_written / MB, s.bytes_read / MB, s.tombstones_removed,
        s.aborted_records_removed, s.markers_removed, swap_ms,
        f"; throttled {s.throttled_seconds:.2f} s" if s.throttled_seconds else "",
    )
