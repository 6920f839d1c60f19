"""An LRU of the open ``.log`` files of segments (issue 15.3).

Every segment's ``.log`` is a ``FileRecords`` (file_records.py), the active
segment's included. A file is opened when first used and joins this LRU;
once more than ``max_open`` files are open, the least recently used idle
ones are closed, and the next use opens the file again (an active segment's
is reopened read-write: appends are positional writes at the size kept in
memory). Indexes hold no descriptor at all (index.py: entries live in
memory; an active index's new entries are written by path in batches). So a
broker's descriptors for its logs are at most ``max_open``, however many
partitions and segments it hosts: 50,000 partitions fit under a limit of
20,000 (the price is an open and a close per use of a file that fell out of
the LRU: a produce round over more partitions than ``max_open``).

Rules
-----
* One LRU per process, ``SEGMENT_FILES``: descriptors are a per-process
  resource. The broker sets the bound at start-up from
  ``odradek.log.segment.open.files.max`` (-1: derived from the open-files
  limit, see ``derived_max_open``); 0 means unbounded (the default for code
  that never configures it: tools and unit tests).
* Thread-safe. Readers on worker threads (the cleaner, the scrubber, the
  tiered copier, the recovery threads) and the event loop use a file under a
  lease (``FileRecords.leased_fd``): a file with a lease is never closed by
  the LRU (it is passed over), so a descriptor number is never closed and
  reused under a read in flight. Leases and eviction take ``lock``.
* When opening a file fails with EMFILE/ENFILE, every idle file in the LRU
  is closed and the open is tried once more; if it fails again the error
  goes up to the one operation that needed it.
"""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict
from itertools import islice
from typing import Protocol

# Derived bound: this share of the descriptors left under the open-files
# limit once odradek.open.files.reserve is set aside, and at least MIN_DERIVED.
DERIVED_SHARE = 2
MIN_DERIVED = 16
# Passed-over (leased) files the eviction looks past before giving up for now.
_EVICTION_LOOKAHEAD = 16
PROCESS_LIMIT_ERRNOS = (errno.EMFILE, errno.ENFILE)


class Evictable(Protocol):
    def _in_use(self) -> bool: ...

    def _close_idle(self) -> None: ...


def derived_max_open(soft_limit: int, reserve: int) -> int:
    """The LRU bound for an open-files limit (``odradek.log.segment.open.files.max=-1``)."""
    return max(MIN_DERIVED, (soft_limit - max(0, reserve)) // DERIVED_SHARE)


class OpenSegmentFiles:
    """The LRU itself. ``lock`` also guards every FileRecords' descriptor."""

    def __init__(self, max_open: int = 0) -> None:
        self.lock = threading.Lock()
        self.max_open = max_open
        self._lru: OrderedDict[Evictable, None] = OrderedDict()
        self.opened_total = 0  # files of closed segments (re)opened on use
        self.evicted_total = 0  # idle files closed by the bound

    def configure(self, max_open: int) -> None:
        with self.lock:
            self.max_open = max(0, max_open)
            self._evict_locked()

    @property
    def open_count(self) -> int:
        """Closed segments' files open now."""
        return len(self._lru)

    # -- called by FileRecords with ``lock`` held ---------------------------------------
    def admit_locked(self, f: Evictable, reopened: bool) -> None:
        self._lru[f] = None
        if reopened:
            self.opened_total += 1
        self._evict_locked(keep=f)

    def touch_locked(self, f: Evictable) -> None:
        if f in self._lru:
            self._lru.move_to_end(f)

    def forget_locked(self, f: Evictable) -> None:
        self._lru.pop(f, None)

    def _evict_locked(self, keep: Evictable | None = None) -> None:
        if self.max_open <= 0:
            return
        excess = len(self._lru) - self.max_open
        if excess <= 0:
            return
        for f in list(islice(self._lru, excess + _EVICTION_LOOKAHEAD)):
            if f is keep or f._in_use():
                continue
            f._close_idle()
            del self._lru[f]
            self.evicted_total += 1
            excess -= 1
            if excess == 0:
                return

    def shed_idle_locked(self) -> int:
        """Close every idle file (on EMFILE); returns how many."""
        closed = 0
        for f in list(self._lru):
            if not f._in_use():
                f._close_idle()
                del self._lru[f]
                self.evicted_total += 1
                closed += 1
        return closed


SEGMENT_FILES = OpenSegmentFiles()
