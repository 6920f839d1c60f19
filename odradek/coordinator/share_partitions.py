"""The share partitions a partition leader holds (KIP-932's SharePartitionManager).

One `SharePartition` per (share group, topic id, partition) this node has
served, made on the first ShareFetch of the group for the partition: from its
durable state when there is one (share_state_store.py), else at the log start
(`share.auto.offset.reset=earliest`) or the high watermark (`latest`, the
default). `persist` writes a changed partition's state before the request
that changed it is answered. Bounded: at most MAX_SHARE_PARTITIONS in memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from .share_partition import ShareLimits, SharePartition
from .share_state_store import Key, ShareStateStore

MAX_SHARE_PARTITIONS = 100_000


class SharePartitionManager:
    def __init__(self, store: ShareStateStore | None,
                 limits_for: Callable[[str], ShareLimits]) -> None:
        self.store = store
        self.limits_for = limits_for
        self.partitions: dict[Key, SharePartition] = {}

    def get(self, key: Key, initial_offset: Callable[[], int]) -> SharePartition | None:
        """The share partition, loaded or made; None when the bound is reached."""
        sp = self.partitions.get(key)
        limits = self.limits_for(key[0])
        if sp is not None:
            sp.limits = limits
            return sp
        if len(self.partitions) >= MAX_SHARE_PARTITIONS:
            return None
        state = self.store.read(key) if self.store is not None else None
        if state is not None:
            sp = SharePartition.restore(
                int(state["start_offset"]), int(state.get("state_epoch", 0)),
                [(int(a), int(b), int(c), int(d)) for a, b, c, d in state["batches"]], limits)
        else:
            sp = SharePartition(start_offset=initial_offset(), limits=limits)
            sp.dirty = True  # the start offset is state: a restart must keep it
        self.partitions[key] = sp
        return sp

    def peek(self, key: Key) -> SharePartition | None:
        """In memory, or as stored (not kept): for DescribeShareGroupOffsets."""
        sp = self.partitions.get(key)
        if sp is not None or self.store is None:
            return sp
        state = self.store.read(key)
        if state is None:
            return None
        return SharePartition.restore(
            int(state["start_offset"]), int(state.get("state_epoch", 0)),
            [(int(a), int(b), int(c), int(d)) for a, b, c, d in state["batches"]],
            self.limits_for(key[0]))

    def persist(self, key: Key, sp: SharePartition) -> None:
        if not sp.dirty:
            return
        if self.store is not None:
            self.store.write(key, sp.start_offset, sp.state_epoch, sp.state_batches())
        sp.dirty = False

    def release_member(self, group: str, member_id: str) -> int:
        """A member's share session ended: its acquired records are released."""
        n = 0
        for key, sp in self.partitions.items():
            if key[0] == group:
                released = sp.release_member(member_id)
                if released:
                    n += released
                    self.persist(key, sp)
        return n

    def expire_locks(self, now_ms: int) -> None:
        for key, sp in self.partitions.items():
            if sp.expire_locks(now_ms):
                self.persist(key, sp)

    def keys_of(self, group: str) -> list[Key]:
        keys = {k for k in self.partitions if k[0] == group}
        if self.store is not None:
            keys.update(k for k in self.store.stored() if k[0] == group)
        return sorted(keys, key=lambda k: (str(k[1]), k[2]))

    def forget(self, key: Key) -> None:
        self.partitions.pop(key, None)
        if self.store is not None:
            self.store.delete(key)

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        keys = {k for k in self.partitions if k[1] == topic_id}
        if self.store is not None:
            keys.update(k for k in self.store.stored() if k[1] == topic_id)
        for key in keys:
            self.forget(key)
