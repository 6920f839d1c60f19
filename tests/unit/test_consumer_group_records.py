"""KIP-848 consumer group records: Kafka's formats, and a group that survives a replay."""

from __future__ import annotations

import struct
import uuid

from odradek.coordinator import consumer_records as R
from odradek.coordinator import errors as E
from odradek.coordinator.classic import GroupLimits
from odradek.coordinator.consumer import ConsumerConfig, HeartbeatRequest
from odradek.coordinator.core import CoordinatorConfig, GroupCoordinator, OffsetCommit, Out

G = "grp"
T1, T2 = uuid.UUID(int=1), uuid.uuid4()


def test_values_round_trip():
    assert R.decode_epoch_value(R.group_metadata_value(7)) == 7
    assert R.decode_epoch_value(R.target_assignment_metadata_value(-1)) == -1
    topics = (R.TopicMetadata(T1, "a", 3), R.TopicMetadata(T2, "ü-topic", 1))
    assert R.decode_partition_metadata_value(R.partition_metadata_value(topics)) == topics
    for md in (
        R.MemberMetadata("inst", "rack", "cid", "/1.2.3.4", ("a", "b"), "a.*", 45000, "uniform"),
        R.MemberMetadata(None, None, "", "/h", (), None, -1, None),
    ):
        assert R.decode_member_metadata_value(R.member_metadata_value(md)) == md
    parts = {T1: {0, 2, 5}, T2: {1}}
    assert R.decode_target_assignment_member_value(R.target_assignment_member_value(parts)) == parts
    assert R.decode_target_assignment_member_value(R.target_assignment_member_value({})) == {}
    for state in ("STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"):
        a = R.CurrentAssignment(4, 3, state, {T1: {0}}, {T2: {7, 8}})
        assert R.decode_current_assignment_value(R.current_assignment_value(a)) == a


