"""The share partitions a partition leader holds (KIP-932's SharePartitionManager).

One `SharePartition` per (share group, topic id, partition) this node has
served, made on the first ShareFetch of the group for the partition while this
node leads it: from its durable state, read from the share coordinator
(ReadShareGroupState through share_persister.py, which also fences any
earlier leader), else at the log start (`share.auto.offset.reset=earliest`) or
the high watermark (`latest`, the default). A share partition made under an
older leader epoch of the partition is dropped and read again: another leader
may have changed the state meanwhile.

`persist` writes a changed partition's state (WriteShareGroupState: the whole
window, with the leader epoch) before the request that changed it is answered,
one write at a time per share partition; writes asked for while one is in
flight are coalesced into the next. Acquisitions are not written (as Kafka:
an acquired record's lock does not survive a failover, and the delivery
count of its last acquisition may be lost with it, which at-least-once
delivery allows); acknowledgements, releases, lock expiries and a moved start
offset are.

Migration: a node that kept the state in files (odradek before the share
coordinator, `<log dir>/share_group_state/`, share_state_store.py) finds a
file when the coordinator has no state for the share partition; the file's
state is written to the coordinator and the file deleted once that write is
acknowledged.

Dropped and read again (Kafka's SharePartitionManager does the same): a share
partition whose write is fenced (FENCED_STATE_EPOCH: the group coordinator
reset the state, AlterShareGroupOffsets; FENCED_LEADER_EPOCH: another leader
read it), and every share partition of a group when its last share session on
this broker ends (`drop_group`, ShareGroupListener.onGroupEmpty in Kafka): an
altered or deleted state, which needs the group empty, is then what the next
ShareFetch reads. A stored state without a start offset (-1: AlterShareGroupOffsets
to -1) starts at `share.auto.offset.reset`, keeping its state epoch.

Bounded: at most MAX_SHARE_PARTITIONS in memory.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from . import errors as E
from .share_coordinator import FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH
from .share_partition import ShareLimits, SharePartition
from .share_state_records import Batch, Key, ShareSnapshot
from .share_state_store import ShareStateStore

log = logging.getLogger(__name__)

MAX_SHARE_PARTITIONS = 100_000


class Persister(Protocol):
    async def read(self, key: Key, leader_epoch: int) -> tuple[int, ShareSnapshot | None]: ...
    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[Batch]) -> int: ...
    async def delete(self, key: Key) -> int: ...
    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> int: ...


class SharePartitionManager:
    def __init__(self, persister: Persister | None,
                 limits_for: Callable[[str], ShareLimits],
                 legacy: ShareStateStore | None = None) -> None:
        self.persister = persister
        self.limits_for = limits_for
        self.legacy = legacy
        self.partitions: dict[Key, SharePartition] = {}
        self.epochs: dict[Key, int] = {}  # the leader epoch each share partition was read under
        self._loading: dict[Key, asyncio.Future[SharePartition | None]] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._asked: dict[Key, int] = {}  # persist calls per key
        self._written: dict[Key, int] = {}  # the last persist call a successful write covered
        self._tasks: set[asyncio.Task[Any]] = set()
        self.writes = 0

    async def get(self, key: Key, initial_offset: Callable[[], int],
                  leader_epoch: int) -> tuple[int, SharePartition | None]:
        """The share partition, loaded or made: (NONE, it), or the error that kept
        it from being read (and None)."""
        sp = self.partitions.get(key)
        limits = self.limits_for(key[0])
        if sp is not None and self.epochs.get(key) == leader_epoch:
            sp.limits = limits
            return E.NONE, sp
        if sp is not None:  # led again under another epoch: read the state again
            self.partitions.pop(key, None)
        loading = self._loading.get(key)
        if loading is not None:
            sp = await asyncio.shield(loading)
            return (E.NONE, sp) if sp is not None else (E.COORDINATOR_NOT_AVAILABLE, None)
        if len(self.partitions) >= MAX_SHARE_PARTITIONS:
            return E.NONE, None
        fut: asyncio.Future[SharePartition | None] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            code, sp = await self._load(key, initial_offset, leader_epoch, limits)
        finally:
            del self._loading[key]
        fut.set_result(sp)
        if sp is not None:
            self.partitions[key] = sp
            self.epochs[key] = leader_epoch
        return code, sp

    async def _load(self, key: Key, initial_offset: Callable[[], int], leader_epoch: int,
                    limits: ShareLimits) -> tuple[int, SharePartition | None]:
        state: ShareSnapshot | None = None
        lock = self._locks.get(key)
        if lock is not None:  # a write of a dropped predecessor still in flight
            async with lock:
                pass
        if self.persister is not None:
            code, state = await self.persister.read(key, leader_epoch)
            if code != E.NONE:
                return code, None
        migrated = False
        if state is None and self.legacy is not None:
            old = self.legacy.read(key)
            if old is not None:
                state = ShareSnapshot(0, int(old.get("state_epoch", 0)), leader_epoch,
                                      int(old["start_offset"]),
                                      tuple((int(a), int(b), int(c), int(d))
                                            for a, b, c, d in old["batches"]))
                migrated = True
        uninitialized = state is not None and state.start_offset < 0
        if state is not None and not uninitialized:
            sp = SharePartition.restore(state.start_offset, state.state_epoch,
                                        list(state.batches), limits)
        else:
            sp = SharePartition(start_offset=initial_offset(), limits=limits)
            if state is not None:
                sp.state_epoch = state.state_epoch
        if state is None or migrated or uninitialized:
            # The start offset is state: a new leader must keep it.
            sp.dirty = True
            code = await self._write(key, sp, leader_epoch)
            if code != E.NONE:
                return code, None
            if migrated and self.legacy is not None:
                self.legacy.delete(key)
                log.info("share state of %s moved from its file to the share coordinator", key)
        return E.NONE, sp

    def peek(self, key: Key) -> SharePartition | None:
        return self.partitions.get(key)

    async def _write(self, key: Key, sp: SharePartition, leader_epoch: int) -> int:
        """Write the current state of `sp`, one write per key at a time; a write
        finds the calls made while the previous was in flight already covered."""
        asked = self._asked[key] = self._asked.get(key, 0) + 1
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self._written.get(key, 0) >= asked:
                return E.NONE
            covered = self._asked[key]
            sp.dirty = False
            if self.persister is None:
                code = E.NONE
            else:
                code = await self.persister.write(key, sp.state_epoch, leader_epoch,
                                                  sp.start_offset, sp.state_batches())
            if code == E.NONE:
                self._written[key] = covered
                self.writes += 1
            elif code in (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH):
                # the state was reset or another leader read it: this copy is stale
                log.info("share partition %s fenced (error %d): dropped", key, code)
                if self.partitions.get(key) is sp:
                    self._drop(key)
            else:
                sp.dirty = True  # the next persist tries again
            return code

    async def persist(self, key: Key, sp: SharePartition) -> int:
        """NONE once the state of `sp` is with the share coordinator (or nothing
        changed), else the error."""
        if not sp.dirty:
            return E.NONE
        return await self._write(key, sp, self.epochs.get(key, -1))

    def persist_later(self, key: Key, sp: SharePartition) -> None:
        """A change no request waits for (a released member, expired locks)."""
        if not sp.dirty:
            return
        # the epoch now: the share partition may be dropped before the write runs
        self._spawn(self._write(key, sp, self.epochs.get(key, -1)))

    def release_member(self, group: str, member_id: str) -> int:
        """A member's share session ended: its acquired records are released."""
        n = 0
        for key, sp in self.partitions.items():
            if key[0] == group:
                released = sp.release_member(member_id)
                if released:
                    n += released
                    self.persist_later(key, sp)
        return n

    def keys_of(self, group: str) -> list[Key]:
        return sorted((k for k in self.partitions if k[0] == group),
                      key=lambda k: (str(k[1]), k[2]))

    def _drop(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self.epochs.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and lock.locked():
            return  # a write in flight: its counters go on for the next copy
        self._asked.pop(key, None)
        self._written.pop(key, None)
        self._locks.pop(key, None)

    def drop(self, key: Key) -> None:
        """Forget the cached copy: the next `get` reads the state again."""
        if key in self.partitions:
            self._drop(key)

    def drop_group(self, group: str) -> None:
        """The group's last share session here ended (Kafka's onGroupEmpty)."""
        for key in self.keys_of(group):
            self._drop(key)

    async def forget(self, key: Key) -> int:
        self._drop(key)
        if self.legacy is not None:
            self.legacy.delete(key)
        return await self.persister.delete(key) if self.persister is not None else E.NONE

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """The topic is gone: its share partitions here are dropped (their
        coordinator deletes their state: share_coordinator_service.py)."""
        for key in [k for k in self.partitions if k[1] == topic_id]:
            self._drop(key)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
