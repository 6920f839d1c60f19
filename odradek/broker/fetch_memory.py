"""The memory budget of consumer fetch answers (`odradek.fetch.memory.max.bytes`).

ShareFetch answers (handlers/share_groups.py) draw from the same budget, the
same way: a share fetch acquires records only up to what is available (at
least one batch), so records it could not hold stay available to others.

Theory of operation. A consumer's Fetch answer holds the record bytes it read
(up to the request's `fetch.max.bytes`, 50 MiB by default in Kafka's clients)
from the moment the handler reads them until the network layer has handed the
answer to the socket and the connection's write buffer is back under its
high-water mark. Many consumers asking for big answers at once would make the
broker's memory the sum of their `fetch.max.bytes`; with this budget it is at
most the budget plus one answer:

- the fetch handler asks `available()` before reading and reads at most that
  much (always at least one batch, as Kafka does when max bytes is small, so
  the budget is exceeded by at most one answer's first batch: non-strict, like
  Kafka's request memory pool);
- what it read is `reserve`d and handed to the connection, which `release`s it
  once the answer is written (or the connection closes);
- when nothing is available the handler waits for a release up to the fetch's
  `max.wait.ms`, then reads one batch (every consumer still progresses, slowly:
  load is shed by slowing consumers down, not by growing). Such waits are
  counted. So the answers' records take at most the budget plus one batch per
  connection (bounded by `message.max.bytes` and `max.connections`), where
  without it they take up to `fetch.max.bytes` per connection: a consumer that
  does not read its answers holds one whole answer in the write buffer.

Fetch sessions are bounded apart (`max.incremental.fetch.session.cache.slots`),
requests read but not answered by `queued.max.request.bytes`, and a follower's
fetch (handlers/replica_fetch.py) is not held back: replication must not stall
behind consumers.

Metrics: `odradek_fetch_memory_bytes` (held now), `odradek_fetch_memory_max_bytes`,
`odradek_fetch_memory_waits` (fetches that found the budget spent).
"""

from __future__ import annotations

import asyncio

INT32_MAX = 2**31 - 1


class FetchMemory:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes  # <= 0: no limit
        self.used_bytes = 0
        self.waits = 0
        self._room: asyncio.Event | None = None

    @property
    def limited(self) -> bool:
        return self.max_bytes > 0

    def available(self) -> int:
        if not self.limited:
            return INT32_MAX
        return max(0, self.max_bytes - self.used_bytes)

    def reserve(self, n: int) -> None:
        if self.limited and n > 0:
            self.used_bytes += n

    def release(self, n: int) -> None:
        if not self.limited or n <= 0:
            return
        self.used_bytes -= n
        assert self.used_bytes >= 0, "released more than reserved"
        if self._room is not None and self.used_bytes < self.max_bytes:
            self._room.set()
            self._room = None

    async def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until some of the budget is free, at most `timeout_s`; True if it is."""
        if self.available() > 0:
            return True
        self.waits += 1
        if timeout_s <= 0:
            return False
        if self._room is None:
            self._room = asyncio.Event()
        try:
            await asyncio.wait_for(self._room.wait(), timeout_s)
        except TimeoutError:
            pass
        return self.available() > 0
