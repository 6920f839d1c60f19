"""A byte budget for closed segments' index entries (issue 15.5).

A segment's ``.index`` and ``.timeindex`` entries live in memory (index.py):
an active segment's from its creation, a closed segment's from its first use
(a read, a time lookup, the start-up load's sanity check). Kafka maps every
index file and lets the page cache decide; odradek holds them in ``array``
objects, about 5 MiB per GiB of log at the default ``index.interval.bytes``,
so reading a large backlog once would keep all of them until the segments are
deleted. This LRU bounds that: once the entries of closed segments' indexes
exceed ``max_bytes``, the least recently used idle ones are dropped, and the
next use reads the file again (a closed index's file holds exactly its
entries: it was trimmed when the segment rolled, or rewritten whole by a
rebuild), so lookups after a reload are those before.

Rules (the pattern of open_files.py, the LRU of open ``.log`` files)
--------------------------------------------------------------------
* One cache per process, ``INDEX_CACHE``: memory is a per-process resource.
  The broker sets the bound at start-up from
  ``odradek.log.index.cache.max.bytes``; 0 means unbounded (the default for
  code that never configures it: tools and unit tests).
* Only closed segments' indexes are in it. An active (writable) index is
  never dropped: its newest entries may not be in its file yet. It joins the
  cache when its segment rolls and leaves it if the segment becomes active
  again (a truncation back into it).
* Thread-safe. Every use of an index's entries (fetch on the event loop,
  ListOffsets by time, the scrubber, the tiered copier, the recovery threads,
  the cleaner's installs) holds a lease (``_IndexFile._acquire`` /
  ``_release``, taken around each method): an index with a lease is passed
  over by the eviction, so no reader sees entries dropped under it. Leases,
  loads becoming visible and eviction all take ``lock``; the file is read
  outside it, and of two threads loading the same index the second's result
  is dropped.
* An index over the budget on its own is loaded, used and dropped again at
  the end of its use; entries with a lease may hold the cache over its bound
  until the lease ends, when the eviction runs again.
* ``memory_bytes``: 4 or 8 bytes per field of every entry (the ``array``
  items) plus ``ENTRY_ARRAYS_OVERHEAD_BYTES`` per index; the Python objects
  around them (the index itself, its path) are not counted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

# Two array objects' headers per loaded index (sys.getsizeof(array("i")) is 64
# on 64-bit CPython).
ENTRY_ARRAYS_OVERHEAD_BYTES = 128
# Leased indexes the eviction looks past before giving up for now.
_EVICTION_LOOKAHEAD = 16


class Unloadable(Protocol):
    def _in_use(self) -> bool: ...

    def _unload_locked(self) -> None: ...


class IndexCache:
    """The LRU. ``lock`` also guards every index's lease count and loaded state."""

    def __init__(self, max_bytes: int = 0) -> None:
        self.lock = threading.Lock()
        self.max_bytes = max_bytes
        self._lru: OrderedDict[Unloadable, int] = OrderedDict()  # index -> its bytes
        self.bytes = 0
        self.loads_total = 0  # closed indexes read from their file (first use or again)
        self.evictions_total = 0  # idle closed indexes dropped by the bound

    def configure(self, max_bytes: int) -> None:
        with self.lock:
            self.max_bytes = max(0, max_bytes)
            self.evict_locked()

    @property
    def entries(self) -> int:
        """Closed indexes whose entries are in memory now."""
        return len(self._lru)

    # -- called by the indexes with ``lock`` held ---------------------------------------
    def admit_locked(self, index: Unloadable, nbytes: int, loaded: bool) -> None:
        """``index`` (closed, entries in memory) joins or is resized; the bound holds
        again afterwards except for indexes under a lease."""
        self.bytes += nbytes - self._lru.get(index, 0)
        self._lru[index] = nbytes
        self._lru.move_to_end(index)
        if loaded:
            self.loads_total += 1
        self.evict_locked()

    def touch_locked(self, index: Unloadable) -> None:
        if index in self._lru:
            self._lru.move_to_end(index)

    def forget_locked(self, index: Unloadable) -> None:
        self.bytes -= self._lru.pop(index, 0)

    def over_budget_locked(self) -> bool:
        return 0 < self.max_bytes < self.bytes

    def evict_locked(self) -> None:
        if not self.over_budget_locked():
            return
        skipped = 0
        for index in list(self._lru):
            if index._in_use():
                skipped += 1
                if skipped > _EVICTION_LOOKAHEAD:
                    return
                continue
            index._unload_locked()
            self.bytes -= self._lru.pop(index)
            self.evictions_total += 1
            if self.bytes <= self.max_bytes:
                return

    def clear_idle_locked(self) -> int:
        """Drop every idle closed index (tests, and memory pressure); returns how many."""
        dropped = 0
        for index in list(self._lru):
            if not index._in_use():
                index._unload_locked()
                self.bytes -= self._lru.pop(index)
                self.evictions_total += 1
                dropped += 1
        return dropped


INDEX_CACHE = IndexCache()
