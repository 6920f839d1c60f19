"""Reads from the remote tier for fetches below the local log start offset.

A read finds the remote segment holding the fetch offset, looks the offset up in the
segment's offset index (fetched once and kept in a cache bounded by
`remote.log.index.file.cache.total.size.bytes`), then reads a byte range of the
segment's `.log` from that position and returns whole batches from the one holding
the fetch offset, at most `max_bytes` (at least one batch). read_committed fetches get
the aborted transactions from the segment's `.txnindex` (same cache). All object reads
run in the reader threads (`remote.log.reader.threads`).
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.batch_format import iter_batch_headers
from ..storage.txn_index import ENTRY, AbortedTxn
from .metadata_records import RemoteLogSegmentMetadata
from .remote_log_manager import RemoteLogManager

__all__ = ["RemoteRead", "RemoteReader", "index_position"]

MIN_READ = 64 * 1024
INDEX_ENTRY = struct.Struct(">ii")


def index_position(index: bytes, relative_offset: int) -> int:
    """The position of the last offset-index entry at or below `relative_offset` (0 when
    none): Kafka's index lookup over the file's (relative offset, position) pairs."""
    lo, hi = 0, len(index) // 8 - 1
    found = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        rel, pos = INDEX_ENTRY.unpack_from(index, mid * 8)
        if rel <= relative_offset:
            found = pos
            lo = mid + 1
        else:
            hi = mid - 1
    return found


@dataclass(frozen=True, slots=True)
class RemoteRead:
    records: bytes
    aborted: list[AbortedTxn]


class _IndexCache:
    """Remote segments' `.index` and `.txnindex` bytes, least recently used first
    out once they take more than `max_bytes` (the last one loaded always stays).
    Unlike Kafka's RemoteIndexCache, which keeps the files on local disk, these
    are in memory, so the bound is a memory bound. Counted for the metrics
    (tiered/metrics.py): bytes and entries held, hits, misses, evictions."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, str], bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[Any, str], load: Callable[[], bytes]) -> bytes:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
        data = load()
        with self._lock:
            if key not in self._items:
                self._items[key] = data
                self._size += len(data)
                while self._size > self.max_bytes and len(self._items) > 1:
                    _, old = self._items.popitem(last=False)
                    self._size -= len(old)
                    self.evictions += 1
        return data


class RemoteSegmentCorrupt(ValueError):
    """A remote segment whose bytes are not record batches where its index points."""


class RemoteReader:
    def __init__(self, rlm: RemoteLogManager) -> None:
        self.rlm = rlm
        self.cache = _IndexCache(rlm.settings.index_cache_bytes)
        self.reads = 0
        self.errors = 0
        self.pending = 0  # reads queued or running (the remote read queue)

    def _object(self, meta: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        return self.cache.get((meta.segment_id.id, suffix),
                              lambda: self.rlm.rsm.fetch(meta, suffix))

    def _read(self, meta: RemoteLogSegmentMetadata, offset: int, max_bytes: int,
              read_committed: bool) -> RemoteRead:
        rsm = self.rlm.rsm
        position = index_position(self._object(meta, "index"), offset - meta.start_offset)
        size = meta.segment_size_in_bytes
        want = max(max_bytes, MIN_READ)
        out: list[bytes] = []
        total = 0
        end_offset = offset
        while position < size and total < max_bytes:
            chunk = rsm.fetch(meta, "log", position, min(size, position + want))
            consumed = 0
            for h in iter_batch_headers(chunk):
                consumed = h.position + h.size
                if h.last_offset < offset:
                    continue
                if out and total + h.size > max_bytes:
                    total = max_bytes
                    break
                out.append(chunk[h.position:h.position + h.size])
                total += h.size
                end_offset = h.next_offset
            else:
                if consumed == 0 and len(chunk) >= 12:  # one batch larger than the chunk
                    need = 12 + struct.unpack_from(">i", chunk, 8)[0]
                    if need <= len(chunk) or position + need > size:
                        # a batch that is not valid where it fits, or that claims more
                        # than the segment holds: the remote copy is corrupt. Asking
                        # again would read the same bytes forever.
                        raise RemoteSegmentCorrupt(
                            f"remote segment {meta.segment_id.id} of "
                            f"{meta.segment_id.topic_id_partition}: no valid batch at "
                            f"byte {position} of {size}")
                    want = need
                    continue
                if consumed == 0:
                    break
            position += consumed
        aborted: list[AbortedTxn] = []
        if read_committed and out and not meta.txn_index_empty:
            data = self._object(meta, "txnindex")
            for pos in range(0, len(data) - len(data) % ENTRY.size, ENTRY.size):
                _, pid, first, last, lso = ENTRY.unpack_from(data, pos)
                if last >= offset and first < end_offset:
                    aborted.append(AbortedTxn(pid, first, last, lso))
        return RemoteRead(b"".join(out), aborted)

    async def read(self, topic: str, partition: int, offset: int, max_bytes: int,
                   read_committed: bool = False) -> RemoteRead | None:
        """Batches from the remote tier at `offset`; None when no remote segment holds
        it. Raises TimeoutError past remote.fetch.max.wait.ms."""
        tier = self.rlm.tier_of(topic, partition)
        meta = tier.segment_for(offset, tier.read_epoch(offset)) if tier is not None else None
        if meta is None:
            return None
        loop = asyncio.get_running_loop()
        self.pending += 1
        try:
            future = loop.run_in_executor(self.rlm.reader, self._read, meta, offset,
                                          max(max_bytes, 1), read_committed)
            result = await asyncio.wait_for(future,
                                            self.rlm.settings.fetch_max_wait_ms / 1000.0)
        except Exception:
            self.errors += 1
            raise
        finally:
            self.pending -= 1
        self.reads += 1
        return result
