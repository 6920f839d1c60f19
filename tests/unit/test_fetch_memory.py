"""FetchMemory: what a fetch may read, waiting for room, giving back."""

from __future__ import annotations

import asyncio

from odradek.broker.fetch_memory import INT32_MAX, FetchMemory


def test_unlimited_budget_counts_nothing() -> None:
    memory = FetchMemory(-1)
    memory.reserve(10**9)
    assert memory.available() == INT32_MAX and memory.used_bytes == 0


def test_reads_are_capped_by_what_is_left_and_a_spent_budget_waits() -> None:
    async def run() -> None:
        memory = FetchMemory(1000)
        memory.reserve(600)
        assert memory.available() == 400
        memory.reserve(700)  # one batch over: non-strict
        assert memory.available() == 0
        assert not await memory.wait_for_room(0.01)
        assert memory.waits == 1
        waiter = asyncio.ensure_future(memory.wait_for_room(5))
        await asyncio.sleep(0)
        memory.release(700)
        assert await waiter
        assert memory.available() == 400 and memory.waits == 2
        memory.release(600)
        assert memory.used_bytes == 0

    asyncio.run(run())
