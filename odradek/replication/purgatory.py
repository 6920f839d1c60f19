"""Fetch purgatory: fetches that wait for data.

A fetch that found fewer than `min_bytes` parks here until an append to one of
its partitions or its `max_wait_ms` ends, then reads again. Waiters are
futures keyed by partition; an append wakes every waiter of that partition.
The number of waiters is bounded by the number of open connections (each
connection has at most one request in progress).
"""

from __future__ import annotations

import asyncio
from typing import Hashable, Iterable


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    @property
    def size(self) -> int:
        return sum(len(s) for s in self._waiters.values())

    async def wait_for_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of `keys` is notified or the timeout passes.

        Returns True if woken by a notification.
        """
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: Hashable) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
