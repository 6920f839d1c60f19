"""How an AlterShareGroupOffsets or DeleteShareGroupOffsets made by the group
coordinator reaches a share-partition leader holding the old state in memory
(docs/share_groups.md, Offsets): the leader drops the group's share partitions
when the group's last share session on it ends, drops one whose write is
fenced by the reset's higher state epoch, and starts a reset state without a
start offset at `share.auto.offset.reset`."""

from __future__ import annotations

import asyncio

from odradek.broker.share_session import ShareSessionCache
from odradek.coordinator import errors as E
from odradek.coordinator.share_coordinator import FENCED_STATE_EPOCH
from odradek.coordinator.share_partition import ACCEPT
from odradek.coordinator.share_partitions import SharePartitionManager
from odradek.coordinator.share_persister import delivery_complete_count
from tests.unit.test_share_coordinator import LIMITS, TOPIC, CorePersister, batches, loaded


class ResettablePersister(CorePersister):
    async def initialize(self, key, state_epoch, start_offset):  # type: ignore[no-untyped-def]
        return self.core.initialize(key, state_epoch, start_offset, 0, self.log)


def test_the_last_session_of_a_group_ending_is_reported_once() -> None:
    now = [0]
    emptied: list[str] = []
    cache = ShareSessionCache(max_sessions=10, idle_ms=1000, clock_ms=lambda: now[0],
                              on_group_empty=emptied.append)
    cache.open(("g", "a"))
    cache.open(("g", "a"))  # opened again by its member: not a group left empty
    cache.open(("g", "b"))
    cache.open(("h", "c"))
    cache.close(("g", "a"))
    assert emptied == [] and cache.members_here("g") == 1
    cache.close(("g", "b"))
    cache.close(("g", "b"))  # already gone: nothing more
    assert emptied == ["g"] and cache.members_here("g") == 0
    # a session idle for the share session timeout (its member is gone from the
    # group) ends when a new member of its group opens one
    now[0] = 1000
    cache.open(("h", "d"))
    assert emptied == ["g", "h"] and list(cache.sessions) == [("h", "d")]


def test_a_reset_state_reaches_a_leader_holding_the_old_one() -> None:
    async def run() -> None:
        log: list[tuple[int, bytes, bytes | None]] = []
        persister = ResettablePersister(loaded(), log)
        key = ("g", TOPIC, 0)
        mgr = SharePartitionManager(persister, lambda g: LIMITS)
        _, sp = await mgr.get(key, lambda: 0, leader_epoch=1)
        assert sp is not None
        sp.acquire("a", batches((0, 9)), 100, now_ms=0)
        assert sp.acknowledge("a", [(0, 9, (ACCEPT,))]) == E.NONE
        assert await mgr.persist(key, sp) == E.NONE and sp.start_offset == 10

        # the group coordinator resets it (the group is empty) with a higher state epoch
        assert await persister.initialize(key, sp.state_epoch + 1, 3) == E.NONE
        # a write of the stale copy is fenced and drops it ...
        sp.dirty = True
        assert await mgr.persist(key, sp) == FENCED_STATE_EPOCH
        assert mgr.peek(key) is None
        # ... and the next fetch reads the new start
        _, fresh = await mgr.get(key, lambda: 0, leader_epoch=1)
        assert fresh is not None and (fresh.start_offset, fresh.records) == (3, {})

        # an idle stale copy (nothing to write) goes when the group's last session ends
        assert await persister.initialize(key, fresh.state_epoch + 1, 7) == E.NONE
        assert mgr.peek(key) is fresh
        mgr.drop_group("g")
        _, again = await mgr.get(key, lambda: 0, leader_epoch=1)
        assert again is not None and again.start_offset == 7

        # reset to -1: the leader starts at share.auto.offset.reset, keeping the epoch
        epoch = again.state_epoch + 1
        assert await persister.initialize(key, epoch, -1) == E.NONE
        mgr.drop_group("g")
        _, reset = await mgr.get(key, lambda: 42, leader_epoch=1)
        assert reset is not None and (reset.start_offset, reset.state_epoch) == (42, epoch)
        assert persister.core.states[key].start_offset == 42  # written at once

    asyncio.run(run())


def test_delivery_complete_count_counts_acknowledged_and_archived_records() -> None:
    assert delivery_complete_count([(0, 4, 1, 2), (5, 5, 1, 0), (6, 9, 3, 4),
                                    (10, 10, 1, 1)]) == 9


def test_sessions_are_found_by_the_connection_that_opened_them() -> None:
    emptied: list[str] = []
    cache = ShareSessionCache(max_sessions=10, on_group_empty=emptied.append)
    cache.open(("g", "a"), connection_id=7)
    cache.open(("g", "b"), connection_id=8)
    cache.open(("h", "c"), connection_id=7)
    assert sorted(cache.of_connection(7)) == [("g", "a"), ("h", "c")]
    cache.open(("g", "a"), connection_id=9)  # the member reconnected: a new session
    assert cache.of_connection(7) == [("h", "c")] and cache.of_connection(9) == [("g", "a")]
    for key in cache.of_connection(9):
        cache.close(key)
    assert cache.of_connection(9) == [] and emptied == []  # b is still in g
    cache.close(("g", "b"))
    assert emptied == ["g"]
