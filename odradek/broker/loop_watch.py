"""How long the event loop was kept from running, and what Python's GC took of it.

A broker process runs all its connections on one asyncio loop: a callback that
runs long (a synchronous fsync, a large decode, a full garbage collection)
delays every client of the process at once. `LoopWatch` wakes every
`INTERVAL_S` and records how late it woke in `odradek_event_loop_lag_seconds`
(a histogram); a lag above `WARN_S` is logged as a warning, with the garbage
collections that ran meanwhile, so that a latency spike seen by clients can be
matched to its cause. A gc callback times every collection into
`odradek_gc_pause_seconds{generation}`.

One wake-up every 50 ms costs a few microseconds; the gc callback runs only when
Python collects.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

log = logging.getLogger(__name__)

INTERVAL_S = 0.05
WARN_S = 0.1
LAG_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
GC_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)


class LoopWatch:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag = Histogram("odradek_event_loop_lag_seconds",
                             "How late the event loop ran a timer due every "
                             f"{INTERVAL_S * 1000:.0f} ms (time it was kept busy)",
                             buckets=LAG_BUCKETS_S, registry=registry)
        gc_pause = Histogram("odradek_gc_pause_seconds",
                             "Python garbage collections, by generation",
                             ["generation"], buckets=GC_BUCKETS_S, registry=registry)
        self._gc_children = [gc_pause.labels(str(g)) for g in range(3)]
        self._gc_started = 0.0
        # collections since the last lag sample: (generation, seconds)
        self._gc_recent: list[tuple[int, float]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            gc.callbacks.append(self._on_gc)
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is None:
            return
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        seconds = time.perf_counter() - self._gc_started
        generation = int(info.get("generation", 0))
        if 0 <= generation < 3:
            self._gc_children[generation].observe(seconds)
        if len(self._gc_recent) < 100:
            self._gc_recent.append((generation, seconds))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        observe = self.lag.observe
        while True:
            due = loop.time() + INTERVAL_S
            await asyncio.sleep(INTERVAL_S)
            lag = max(loop.time() - due, 0.0)
            observe(lag)
            recent, self._gc_recent = self._gc_recent, []
            if lag > WARN_S:
                collected = sum(s for _g, s in recent)
                log.warning("the event loop was blocked for %.0f ms (garbage collection took "
                            "%.0f ms of it in %d collections, the longest of generation %s)",
                            lag * 1000, collected * 1000, len(recent),
                            max(recent, key=lambda r: r[1])[0] if recent else "-")
