"""The cleaner's offset map: key hash -> offset of the key's latest record.

Kafka's ``SkimpyOffsetMap``: a fixed-size open-addressing hash table over
flat memory, so its size is exactly what ``log.cleaner.dedupe.buffer.size``
allows, whatever the keys. Each slot holds the 16-byte MD5 of a key and an
8-byte offset (24 bytes a slot, as in Kafka). Collisions of the full 16-byte
hash are ignored, as in Kafka (two keys sharing an MD5 would be treated as
one).

Layout: ``_hashes`` is one ``bytearray`` of ``16 * slots`` bytes; ``_offsets``
an ``array('q')`` of ``slots`` entries holding ``offset + 1`` (0 marks an empty
slot, so a fresh zero-filled array is an empty map). Linear probing from the
slot Python's hash of the digest picks.

Bound: ``max_entries`` (slots x ``log.cleaner.io.buffer.load.factor``) is the
fill the cleaner stops at (see storage/cleaner/cleaner.py); ``put`` refuses a
new key only when every slot is taken.
"""

from __future__ import annotations

import ctypes
import hashlib
from array import array

BYTES_PER_ENTRY = 24
HASH_BYTES = 16


class OffsetMapFull(Exception):
    """Every slot is taken: the map cannot take another key."""


def key_hash(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.slots = max(1, memory_bytes // BYTES_PER_ENTRY)
        self.max_entries = max(1, int(self.slots * load_factor))
        self._hashes = bytearray(HASH_BYTES * self.slots)
        self._offsets = array("q", bytes(8 * self.slots))
        self.size = 0  # distinct keys held
        self.latest_offset = -1  # the last offset the map covers (Kafka's latestOffset)

    def fits(self, memory_bytes: int, load_factor: float) -> bool:
        """Whether this map is the one ``OffsetMap(memory_bytes, load_factor)`` makes."""
        slots = max(1, memory_bytes // BYTES_PER_ENTRY)
        return slots == self.slots and self.max_entries == max(1, int(slots * load_factor))

    @property
    def memory_bytes(self) -> int:
        return self.slots * BYTES_PER_ENTRY

    def put(self, key: bytes, offset: int) -> None:
        self.put_hash(key_hash(key), offset)

    def put_hash(self, digest: bytes, offset: int) -> None:
        offsets, hashes, slots = self._offsets, self._hashes, self.slots
        # The slot comes from Python's (C) hash of the digest: stable within a
        # process, and the map never leaves the process that built it.
        i = hash(digest) % slots
        for _ in range(slots):
            stored = offsets[i]
            at = i * HASH_BYTES
            if stored == 0:
                if self.size >= slots:
                    break
                hashes[at : at + HASH_BYTES] = digest
                offsets[i] = offset + 1
                self.size += 1
                return
            if hashes.startswith(digest, at):
                if offset + 1 > stored:
                    offsets[i] = offset + 1
                return
            i += 1
            if i == slots:
                i = 0
        raise OffsetMapFull(f"offset map of {slots} slots is full")

    def get(self, key: bytes) -> int:
        return self.get_hash(key_hash(key))

    def get_hash(self, digest: bytes) -> int:
        """The offset stored for the hash, or -1."""
        offsets, hashes, slots = self._offsets, self._hashes, self.slots
        i = hash(digest) % slots
        for _ in range(slots):
            stored = offsets[i]
            if stored == 0:
                return -1
            if hashes.startswith(digest, i * HASH_BYTES):
                return stored - 1
            i += 1
            if i == slots:
                i = 0
        return -1

    def clear(self) -> None:
        """Empty the map for reuse (a zero offset marks a free slot; stale hash
        bytes in free slots are never compared)."""
        address, length = self._offsets.buffer_info()
        ctypes.memset(address, 0, length * self._offsets.itemsize)
        self.size = 0
        self.latest_offset = -1

    def utilization(self) -> float:
        return self.size / self.slots
