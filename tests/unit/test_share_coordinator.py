"""The share coordinator (KIP-932): the records of `__share_group_state`
(share_state_records.py), the coordinator's core (share_coordinator.py: fencing,
batches laid over batches, the state rebuilt by replaying its records) and the
share-partition leader's manager persisting through it (share_partitions.py),
including a failover to a new leader and the migration of the old files."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from odradek.coordinator import errors as E
from odradek.coordinator.share_coordinator import (
    FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH,
    ShareCoordinator,
    kafka_uuid,
    overlay,
    partition_for,
)
from odradek.coordinator.share_partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    REJECT,
    ShareLimits,
)
from odradek.coordinator.share_partitions import SharePartitionManager
from odradek.coordinator.share_state_records import (
    SNAPSHOT,
    UPDATE,
    CorruptShareRecord,
    ShareSnapshot,
    ShareUpdate,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from odradek.coordinator.share_state_store import DIR_NAME, ShareStateStore, file_name

LIMITS = ShareLimits(lock_duration_ms=1000, delivery_count_limit=3, max_in_flight=100)
TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def batches(*spans: tuple[int, int]) -> list[tuple[int, int, bool]]:
    return [(a, b, False) for a, b in spans]


# -- records ----------------------------------------------------------------------------


def test_records_round_trip_and_reject_corruption() -> None:
    key = ("grp", TOPIC, 7)
    raw = encode_key(SNAPSHOT, key)
    # type INT16 0, group STRING, 16 uuid bytes, partition INT32
    assert raw == b"\x00\x00\x00\x03grp" + TOPIC.bytes + b"\x00\x00\x00\x07"
    assert decode_key(raw) == (SNAPSHOT, key)
    assert decode_key(encode_key(UPDATE, key)) == (UPDATE, key)
    snap = ShareSnapshot(3, 2, 9, 100, ((100, 104, 1, 2), (105, 105, 3, 4)), 11, 12)
    assert decode_snapshot(encode_snapshot(snap)) == snap
    upd = ShareUpdate(3, 9, -1, ((106, 110, 1, 0),))
    assert decode_update(encode_update(upd)) == upd
    with pytest.raises(CorruptShareRecord):
        decode_snapshot(encode_snapshot(snap)[:-5])
    with pytest.raises(CorruptShareRecord):
        decode_key(b"\x00\x05" + raw[2:])  # an unknown record type
    bad_count = bytearray(encode_snapshot(ShareSnapshot(0, 0, 0, 0, ())))
    bad_count[2 + 4 * 3 + 8 * 3] = 0x7F  # 126 batches claimed, none present
    with pytest.raises(CorruptShareRecord):
        decode_snapshot(bytes(bad_count))


def test_partition_for_uses_kafkas_key_string() -> None:
    assert kafka_uuid(TOPIC) == "ABEiM0RVZneImaq7zN3u_w"
    seen = {partition_for(("g", TOPIC, p), 50) for p in range(200)}
    assert seen <= set(range(50)) and len(seen) > 20  # spread over the partitions
    assert partition_for(("g", TOPIC, 1), 1) == 0


def test_overlay_new_batches_win_and_the_start_cuts() -> None:
    old = [(0, 9, 1, AVAILABLE)]
    assert overlay(old, [(3, 4, 2, ACKNOWLEDGED)], 0) == (
        (0, 2, 1, AVAILABLE), (3, 4, 2, ACKNOWLEDGED), (5, 9, 1, AVAILABLE))
    assert overlay(old, [(3, 4, 2, ACKNOWLEDGED)], 4) == (
        (4, 4, 2, ACKNOWLEDGED), (5, 9, 1, AVAILABLE))
    assert overlay(old, [], 10) == ()


# -- the coordinator's core -------------------------------------------------------------


def loaded(n: int = 1) -> ShareCoordinator:
    core = ShareCoordinator(n)
    for p in range(n):
        core.load(p, [])
    return core


def replay(records: list[tuple[int, bytes, bytes | None]], n: int = 1) -> ShareCoordinator:
    """A new coordinator loading the partitions from the records written: what a
    newly elected leader of `__share_group_state` does."""
    core = ShareCoordinator(n)
    for p in range(n):
        items = []
        for part, k, v in records:
            if part != p:
                continue
            rtype, key = decode_key(k)
            value = None if v is None else (
                decode_snapshot(v) if rtype == SNAPSHOT else decode_update(v))
            items.append((rtype, key, value))
        core.load(p, items)
    return core


def test_write_read_fencing_and_replay() -> None:
    core, log = loaded(), []
    key = ("g", TOPIC, 0)
    assert ShareCoordinator(1).write(key, 0, 1, 5, [], 0, log) == E.NOT_COORDINATOR
    assert core.read(key, 1, 0, log) == (E.NONE, None)  # nothing stored
    assert core.write(key, 0, 1, -1, [], 0, log) == E.INVALID_REQUEST
    assert core.write(key, 0, 1, 5, [(5, 9, 1, AVAILABLE)], 0, log) == E.NONE
    assert core.write(key, 0, 1, 6, [(6, 6, 1, ACKNOWLEDGED)], 0, log) == E.NONE
    code, state = core.read(key, 1, 0, log)
    assert code == E.NONE and state is not None
    assert (state.start_offset, state.batches) == (
        6, ((6, 6, 1, ACKNOWLEDGED), (7, 9, 1, AVAILABLE)))
    # a new leader (epoch 2) reads: its epoch is recorded, the old leader is fenced
    code, state = core.read(key, 2, 0, log)
    assert code == E.NONE and state is not None and state.leader_epoch == 2
    assert core.write(key, 0, 1, 8, [], 0, log) == FENCED_LEADER_EPOCH
    assert core.read(key, 1, 0, log) == (FENCED_LEADER_EPOCH, None)
    # a reset (AlterShareGroupOffsets) bumps the state epoch and replaces the batches
    assert core.write(key, 1, 2, 20, [], 0, log) == E.NONE
    assert core.write(key, 0, 2, 21, [], 0, log) == FENCED_STATE_EPOCH
    assert core.initialize(("g", TOPIC, 1), 0, 3, 0, log) == E.NONE
    # a new coordinator replaying the records has the same states
    again = replay(log)
    assert again.states == core.states
    assert again.states[key].batches == () and again.states[key].start_offset == 20
    assert core.delete(key, log) == E.NONE and log[-1][2] is None
    assert key not in replay(log).states and ("g", TOPIC, 1) in replay(log).states
    core.unload(0)
    assert core.states == {} and core.coordinator_error(key) == E.NOT_COORDINATOR


def test_update_records_are_laid_over_their_snapshot() -> None:
    key = ("g", TOPIC, 0)
    snap = ShareSnapshot(0, 0, 1, 0, ((0, 9, 1, AVAILABLE),))
    core = ShareCoordinator(1)
    core.load(0, [(SNAPSHOT, key, snap), (UPDATE, key, ShareUpdate(0, 1, 2, ((2, 3, 1, 2),)))])
    assert core.states[key].start_offset == 2
    assert core.states[key].batches == ((2, 3, 1, 2), (4, 9, 1, AVAILABLE))


# -- the share-partition leader's side ---------------------------------------------------


class CorePersister:
    """The persister's calls answered by a coordinator core in process, its records
    kept in a list (the log of `__share_group_state`)."""

    def __init__(self, core: ShareCoordinator, log: list[tuple[int, bytes, bytes | None]]):
        self.core, self.log = core, log

    async def read(self, key, leader_epoch):  # type: ignore[no-untyped-def]
        return self.core.read(key, leader_epoch, 0, self.log)

    async def write(self, key, state_epoch, leader_epoch, start_offset, batches):  # type: ignore[no-untyped-def]
        return self.core.write(key, state_epoch, leader_epoch, start_offset, batches, 0,
                               self.log)

    async def delete(self, key):  # type: ignore[no-untyped-def]
        return self.core.delete(key, self.log)


def test_a_new_leader_continues_from_the_coordinators_state() -> None:
    async def run() -> None:
        log: list[tuple[int, bytes, bytes | None]] = []
        key = ("g", TOPIC, 0)
        old = SharePartitionManager(CorePersister(loaded(), log), lambda g: LIMITS)
        code, sp = await old.get(key, lambda: 5, leader_epoch=1)
        assert code == E.NONE and sp is not None and sp.start_offset == 5
        sp.acquire("a", batches((5, 14)), 100, now_ms=0)
        assert sp.acknowledge("a", [(5, 6, (ACCEPT,)), (8, 8, (ACCEPT,)),
                                    (9, 9, (REJECT,))]) == E.NONE
        assert await old.persist(key, sp) == E.NONE
        # the coordinator's broker fails over too: its successor replays the log
        coordinator = CorePersister(replay(log), log)
        old.persister = coordinator  # both leaders reach the new coordinator
        new = SharePartitionManager(coordinator, lambda g: LIMITS)
        code, again = await new.get(key, lambda: 0, leader_epoch=2)
        assert code == E.NONE and again is not None
        assert (again.start_offset, again.end_offset) == (7, 15)
        assert again.records[8].state == ACKNOWLEDGED and again.records[9].state == ARCHIVED
        assert again.records[7].state == AVAILABLE and again.records[7].delivery_count == 1
        # acknowledged and archived records are not delivered again; counts go on
        assert again.acquire("b", batches((5, 14)), 100, now_ms=0) == [(7, 7, 2), (10, 14, 2)]
        # the deposed leader's next write is fenced: it cannot fork the state
        sp.release_member("a")
        assert await old.persist(key, sp) == FENCED_LEADER_EPOCH
        # ... and the same leader led again under a new epoch reads the state again
        code, reread = await old.get(key, lambda: 0, leader_epoch=3)
        assert code == E.NONE and reread is not sp and reread is not None
        assert reread.start_offset == 7

    asyncio.run(run())


def test_concurrent_persists_are_coalesced_in_order() -> None:
    async def run() -> None:
        log: list[tuple[int, bytes, bytes | None]] = []
        core = loaded()
        key = ("g", TOPIC, 0)
        mgr = SharePartitionManager(CorePersister(core, log), lambda g: LIMITS)
        _, sp = await mgr.get(key, lambda: 0, leader_epoch=1)
        assert sp is not None
        sp.acquire("a", batches((0, 9)), 100, now_ms=0)
        writes = mgr.writes
        calls = []
        for offset in range(5):
            sp.acknowledge("a", [(offset, offset, (ACCEPT,))])
            calls.append(mgr.persist(key, sp))
        assert await asyncio.gather(*calls) == [E.NONE] * 5
        assert core.states[key].start_offset == 5  # the last state won
        assert mgr.writes - writes <= 5

    asyncio.run(run())


def test_old_state_files_are_migrated_then_deleted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        key = ("g", TOPIC, 0)
        directory = tmp_path / DIR_NAME
        directory.mkdir()
        path = directory / file_name(key)
        path.write_text(json.dumps({
            "group": "g", "topic_id": str(TOPIC), "partition": 0, "start_offset": 4,
            "state_epoch": 0, "batches": [[4, 4, 2, ACKNOWLEDGED], [5, 6, 1, AVAILABLE]]}))
        core, log = loaded(), []
        mgr = SharePartitionManager(CorePersister(core, log), lambda g: LIMITS,
                                    ShareStateStore(directory))
        code, sp = await mgr.get(key, lambda: 0, leader_epoch=1)
        assert code == E.NONE and sp is not None
        assert sp.start_offset == 5 and sp.records[5].delivery_count == 1
        assert core.states[key].start_offset == 5
        assert not path.exists()

    asyncio.run(run())


# -- the persister's routing and retries --------------------------------------------------


class _FlakyCoordinator:
    """A share coordinator service that answers NOT_COORDINATOR `fails` times
    (its partition still loading elsewhere), then the state."""

    def __init__(self, fails: int) -> None:
        self.core = ShareCoordinator(1)
        self.fails = fails
        self.calls = 0

    async def ensure_topic(self) -> int:
        return E.NONE

    async def read(self, key, leader_epoch):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls <= self.fails:
            return E.NOT_COORDINATOR, None
        return E.NONE, ShareSnapshot(0, 0, leader_epoch, 42, ())


def _node(leader: int) -> object:
    from types import SimpleNamespace

    state = SimpleNamespace(partitions={0: SimpleNamespace(leader=leader)})
    return SimpleNamespace(node_id=1, image=SimpleNamespace(
        topics_by_name={"__share_group_state": state}, brokers={}), config=None)


def test_the_persister_retries_until_the_coordinator_answers() -> None:
    from odradek.coordinator.share_persister import SharePersister

    async def run() -> None:
        key = ("g", TOPIC, 0)
        service = _FlakyCoordinator(fails=2)
        persister = SharePersister(_node(leader=1), service, deadline_ms=5000)  # type: ignore[arg-type]
        code, state = await persister.read(key, 3)
        assert (code, service.calls) == (E.NONE, 3)
        assert state is not None and state.start_offset == 42
        # never answering: the deadline ends it with the retriable error
        stuck = SharePersister(_node(leader=1), _FlakyCoordinator(fails=10**6),  # type: ignore[arg-type]
                               deadline_ms=300)
        assert (await stuck.read(key, 3))[0] == E.NOT_COORDINATOR
        # no leader for the state's partition: COORDINATOR_NOT_AVAILABLE
        orphan = SharePersister(_node(leader=-1), _FlakyCoordinator(0),  # type: ignore[arg-type]
                                deadline_ms=300)
        assert (await orphan.read(key, 3))[0] == E.COORDINATOR_NOT_AVAILABLE

    asyncio.run(run())
