"""A segment's ``.txnindex``: the aborted transactions whose ABORT marker lies in it.

File format (Kafka's ``TransactionIndex``)
------------------------------------------
``<base:020d>.txnindex`` is a sequence of 34-byte entries, big-endian, no
header, no trailer, appended in marker order::

    0   2  version int16           0
    2   8  producerId int64
    10  8  firstOffset int64       first offset of the aborted transaction
    18  8  lastOffset int64        offset of its ABORT marker
    26  8  lastStableOffset int64  the partition's LSO once this txn completed

Theory of operation
-------------------
* An entry is written when an ABORT marker is appended (``storage/log.py``)
  or replayed during recovery. Appends are idempotent: an entry whose
  ``lastOffset`` is not past the last one already indexed is dropped, so a
  replay from an older producer snapshot never duplicates entries.
* A read_committed fetch asks every segment from the one holding the fetch
  offset for the entries overlapping ``[fetch_offset, upper)``; the entries are
  kept in memory once read (an abort is at least one batch plus a marker, so a
  segment of ``segment.bytes`` bounds them).
* The file is only created with the first entry.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_BYTES = ENTRY.size
assert ENTRY_BYTES == 34
VERSION = 0


class CorruptTxnIndex(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        usable = len(data) - len(data) % ENTRY_BYTES  # a torn tail entry is ignored
        for pos in range(0, usable, ENTRY_BYTES):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                raise CorruptTxnIndex(f"{self.path}: entry version {version} at byte {pos}")
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def append(self, txn: AbortedTxn) -> bool:
        """Add an entry; False (nothing written) if it is not past the last one."""
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            return False
        data = ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                          txn.last_stable_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        entries.append(txn)
        return True

    def collect(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_offset)."""
        return [
            t for t in self.entries
            if t.last_offset >= fetch_offset and t.first_offset < upper_offset
        ]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        entries = self.entries
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        if not keep:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(
            ENTRY.pack(VERSION, t.producer_id, t.first_offset, t.last_offset,
                       t.last_stable_offset) for t in keep))
        os.replace(tmp, self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []

    def rename_to(self, target: Path) -> Path | None:
        try:
            os.replace(self.path, target)
        except FileNotFoundError:
            return None
        self.path = target
        return target
