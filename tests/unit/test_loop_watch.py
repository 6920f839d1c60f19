"""broker/loop_watch.py: a blocked event loop is measured and logged; GC pauses are timed."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

from prometheus_client import CollectorRegistry

from odradek.broker.loop_watch import INTERVAL_S, LoopWatch


def _sample(registry: CollectorRegistry, name: str, labels: dict[str, str] | None = None) -> float:
    value = registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


def test_a_blocked_loop_is_measured_and_logged(caplog) -> None:
    registry = CollectorRegistry()
    watch = LoopWatch(registry)

    async def main() -> None:
        watch.start()
        await asyncio.sleep(INTERVAL_S * 3)  # a few on-time samples
        time.sleep(0.3)  # noqa: ASYNC251  (the point: a callback keeps the loop 300 ms)
        await asyncio.sleep(INTERVAL_S * 3)
        gc.collect()
        await watch.stop()

    with caplog.at_level(logging.WARNING, logger="odradek.broker.loop_watch"):
        asyncio.run(main())
    count = _sample(registry, "odradek_event_loop_lag_seconds_count")
    late = count - _sample(registry, "odradek_event_loop_lag_seconds_bucket", {"le": "0.1"})
    assert count >= 4
    assert late >= 1  # the 300 ms block (a loaded machine may add others)
    assert _sample(registry, "odradek_event_loop_lag_seconds_sum") >= 0.2
    assert any("event loop was blocked" in r.getMessage() for r in caplog.records)
    assert _sample(registry, "odradek_gc_pause_seconds_count", {"generation": "2"}) >= 1
    assert watch._on_gc not in gc.callbacks  # stop() removed the callback
