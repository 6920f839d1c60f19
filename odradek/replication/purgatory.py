"""Fetch purgatory: fetches that wait for data.

A fetch that found fewer than `min_bytes` parks here until an append to one of
its partitions or its `max_wait_ms` ends, then reads again. Waiters are
futures keyed by partition; an append wakes every waiter of that partition.
The number of waiters is bounded by the number of open connections (each
connection has at most one request in progress).

Followers read up to the log end offset, consumers up to the high watermark:
a waiter says which it is (`replica=True` for a follower), and a high
watermark that moves without an append (`notify_consumers`) wakes only the
consumers -- a follower woken then would read nothing and park again, once per
acks=all produce. Everything else (`notify`) wakes both.

The wait's timeout is one timer on the loop (`call_later`), not a task per
wait as `asyncio.wait_for` makes on Python 3.11: a parked fetch or acks=all
produce costs a future and a timer handle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

_Waiters = dict[Hashable, set["asyncio.Future[bool]"]]


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


def _wake(waiters: set[asyncio.Future[bool]] | None) -> None:
    if waiters:
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)


class FetchPurgatory:
    def __init__(self) -> None:
        self._waiters: _Waiters = {}  # consumers, and any other waiter
        self._replicas: _Waiters = {}  # followers: woken by appends, not by the HW

    @property
    def size(self) -> int:
        return (sum(len(s) for s in self._waiters.values())
                + sum(len(s) for s in self._replicas.values()))

    async def wait_for_any(self, keys: Iterable[Hashable], timeout_s: float,
                           replica: bool = False) -> bool:
        """Wait until one of `keys` is notified or the timeout passes.

        Returns True if woken by a notification.
        """
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        table = self._replicas if replica else self._waiters
        keys = list(keys)
        for key in keys:
            table.setdefault(key, set()).add(fut)
        timer = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            for key in keys:
                waiters = table.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del table[key]

    def notify(self, key: Hashable) -> None:
        """An append, or a change every waiter must see (leadership, truncation)."""
        _wake(self._waiters.pop(key, None))
        _wake(self._replicas.pop(key, None))

    def notify_consumers(self, key: Hashable) -> None:
        """The high watermark moved without an append: followers need not read."""
        _wake(self._waiters.pop(key, None))
