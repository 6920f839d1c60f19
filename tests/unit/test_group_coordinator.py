"""The group coordinator core, driven with a fake clock and no I/O."""

from __future__ import annotations

import uuid

from odradek.coordinator import errors as E
from odradek.coordinator.assignors import range_, uniform
from odradek.coordinator.classic import GroupLimits, JoinRequest, SyncRequest
from odradek.coordinator.consumer import ConsumerConfig, HeartbeatRequest
from odradek.coordinator.consumer_protocol import (
    assigned_partitions,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from odradek.coordinator.core import (
    CoordinatorConfig,
    GroupCoordinator,
    OffsetCommit,
    Out,
    java_string_hashcode,
    partition_for,
)
from odradek.coordinator.records import (
    GroupValue,
    MemberValue,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_value,
    offset_key,
    offset_value,
)

G = "grp"


def make(delay_ms: int = 0, max_size: int = 100, partitions: int = 5) -> GroupCoordinator:
    core = GroupCoordinator(
        CoordinatorConfig(
            num_partitions=partitions,
            limits=GroupLimits(6000, 300000, delay_ms, max_size),
            consumer=ConsumerConfig(session_timeout_ms=10000, heartbeat_interval_ms=1000),
            offsets_retention_ms=60_000,
        )
    )
    for p in range(partitions):
        core.load(p, [], 0)
    return core


def join(
    core: GroupCoordinator,
    out: Out,
    token: int,
    member_id: str = "",
    now: int = 0,
    instance: str | None = None,
    version: int = 9,
    protocols: list | None = None,
    session_ms: int = 10000,
) -> None:
    core.join_group(
        JoinRequest(
            G,
            member_id,
            instance,
            "consumer",
            protocols or [("range", encode_subscription(["t"]))],
            session_ms,
            30000,
            "client",
            "/127.0.0.1",
            version,
        ),
        token,
        now,
        out,
    )


def replies(out: Out) -> dict[int, dict]:
    found = dict(out.replies)
    out.replies.clear()
    return found


def full_join(core: GroupCoordinator, out: Out, token: int, now: int = 0) -> str:
    join(core, out, token, now=now)
    member_id = replies(out)[token]["member_id"]
    join(core, out, token + 1, member_id=member_id, now=now)
    return member_id


def test_java_hashcode_and_partition_match_kafka():
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("") == 0
    h = ((0xE9 * 31 + 0x20AC) * 31 + 0xD834) * 31 + 0xDD1E  # UTF-16 code units of "é€𝄞"
    assert java_string_hashcode("é€𝄞") == h
    # the famous string whose hashCode is Integer.MIN_VALUE: Utils.abs maps it to 0
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert 0 <= partition_for("my-group", 50) < 50
    assert partition_for("my-group", 50) == abs(java_string_hashcode("my-group")) % 50


def test_records_round_trip_in_kafka_formats():
    key = offset_key("g", "t", 3)
    assert key[:2] == b"\x00\x01"
    k = decode_key(key)
    assert (k.group, k.topic, k.partition) == ("g", "t", 3)
    v = OffsetValue(42, 7, "meta", 1234)
    assert offset_value(v)[:2] == b"\x00\x03"
    assert decode_offset_value(offset_value(v)) == v
    gv = GroupValue(
        "consumer",
        3,
        "range",
        "m1",
        99,
        (MemberValue("m1", "i1", "c", "/h", 30000, 10000, b"sub", b"asg"),),
    )
    assert group_value(gv)[:2] == b"\x00\x03"
    assert decode_group_value(group_value(gv)) == gv


def test_consumer_protocol_bytes():
    assert subscribed_topics(encode_subscription(["a", "b"])) == {"a", "b"}
    assert assigned_partitions(encode_assignment({"a": [2, 0]})) == {"a": [0, 2]}
    assert subscribed_topics(b"\x00") is None


def test_join_v4_asks_for_member_id_then_one_member_rebalances_alone():
    core, out = make(), Out()
    join(core, out, 1)
    first = replies(out)[1]
    assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"]
    join(core, out, 2, member_id=first["member_id"])
    resp = replies(out)[2]
    assert resp["error_code"] == 0 and resp["generation_id"] == 1
    assert resp["leader"] == first["member_id"] and len(resp["members"]) == 1
    core.sync_group(
        G,
        SyncRequest(first["member_id"], None, 1, "consumer", "range", {first["member_id"]: b"A"}),
        3,
        0,
        out,
    )
    assert replies(out)[3]["assignment"] == b"A"
    assert core.groups[G].state == "Stable"
    assert any(r[1][:2] == b"\x00\x02" for r in out.records)  # GroupMetadata written


def test_second_member_triggers_rebalance_and_both_get_assignments():
    core, out = make(), Out()
    a = full_join(core, out, 1)
    replies(out)
    core.sync_group(G, SyncRequest(a, None, 1, None, None, {a: b"A"}), 3, 0, out)
    replies(out)
    b = full_join(core, out, 10)
    assert replies(out) == {}  # b waits for a to rejoin
    assert core.heartbeat(G, a, None, 1, 100) == E.REBALANCE_IN_PROGRESS
    join(core, out, 20, member_id=a, now=100)
    got = replies(out)
    assert got[11]["generation_id"] == got[20]["generation_id"] == 2
    leader = got[20] if got[20]["members"] else got[11]
    assert len(leader["members"]) == 2
    core.sync_group(G, SyncRequest(b, None, 2, None, None, {}), 30, 100, out)
    assert replies(out) == {}  # follower waits for the leader
    lead_id = leader["member_id"]
    core.sync_group(
        G, SyncRequest(lead_id, None, 2, None, None, {a: b"A2", b: b"B2"}), 31, 100, out
    )
    got = replies(out)
    assert {got[30]["assignment"], got[31]["assignment"]} == {b"A2", b"B2"}
    assert core.heartbeat(G, a, None, 1, 200) == E.ILLEGAL_GENERATION
    assert core.heartbeat(G, "nobody", None, 2, 200) == E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_member_and_rebalances():
    core, out = make(), Out()
    a = full_join(core, out, 1)
    replies(out)
    core.sync_group(G, SyncRequest(a, None, 1, None, None, {a: b""}), 3, 0, out)
    b = full_join(core, out, 10)
    join(core, out, 20, member_id=a)
    replies(out)
    core.sync_group(G, SyncRequest(a, None, 2, None, None, {}), 21, 0, out)
    core.sync_group(G, SyncRequest(b, None, 2, None, None, {}), 22, 0, out)
    replies(out)
    for now in range(1000, 9001, 1000):
        assert core.heartbeat(G, a, None, 2, now) == 0
        core.tick(now, {}, out)
    core.tick(10_500, {}, out)  # b has not heartbeat for 10 s
    assert b not in core.groups[G].members
    assert core.heartbeat(G, a, None, 2, 10_600) == E.REBALANCE_IN_PROGRESS


def test_invalid_session_timeout_and_group_max_size():
    core, out = make(max_size=1), Out()
    join(core, out, 1, session_ms=1000)
    assert replies(out)[1]["error_code"] == E.INVALID_SESSION_TIMEOUT
    full_join(core, out, 2)
    join(core, out, 5)
    assert replies(out)[5]["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_initial_rebalance_delay_waits_for_more_members():
    core, out = make(delay_ms=3000), Out()
    full_join(core, out, 1, now=0)
    assert 2 not in replies(out)
    full_join(core, out, 10, now=1000)
    core.tick(2999, {}, out)
    assert replies(out) == {}
    core.tick(3000, {}, out)  # b joined during the delay: extended once
    assert replies(out) == {}
    core.tick(6000, {}, out)
    got = replies(out)
    assert got[2]["generation_id"] == got[11]["generation_id"] == 1


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced():
    core, out = make(), Out()
    join(core, out, 1, instance="i1")
    a = replies(out)[1]["member_id"]
    core.sync_group(G, SyncRequest(a, "i1", 1, None, None, {a: b"A"}), 2, 0, out)
    replies(out)
    join(core, out, 3, instance="i1", now=50)  # restarted: no member id
    resp = replies(out)[3]
    assert resp["error_code"] == 0 and resp["generation_id"] == 1 and resp["skip_assignment"]
    new_id = resp["member_id"]
    core.sync_group(G, SyncRequest(new_id, "i1", 1, None, None, {}), 4, 50, out)
    assert replies(out)[4]["assignment"] == b"A"
    assert core.heartbeat(G, a, "i1", 1, 60) == E.FENCED_INSTANCE_ID


def test_leave_group_and_delete_group_and_offsets():
    core, out = make(), Out()
    a = full_join(core, out, 1)
    replies(out)
    core.sync_group(G, SyncRequest(a, None, 1, None, None, {a: b""}), 3, 0, out)
    codes = core.commit_offsets(G, a, None, 1, [OffsetCommit("t", 0, 5, -1, "m")], 8, 0, out)
    assert codes == [0]
    assert core.delete_group(G, out) == E.NON_EMPTY_GROUP
    assert core.leave_group(G, [(a, None), ("x", None)], 0, out)[1] == [0, E.UNKNOWN_MEMBER_ID]
    assert core.groups[G].state == "Empty"
    _code, found = core.fetch_offsets(G, None)
    assert found["t"][0][1].offset == 5 and found["t"][0][1].metadata == "m"
    out.records.clear()
    assert core.delete_group(G, out) == 0
    assert [r[2] for r in out.records] == [None, None]  # offset and group tombstones
    assert core.delete_group(G, out) == E.GROUP_ID_NOT_FOUND


def test_offset_commit_rules():
    core, out = make(), Out()
    assert core.commit_offsets(G, "", None, 3, [OffsetCommit("t", 0, 1, -1, None)], 8, 0, out) == [
        E.ILLEGAL_GENERATION
    ]
    assert core.commit_offsets(G, "", None, 3, [OffsetCommit("t", 0, 1, -1, None)], 9, 0, out) == [
        E.GROUP_ID_NOT_FOUND
    ]
    assert core.commit_offsets(
        G, "", None, -1, [OffsetCommit("t", 0, 1, -1, "x" * 5000)], 9, 0, out
    ) == [E.OFFSET_METADATA_TOO_LARGE]
    assert core.check("") == E.INVALID_GROUP_ID


def test_replay_rebuilds_groups_and_offsets():
    core, out = make(), Out()
    a = full_join(core, out, 1)
    core.sync_group(G, SyncRequest(a, None, 1, None, None, {a: b"A"}), 3, 0, out)
    core.commit_offsets(G, a, None, 1, [OffsetCommit("t", 1, 9, 2, "meta")], 8, 0, out)
    core.commit_offsets("other", "", None, -1, [OffsetCommit("t", 0, 3, -1, None)], 8, 0, out)
    core.delete_group("other", out)
    fresh = make()
    p = fresh.partition_for(G)
    records = [(k, v) for part, k, v in out.records if part == p]
    fresh.load(p, records, 1000)
    group = fresh.groups[G]
    assert group.state == "Stable" and group.generation == 1 and a in group.members
    assert group.members[a].assignment == b"A"
    assert fresh.fetch_offsets(G, [("t", [1])])[1]["t"][0][1].offset == 9
    q = fresh.partition_for("other")
    fresh.load(q, [(k, v) for part, k, v in out.records if part == q], 1000)
    assert "other" not in fresh.groups


def test_offsets_of_empty_group_expire_after_retention():
    core, out = make(), Out()
    core.commit_offsets(G, "", None, -1, [OffsetCommit("t", 0, 1, -1, None)], 8, 0, out)
    out.records.clear()
    assert core.expire_offsets(59_999, {}, out) == 0
    assert core.expire_offsets(60_000, {}, out) == 1
    assert G not in core.groups


def test_uniform_and_range_assignors():
    tid = uuid.uuid4()
    members = {"a": frozenset({"t"}), "b": frozenset({"t"}), "c": frozenset({"t"})}
    topics = {"t": (tid, 6)}
    u = uniform(members, topics, {})
    assert sorted(len(x[tid]) for x in u.values()) == [2, 2, 2]
    assert set().union(*(x[tid] for x in u.values())) == set(range(6))
    # sticky: removing c keeps a's and b's partitions
    u2 = uniform({"a": members["a"], "b": members["b"]}, topics, u)
    assert u["a"][tid] <= u2["a"][tid] and u["b"][tid] <= u2["b"][tid]
    r = range_(members, topics, {})
    assert r["a"][tid] == {0, 1} and r["c"][tid] == {4, 5}


def hb(
    member: str, epoch: int, owned: dict | None, topics: list[str] | None = None
) -> HeartbeatRequest:
    return HeartbeatRequest(
        member, epoch, None, None, 30000, topics, None, None, owned, "c", "/h", 1
    )


def test_kip848_revocation_before_assignment():
    core = make()
    tid = uuid.uuid4()
    view = {"t": (tid, 4)}
    r = core.consumer_heartbeat(G, hb("a", 0, {}, ["t"]), view, 0, Out())
    assert r["member_epoch"] == 1
    assert r["assignment"]["topic_partitions"][0]["partitions"] == [0, 1, 2, 3]
    r = core.consumer_heartbeat(G, hb("b", 0, {}, ["t"]), view, 10, Out())
    assert r["member_epoch"] == 2 and r["assignment"]["topic_partitions"] == []  # still a's
    r = core.consumer_heartbeat(G, hb("a", 1, None), view, 20, Out())
    assert r["member_epoch"] == 1  # a must revoke first
    kept = set(r["assignment"]["topic_partitions"][0]["partitions"])
    assert len(kept) == 2
    r = core.consumer_heartbeat(G, hb("b", 2, None), view, 30, Out())
    assert r["assignment"] is None or r["assignment"]["topic_partitions"] == []
    r = core.consumer_heartbeat(G, hb("a", 1, {tid: kept}), view, 40, Out())  # revoked
    assert r["member_epoch"] == 2
    r = core.consumer_heartbeat(G, hb("b", 2, None), view, 50, Out())
    assert set(r["assignment"]["topic_partitions"][0]["partitions"]) == {0, 1, 2, 3} - kept
    assert core.groups[G].state == "Stable"
    r = core.consumer_heartbeat(G, hb("b", 7, None), view, 60, Out())
    assert r["error_code"] == E.FENCED_MEMBER_EPOCH
    core.tick(10_045, view, Out())  # a's session (last at 40) ended; b's (50) not
    assert list(core.groups[G].members) == ["b"]
