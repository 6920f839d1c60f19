"""The cleaner workers' idle priority and its starvation bound (storage/cleaner/manager.py).

A worker runs SCHED_IDLE, so on a CPU-saturated machine it may get no CPU at all; a
worker call still running after `odradek.log.cleaner.idle.max.ms` is lifted to
SCHED_OTHER (nice 19) for its rest, and the worker returns to SCHED_IDLE at its next
call. Real worker processes (spawn), as the broker runs them.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from typing import Any

from odradek.storage.cleaner import worker
from odradek.storage.cleaner.manager import CleanerConfig, LogCleaner


def test_a_call_past_the_bound_is_lifted_out_of_idle_priority_until_the_next_call() -> None:
    async def scenario() -> None:
        cleaner = LogCleaner(CleanerConfig(idle_max_ms=300, cgroup_idle=False), None)  # type: ignore[arg-type]
        cleaner._stop_event = multiprocessing.get_context("spawn").Event()
        pool = cleaner._new_pool()
        cleaner._pools.append(pool)
        try:
            await cleaner._start_worker(0)
            pid = cleaner._pids[0]
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            assert os.getpriority(os.PRIO_PROCESS, pid) == worker.WORKER_NICENESS
            # a short call stays idle
            await cleaner._call(0, pool, time.sleep, 0.01)
            assert cleaner.promotions == 0
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
            # a call longer than the bound is lifted, and keeps nice 19
            started = time.monotonic()
            await cleaner._call(0, pool, time.sleep, 1.0)
            assert time.monotonic() - started >= 1.0
            assert cleaner.promotions == 1
            assert os.sched_getscheduler(pid) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, pid) == worker.WORKER_NICENESS
            # the worker's next step starts idle again
            await cleaner._call(0, pool, worker.idle_again)
            assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    asyncio.run(scenario())


def test_a_bound_of_zero_never_lifts() -> None:
    async def scenario() -> Any:
        cleaner = LogCleaner(CleanerConfig(idle_max_ms=0, cgroup_idle=False), None)  # type: ignore[arg-type]
        cleaner._stop_event = multiprocessing.get_context("spawn").Event()
        pool = cleaner._new_pool()
        cleaner._pools.append(pool)
        try:
            await cleaner._start_worker(0)
            await cleaner._call(0, pool, time.sleep, 0.5)
            assert cleaner.promotions == 0
            assert os.sched_getscheduler(cleaner._pids[0]) == os.SCHED_IDLE
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    asyncio.run(scenario())
