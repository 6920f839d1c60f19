"""KIP-848 online migration in the coordinator core: upgrade of a classic group,
classic members inside a consumer group, replay, downgrade, the policy."""

from __future__ import annotations

import uuid

from odradek.coordinator import consumer_records as R
from odradek.coordinator import errors as E
from odradek.coordinator.classic import ClassicGroup, GroupLimits, JoinRequest, SyncRequest
from odradek.coordinator.consumer import ConsumerConfig, ConsumerGroup, HeartbeatRequest
from odradek.coordinator.consumer_protocol import (
    assigned_partitions,
    encode_assignment,
    encode_subscription,
    parse_subscription,
)
from odradek.coordinator.core import CoordinatorConfig, GroupCoordinator, Out

G = "grp"
T = uuid.UUID(int=7)
VIEW = {"t": (T, 4)}


def make(policy: str = "bidirectional") -> GroupCoordinator:
    core = GroupCoordinator(
        CoordinatorConfig(
            num_partitions=1,
            limits=GroupLimits(1000, 300000, 0, 100),
            consumer=ConsumerConfig(session_timeout_ms=10000, heartbeat_interval_ms=1000),
            migration_policy=policy,
        )
    )
    core.load(0, [], 0)
    return core


def replies(out: Out) -> dict:
    got = dict(out.replies)
    out.replies.clear()
    return got


def classic_join(core, out, token, member_id="", now=0) -> dict:
    req = JoinRequest(G, member_id, None, "consumer", [("range", encode_subscription(["t"]))],
                      6000, 30000, "cl", "/h", 3)
    core.join_group(req, token, now, out, VIEW)
    return replies(out)[token]


def hb(member: str, epoch: int, owned=None) -> HeartbeatRequest:
    return HeartbeatRequest(member, epoch, None, None, 30000, ["t"] if epoch == 0 else None,
                            None, None, owned, "c", "/h", 1)


def stable_classic(core: GroupCoordinator, out: Out) -> str:
    a = classic_join(core, out, 1)["member_id"]
    core.sync_group(G, SyncRequest(a, None, 1, "consumer", "range",
                                   {a: encode_assignment({"t": [0, 1, 2, 3]})}), 2, 0, out)
    assert replies(out)[2]["error_code"] == E.NONE
    return a


def test_subscription_versions_parse():
    assert parse_subscription(encode_subscription(["b", "a"])) == (["a", "b"], {}, None)
    assert parse_subscription(b"\x00") is None


def test_classic_member_metadata_round_trips():
    md = R.MemberMetadata(None, None, "c", "/h", ("t",), None, 30000, None, 6000,
                          (("range", b"\x00\x01"), ("roundrobin", b"")))
    assert R.decode_member_metadata_value(R.member_metadata_value(md)) == md


def test_upgrade_then_classic_member_rejoins_and_downgrade_after_consumer_leaves():
    core, out = make(), Out()
    a = stable_classic(core, out)
    r = core.consumer_heartbeat(G, hb("b", 0, {}), VIEW, 100, out)
    assert r["error_code"] == E.NONE
    group = core.groups[G]
    assert isinstance(group, ConsumerGroup) and group.group_epoch == 2
    assert r["assignment"]["topic_partitions"] == []  # a still owns everything
    # the classic member is told to rejoin, revokes (eager: owns nothing), gets its half
    assert core.heartbeat(G, a, None, 1, 200) == E.REBALANCE_IN_PROGRESS
    j = classic_join(core, out, 3, a, 300)
    assert j["error_code"] == E.NONE and j["generation_id"] == 2 and j["leader"] == ""
    core.sync_group(G, SyncRequest(a, None, 2, "consumer", "range", {}), 4, 300, out, VIEW)
    mine = assigned_partitions(replies(out)[4]["assignment"])
    assert mine is not None and len(mine["t"]) == 2
    r = core.consumer_heartbeat(G, hb("b", r["member_epoch"], {}), VIEW, 400, out)
    theirs = set(r["assignment"]["topic_partitions"][0]["partitions"])
    assert theirs | set(mine["t"]) == {0, 1, 2, 3} and not theirs & set(mine["t"])
    assert core.heartbeat(G, a, None, 2, 500) == E.NONE
    # a replay of the partition gives the same mixed group
    fresh = make()
    fresh.load(0, [(k, v) for _, k, v in out.records], 600)
    again = fresh.groups[G]
    assert isinstance(again, ConsumerGroup) and again.members[a].is_classic
    assert not again.members["b"].is_classic
    # b leaves: only a classic member is left, the group downgrades and rebalances
    core.consumer_heartbeat(G, hb("b", -1), VIEW, 700, out)
    classic = core.groups[G]
    assert isinstance(classic, ClassicGroup) and classic.state == "PreparingRebalance"
    assert classic.generation == group.group_epoch
    assert core.heartbeat(G, a, None, classic.generation, 800) == E.REBALANCE_IN_PROGRESS
    fresh = make()
    fresh.load(0, [(k, v) for _, k, v in out.records], 900)
    assert isinstance(fresh.groups[G], ClassicGroup)


def test_policy_disabled_and_upgrade_only():
    core, out = make("disabled"), Out()
    stable_classic(core, out)
    r = core.consumer_heartbeat(G, hb("b", 0, {}), VIEW, 100, out)
    assert r["error_code"] == E.GROUP_ID_NOT_FOUND and "disabled" in r["error_message"]
    core, out = make("upgrade"), Out()
    a = stable_classic(core, out)
    assert core.consumer_heartbeat(G, hb("b", 0, {}), VIEW, 100, out)["error_code"] == E.NONE
    core.consumer_heartbeat(G, hb("b", -1), VIEW, 200, out)
    group = core.groups[G]
    assert isinstance(group, ConsumerGroup) and list(group.members) == [a]  # no downgrade


def test_downgrade_when_the_consumer_member_session_ends_and_classic_session_expiry():
    core, out = make(), Out()
    a = stable_classic(core, out)
    core.consumer_heartbeat(G, hb("b", 0, {}), VIEW, 100, out)
    assert isinstance(core.groups[G], ConsumerGroup)
    # a keeps its classic session (6 s) alive; b's 10 s KIP-848 session runs out
    for now in range(3000, 12000, 3000):
        assert core.heartbeat(G, a, None, core.groups[G].members[a].member_epoch, now) in (
            E.NONE, E.REBALANCE_IN_PROGRESS)
        core.tick(now, VIEW, out)
    core.tick(10_200, VIEW, out)
    assert isinstance(core.groups[G], ClassicGroup)
    # the other way: a classic member that stops heartbeating leaves the consumer group
    core, out = make(), Out()
    a = stable_classic(core, out)
    r = core.consumer_heartbeat(G, hb("b", 0, {}), VIEW, 100, out)
    for now in range(1000, 8000, 1000):
        r = core.consumer_heartbeat(G, hb("b", r["member_epoch"], None), VIEW, now, out)
        core.tick(now, VIEW, out)
    group = core.groups[G]
    assert isinstance(group, ConsumerGroup) and list(group.members) == ["b"]
