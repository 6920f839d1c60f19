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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.coordinator import errors as E
from odradek.coordinator.share_coordinator import (
    FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH,
    ShareCoordinator,
    kafka_uuid,
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
from odradek.coordinator.share_state_batches import changed, combine
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


def test_combine_keeps_the_highest_state_and_the_start_cuts() -> None:
    old = [(0, 9, 1, AVAILABLE)]
    assert combine(old, [(3, 4, 2, ACKNOWLEDGED)], 0) == (
        (0, 2, 1, AVAILABLE), (3, 4, 2, ACKNOWLEDGED), (5, 9, 1, AVAILABLE))
    assert combine(old, [(3, 4, 2, ACKNOWLEDGED)], 4) == (
        (4, 4, 2, ACKNOWLEDGED), (5, 9, 1, AVAILABLE))
    assert combine(old, [], 10) == ()
    # Kafka's combineStateBatches: a lower (count, state) does not take an offset back
    assert combine([(0, 4, 2, ACKNOWLEDGED)], [(2, 6, 1, AVAILABLE)], -1) == (
        (0, 4, 2, ACKNOWLEDGED), (5, 6, 1, AVAILABLE))
    # touching batches of the same state are one; overlapping requests are fine
    assert combine([(0, 1, 1, AVAILABLE)], [(2, 3, 1, AVAILABLE), (3, 5, 1, AVAILABLE)],
                   -1) == ((0, 5, 1, AVAILABLE),)
    assert changed(((0, 9, 1, AVAILABLE),), ((0, 2, 1, AVAILABLE), (3, 4, 2, ACKNOWLEDGED),
                                             (5, 12, 1, AVAILABLE))) == (
        (3, 4, 2, ACKNOWLEDGED), (10, 12, 1, AVAILABLE))


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
            items.append((len(items), rtype, key, value))
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
    core.load(0, [(0, SNAPSHOT, key, snap),
                  (1, UPDATE, key, ShareUpdate(0, 1, 2, ((2, 3, 1, 2),)))])
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


# -- ShareUpdate deltas, the snapshot cadence, pruning -------------------------------------

def _types(log: list[tuple[int, bytes, bytes | None]]) -> list[int]:
    return [decode_key(k)[0] for _, k, _ in log]


def _offsets(batches_: tuple[tuple[int, int, int, int], ...]) -> dict[int, tuple[int, int]]:
    return {o: (c, s) for a, b, c, s in batches_ for o in range(a, b + 1)}


_OPS = st.lists(st.one_of(
    st.tuples(st.just("ack"), st.integers(0, 1), st.integers(0, 40), st.integers(1, 8),
              st.integers(1, 4), st.sampled_from([AVAILABLE, ACKNOWLEDGED, ARCHIVED])),
    st.tuples(st.just("start"), st.integers(0, 1), st.integers(0, 6)),
    st.tuples(st.just("window"), st.integers(0, 1), st.integers(0, 40)),
    st.tuples(st.just("read"), st.integers(0, 1)),
    st.tuples(st.just("reset"), st.integers(0, 1), st.integers(0, 30)),
    st.tuples(st.just("commit"), st.integers(0, 1), st.integers(0, 6)),
), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, per_snapshot=st.integers(0, 4))
def test_replaying_snapshots_and_updates_gives_the_live_state(
        ops: list[tuple], per_snapshot: int) -> None:  # type: ignore[type-arg]
    """Random writes (acknowledged batches, start offsets moving, whole windows as
    odradek's share-partition leader sends them, leader changes, resets): the
    state in memory is what Kafka's combine gives (the highest count and state at
    each offset, nothing below the start), and a new coordinator replaying the
    records -- all of them, or only those at and above the redundant offset, as
    after pruning -- has exactly that state."""
    core = ShareCoordinator(1, updates_per_snapshot=per_snapshot)
    core.load(0, [])
    log: list[tuple[int, bytes, bytes | None]] = []
    keys = [("g", TOPIC, 0), ("g", TOPIC, 1)]
    model: list[dict[int, tuple[int, int]]] = [{}, {}]
    start, state_epoch, leader = [0, 0], [0, 0], [1, 1]
    hw = 0  # the high watermark: records below it are committed
    states_at: dict[int, dict] = {0: {}}  # type: ignore[type-arg]  # the states by log length
    for i in range(2):
        assert core.write(keys[i], 0, 1, 0, [], 0, log) == E.NONE
        core.appended(0, i, log[i:], hw)  # the log's offsets are the list's indexes
        states_at[len(log)] = dict(core.states)
    for op in ops:
        seen = len(log)
        i = op[1]
        key = keys[i]
        if op[0] == "commit":
            # the high watermark moves, the prune timer fires: the records from the
            # redundant offset to the high watermark -- what a new leader may
            # have -- rebuild the states as they were at the high watermark
            hw = min(len(log), hw + op[2])
            redundant = core.redundant_offset(0, hw)
            assert 0 <= redundant <= hw
            pruned = ShareCoordinator(1)
            pruned.load(0, [(redundant + j, *_decoded(k, v))
                            for j, (_, k, v) in enumerate(log[redundant:hw])])
            assert pruned.states == states_at[hw]
            continue
        if op[0] == "ack":
            _, _, first, n, count, state = op
            req = [(first, first + n - 1, count, state)]
            assert core.write(key, state_epoch[i], leader[i], -1, req, 0, log) == E.NONE
            for o in range(max(first, start[i]), first + n):
                model[i][o] = max(model[i].get(o, (-1, -1)), (count, state))
        elif op[0] == "start":
            start[i] += op[2]
            assert core.write(key, state_epoch[i], leader[i], start[i], [], 0, log) == E.NONE
            model[i] = {o: v for o, v in model[i].items() if o >= start[i]}
        elif op[0] == "window":
            # the whole window again, one more offset delivered once more
            o = start[i] + op[2]
            c, s = model[i].get(o, (0, AVAILABLE))
            model[i][o] = (c + 1, AVAILABLE) if s == AVAILABLE else (c, s)
            runs = tuple((a, a, c, s) for a, (c, s) in sorted(model[i].items()))
            assert core.write(key, state_epoch[i], leader[i], start[i], runs, 0, log) == E.NONE
        elif op[0] == "read":
            leader[i] += 1
            assert core.read(key, leader[i], 0, log)[0] == E.NONE
        else:
            state_epoch[i] += 1
            start[i] = op[2]
            assert core.write(key, state_epoch[i], leader[i], start[i], [], 0, log) == E.NONE
            model[i] = {}
        core.appended(0, seen, log[seen:], hw)
        states_at[len(log)] = dict(core.states)
    for i, key in enumerate(keys):
        live = core.states[key]
        assert _offsets(live.batches) == model[i]
        assert (live.start_offset, live.state_epoch, live.leader_epoch) == (
            start[i], state_epoch[i], leader[i])
        assert live.batches == combine((), live.batches, -1)  # canonical
    assert replay(log).states == core.states
    redundant = core.redundant_offset(0, len(log))
    assert 0 <= redundant <= len(log)
    tail = [(0, k, v) for _, k, v in log[redundant:]]
    pruned = ShareCoordinator(1)
    pruned.load(0, [(redundant + j, *_decoded(k, v)) for j, (_, k, v) in enumerate(tail)])
    assert pruned.states == core.states


def _decoded(k: bytes, v: bytes | None) -> tuple[int, tuple[str, uuid.UUID, int], object]:
    rtype, key = decode_key(k)
    value = None if v is None else (
        decode_snapshot(v) if rtype == SNAPSHOT else decode_update(v))
    return rtype, key, value


def test_a_snapshot_every_n_updates_and_the_count_survives_a_load() -> None:
    core = ShareCoordinator(1, updates_per_snapshot=3)
    core.load(0, [])
    log: list[tuple[int, bytes, bytes | None]] = []
    key = ("g", TOPIC, 0)
    for o in range(8):
        assert core.write(key, 0, 1, 0, [(o, o, 1, ACKNOWLEDGED)], 0, log) == E.NONE
    assert _types(log) == [SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE, UPDATE]
    assert [decode_snapshot(v).snapshot_epoch for _, k, v in log  # type: ignore[arg-type]
            if decode_key(k)[0] == SNAPSHOT] == [0, 1]
    assert decode_update(log[-1][2]).snapshot_epoch == 1  # type: ignore[arg-type]
    # a new coordinator counts the updates after the last snapshot: the next is one
    again = replay(log)
    again.updates_per_snapshot = 3
    assert again.update_count[key] == 3
    more: list[tuple[int, bytes, bytes | None]] = []
    assert again.write(key, 0, 1, 0, [(8, 8, 1, ACKNOWLEDGED)], 0, more) == E.NONE
    assert _types(more) == [SNAPSHOT]
    assert decode_snapshot(more[0][2]).batches == ((0, 8, 1, ACKNOWLEDGED),)  # type: ignore[arg-type]
    # Initialize and a reset (a higher state epoch) are snapshots; 0 means snapshots only
    assert again.write(key, 1, 1, 20, [], 0, more) == E.NONE
    assert again.initialize(key, 2, 30, 0, more) == E.NONE
    assert _types(more) == [SNAPSHOT, SNAPSHOT, SNAPSHOT]
    only = ShareCoordinator(1, updates_per_snapshot=0)
    only.load(0, [])
    snaps: list[tuple[int, bytes, bytes | None]] = []
    for o in range(3):
        only.write(key, 0, 1, 0, [(o, o, 1, ACKNOWLEDGED)], 0, snaps)
    assert _types(snaps) == [SNAPSHOT] * 3


def test_a_compacted_state_topic_gets_snapshots_only() -> None:
    """The cleaner keeps the last record of a key: a topic an older odradek made
    compacted would lose all but the last update, so it gets snapshots."""
    core = loaded()
    core.snapshots_only = True
    log: list[tuple[int, bytes, bytes | None]] = []
    key = ("g", TOPIC, 0)
    for o in range(3):
        core.write(key, 0, 1, 0, [(o, o, 1, ACKNOWLEDGED)], 0, log)
    assert _types(log) == [SNAPSHOT] * 3


def test_a_write_to_a_large_state_writes_only_its_change() -> None:
    """2,000 offsets in 1,000 batches; the leader acknowledges one record and sends
    its whole window (as odradek's leader does) or just that batch (as Kafka's):
    the record holds the one changed batch, not the state."""
    core, log = loaded(), []
    key = ("g", TOPIC, 0)
    window = [(o, o + 1, 1 + (o // 2) % 2, AVAILABLE) for o in range(0, 2000, 2)]
    assert core.write(key, 0, 1, 0, window, 0, log) == E.NONE
    snapshot_bytes = len(log[-1][2])  # type: ignore[arg-type]
    assert snapshot_bytes > 15_000 and len(core.states[key].batches) == 1000
    acked = [b if b[0] != 1000 else (1000, 1001, b[2], ACKNOWLEDGED) for b in window]
    assert core.write(key, 0, 1, 0, acked, 0, log) == E.NONE
    assert core.write(key, 0, 1, 0, [(1500, 1500, 2, ARCHIVED)], 0, log) == E.NONE
    for _, k, v in log[-2:]:
        assert decode_key(k)[0] == UPDATE and v is not None and len(v) < 64, len(v or b"")
    assert decode_update(log[-2][2]).batches == ((1000, 1001, 1, ACKNOWLEDGED),)  # type: ignore[arg-type]
    assert decode_update(log[-2][2]).start_offset == -1  # type: ignore[arg-type]
    # the start moving is in the update too, with nothing else
    assert core.write(key, 0, 1, 10, [], 0, log) == E.NONE
    assert decode_update(log[-1][2]).start_offset == 10  # type: ignore[arg-type]
    assert decode_update(log[-1][2]).batches == ()  # type: ignore[arg-type]
    # a write that changes nothing writes nothing
    n = len(log)
    assert core.write(key, 0, 1, 10, acked, 0, log) == E.NONE and len(log) == n
    assert replay(log).states == core.states


def test_the_redundant_offset_is_the_earliest_committed_last_snapshot() -> None:
    core = ShareCoordinator(1, updates_per_snapshot=2)
    core.load(0, [])
    log: list[tuple[int, bytes, bytes | None]] = []
    a, b = ("g", TOPIC, 0), ("g", TOPIC, 1)

    def append() -> None:  # one record at the log's end, all before it committed
        core.appended(0, len(log) - 1, log[-1:], len(log) - 1)

    assert core.redundant_offset(0, 0) == -1
    core.write(a, 0, 1, 0, [], 0, log)
    append()  # offset 0: a's snapshot
    core.write(b, 0, 1, 0, [], 0, log)
    append()  # offset 1: b's snapshot
    for o in range(3):  # a: update, update, snapshot (offset 4)
        core.write(a, 0, 1, 0, [(o, o, 1, ACKNOWLEDGED)], 0, log)
        append()
    assert _types(log)[4] == SNAPSHOT
    # a's snapshot at 4 is not committed yet: its records from 0 on are needed
    assert core.redundant_offset(0, 4) == 0
    assert core.redundant_offset(0, 5) == 1  # b's snapshot holds it back
    core.delete(b, log)
    append()  # offset 5: b's tombstone
    # not committed yet: a leader change could lose it, b's snapshot is kept
    assert core.redundant_offset(0, 5) == 1
    assert core.redundant_offset(0, 6) == 4
    core.delete(a, log)
    append()
    assert core.redundant_offset(0, len(log)) == len(log)  # nothing left: everything


def test_quiet_keys_are_snapshotted_again_so_pruning_passes_them() -> None:
    """Kafka's cold-partition snapshots: a key whose last snapshot is older than
    the interval gets a new one (same state, next snapshot epoch, write time now,
    create time kept), which moves the redundant offset past its old snapshot;
    when every key's last snapshot is already such a one, nothing is written."""
    core = ShareCoordinator(1, updates_per_snapshot=500)
    core.load(0, [])
    log: list[tuple[int, bytes, bytes | None]] = []
    quiet, busy = ("g", TOPIC, 0), ("g", TOPIC, 1)

    def append() -> None:
        core.appended(0, len(log) - 1, log[-1:], len(log) - 1)

    core.write(quiet, 0, 1, 0, [(0, 4, 1, ACKNOWLEDGED)], 1_000, log)
    append()
    core.write(busy, 0, 1, 0, [], 1_000, log)
    append()
    for o in range(5):  # updates of the busy key
        core.write(busy, 0, 1, 0, [(o, o, 1, ACKNOWLEDGED)], 2_000 + o, log)
        append()
    assert core.redundant_offset(0, len(log)) == 0  # the quiet key holds it back
    out: list[tuple[int, bytes, bytes | None]] = []
    assert core.cold_snapshots(0, 100_000, 300_000, out) == 0  # not old enough
    assert core.cold_snapshots(0, 301_000, 300_000, out) == 2
    for record in out:
        log.append(record)
        append()
    snap = decode_snapshot(out[0][2])  # type: ignore[arg-type]
    assert (snap.snapshot_epoch, snap.create_ms, snap.write_ms) == (1, 1_000, 301_000)
    assert snap.batches == ((0, 4, 1, ACKNOWLEDGED),)
    assert core.redundant_offset(0, len(log)) == len(log) - 2
    assert replay(log[len(log) - 2:]).states == core.states
    # every key's last snapshot is a cold one: the partition is quiet
    assert core.cold_snapshots(0, 700_000, 300_000, []) == 0