def test_keys_are_kafkas_and_distinct_per_record_kind():
    # ConsumerGroupMetadataKey: int16 version 3, then the group as an int16-length string.
    assert R.consumer_key(R.GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert R.consumer_key(R.CURRENT_MEMBER_ASSIGNMENT, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    keys = {R.consumer_key(k, "g") for k in R.GROUP_KINDS}
    keys |= {R.consumer_key(k, "g", "m") for k in R.MEMBER_KINDS}
    assert len(keys) == 6
    for k in R.GROUP_KINDS:
        assert R.decode_consumer_key(R.consumer_key(k, "g")) == R.ConsumerKey(k, "g")
    for k in R.MEMBER_KINDS:
        assert R.decode_consumer_key(R.consumer_key(k, "g", "m")) == R.ConsumerKey(k, "g", "m")
    assert R.decode_consumer_key(b"\x00\x02\x00\x01g") is None  # a classic GroupMetadataKey


def test_values_written_by_kafka_with_tagged_fields_are_read():
    # ConsumerGroupMetadataValue v0 as Kafka 4.1 writes it: epoch 9, then tag 0
    # (MetadataHash, int64) in the tagged-field section.
    value = b"\x00\x00" + struct.pack(">i", 9) + b"\x01\x00\x08" + struct.pack(">q", 1234)
    assert R.decode_epoch_value(value) == 9
    # TopicPartitions with KIP-1251's AssignmentEpochs (tag 0) on the partition list.
    tp = T1.bytes + b"\x02" + struct.pack(">i", 3) + b"\x01\x00\x05\x02" + struct.pack(">i", 5)
    current = b"\x00\x00" + struct.pack(">iib", 5, 4, 0) + b"\x02" + tp + b"\x01" + b"\x00"
    a = R.decode_current_assignment_value(current)
    assert a.member_epoch == 5 and a.assigned == {T1: {3}} and a.pending_revocation == {}


def make(partitions: int = 3) -> GroupCoordinator:
    core = GroupCoordinator(
        CoordinatorConfig(
            num_partitions=partitions,
            limits=GroupLimits(6000, 300000, 0, 100),
            consumer=ConsumerConfig(session_timeout_ms=10000, heartbeat_interval_ms=1000),
        )
    )
    for p in range(partitions):
        core.load(p, [], 0)
    return core


def hb(member: str, epoch: int, owned=None, topics=None, instance=None) -> HeartbeatRequest:
    return HeartbeatRequest(
        member, epoch, instance, None, 30000, topics, None, None, owned, "c", "/h", 1
    )


def owned(resp) -> dict:
    return {tp["topic_id"]: set(tp["partitions"]) for tp in resp["assignment"]["topic_partitions"]}


def stable_pair(core: GroupCoordinator, out: Out, view) -> tuple[dict, dict]:
    """Two members a, b of group G on topic t, reconciled to a stable split."""
    ra = core.consumer_heartbeat(G, hb("a", 0, {}, ["t"]), view, 0, out)
    rb = core.consumer_heartbeat(G, hb("b", 0, {}, ["t"]), view, 10, out)
    ra = core.consumer_heartbeat(G, hb("a", ra["member_epoch"], None), view, 20, out)
    ra = core.consumer_heartbeat(G, hb("a", ra["member_epoch"], owned(ra)), view, 30, out)
    rb = core.consumer_heartbeat(G, hb("b", rb["member_epoch"], {}), view, 40, out)
    assert core.groups[G].state == "Stable"
    return ra, rb


def compacted(out: Out, partition: int) -> list[tuple[bytes, bytes | None]]:
    """What compaction keeps of a partition: the last value of each key, in log order."""
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for i, (p, k, v) in enumerate(out.records):
        if p == partition:
            last[k] = (i, v)
    return [(k, v) for k, (_, v) in sorted(last.items(), key=lambda e: e[1][0])]


def test_restarted_coordinator_continues_the_group_without_fencing_or_reassigning():
    core, out = make(), Out()
    view = {"t": (T1, 4)}
    ra, rb = stable_pair(core, out, view)
    before = core.consumer_describe(G, {T1: "t"}, view)
    p = core.partition_for(G)
    for records in ([(k, v) for q, k, v in out.records if q == p], compacted(out, p)):
        fresh = make()
        fresh.load(p, records, 100_000)
        assert fresh.consumer_describe(G, {T1: "t"}, view) == before
        after = Out()
        for name, r in (("a", ra), ("b", rb)):
            again = fresh.consumer_heartbeat(
                G, hb(name, r["member_epoch"], owned(r)), view, 100_010, after
            )
            assert again["error_code"] == E.NONE
            assert again["member_epoch"] == r["member_epoch"]
            assert owned(again) == owned(r)
        assert fresh.groups[G].group_epoch == core.groups[G].group_epoch
        assert after.records == []  # nothing changed: nothing written


def test_member_that_never_comes_back_is_removed_after_its_session():
    core, out = make(), Out()
    view = {"t": (T1, 4)}
    ra, _ = stable_pair(core, out, view)
    p = core.partition_for(G)
    fresh = make()
    fresh.load(p, [(k, v) for q, k, v in out.records if q == p], 100_000)
    later = Out()
    ra = fresh.consumer_heartbeat(G, hb("a", ra["member_epoch"], owned(ra)), view, 105_000, later)
    fresh.tick(109_999, view, later)
    assert set(fresh.groups[G].members) == {"a", "b"}  # b's session runs from the load
    fresh.tick(110_000, view, later)
    assert set(fresh.groups[G].members) == {"a"}
    ra = fresh.consumer_heartbeat(G, hb("a", ra["member_epoch"], owned(ra)), view, 110_010, later)
    assert owned(ra) == {T1: {0, 1, 2, 3}}
    # b's records were tombstoned: a second restart has a alone.
    third = make()
    third.load(p, compacted(Out(records=out.records + later.records), p), 200_000)
    assert set(third.groups[G].members) == {"a"}
    assert third.groups[G].members["a"].member_epoch == ra["member_epoch"]


def test_leave_and_delete_write_tombstones_and_replay_has_no_group():
    core, out = make(), Out()
    view = {"t": (T1, 2)}
    stable_pair(core, out, view)
    left = Out()
    core.consumer_heartbeat(G, hb("a", -1), view, 60, left)
    assert {
        (R.decode_consumer_key(k).kind, v)
        for _, k, v in left.records
        if R.decode_consumer_key(k) and R.decode_consumer_key(k).member_id == "a"
    } == {
        (R.CURRENT_MEMBER_ASSIGNMENT, None),
        (R.TARGET_ASSIGNMENT_MEMBER, None),
        (R.MEMBER_METADATA, None),
    }
    core.consumer_heartbeat(G, hb("b", -1), view, 70, left)
    assert core.delete_group(G, left) == E.NONE
    p = core.partition_for(G)
    final = compacted(Out(records=out.records + left.records), p)
    assert all(v is None for k, v in final if R.decode_consumer_key(k) is not None)
    fresh = make()
    fresh.load(p, final, 1000)
    assert G not in fresh.groups


def test_consumer_group_becoming_classic_tombstones_its_records():
    from odradek.coordinator.classic import JoinRequest

    core, out = make(), Out()
    view = {"t": (T1, 2)}
    r = core.consumer_heartbeat(G, hb("a", 0, {}, ["t"]), view, 0, out)
    core.consumer_heartbeat(G, hb("a", -1), view, 10, out)
    join = JoinRequest(G, "", None, "consumer", [("range", b"")], 10000, 10000, "c", "/h", 5)
    core.join_group(join, 1, 20, out)
    assert r["error_code"] == E.NONE and type(core.groups[G]).__name__ == "ClassicGroup"
    p = core.partition_for(G)
    final = compacted(out, p)
    consumer_keys = [(k, v) for k, v in final if R.decode_consumer_key(k) is not None]
    assert consumer_keys and all(v is None for _, v in consumer_keys)
    fresh = make()
    fresh.load(p, final, 1000)
    assert type(fresh.groups.get(G)).__name__ != "ConsumerGroup"


def test_static_member_that_left_for_now_is_still_away_after_a_replay():
    core, out = make(), Out()
    view = {"t": (T1, 2)}
    r = core.consumer_heartbeat(G, hb("a", 0, {}, ["t"], instance="i1"), view, 0, out)
    core.consumer_heartbeat(G, hb("a", -2, instance="i1"), view, 10, out)
    p = core.partition_for(G)
    fresh = make()
    fresh.load(p, compacted(out, p), 1000)
    m = fresh.groups[G].members["a"]
    assert m.left_static and m.member_epoch == r["member_epoch"] and m.assigned == {T1: {0, 1}}
    back = fresh.consumer_heartbeat(G, hb("a2", 0, {}, ["t"], instance="i1"), view, 2000, Out())
    assert back["error_code"] == E.NONE and owned(back) == {T1: {0, 1}}


def test_groups_of_a_loading_partition_answer_load_in_progress():
    core = GroupCoordinator(CoordinatorConfig(num_partitions=1))
    loader = core.begin_load(0)
    assert core.coordinator_error(G) == E.NONE  # FindCoordinator answers this broker
    assert core.check(G) == E.COORDINATOR_LOAD_IN_PROGRESS
    out = Out()
    r = core.consumer_heartbeat(G, hb("a", 0, {}, ["t"]), {"t": (T1, 1)}, 0, out)
    assert r["error_code"] == E.COORDINATOR_LOAD_IN_PROGRESS and out.records == []
    assert core.fetch_offsets(G, None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert core.commit_offsets(G, "", None, -1, [OffsetCommit("t", 0, 1, -1, None)], 9, 0, out) == [
        E.COORDINATOR_LOAD_IN_PROGRESS
    ]
    loader.install(core, 0)
    assert core.check(G) == E.NONE
