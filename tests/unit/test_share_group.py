"""Share-group membership (coordinator/share_group.py) and share sessions
(broker/share_session.py), without a broker."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.share_session import (
    INVALID_SHARE_SESSION_EPOCH,
    SHARE_SESSION_LIMIT_REACHED,
    SHARE_SESSION_NOT_FOUND,
    SessionError,
    ShareSessionCache,
)
from odradek.coordinator.share_group import (
    ShareGroupConfig,
    ShareGroups,
    ShareHeartbeat,
    ShareMember,
    assign,
)

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (T1, 3), "b": (T2, 1)}


def hb(member: str, epoch: int, topics: tuple[str, ...] | None = None) -> ShareHeartbeat:
    return ShareHeartbeat(member, epoch, None, topics)


def test_assignor_shares_partitions_only_when_members_outnumber_them() -> None:
    members = [ShareMember(f"m{i}", subscribed=("a", "b")) for i in range(4)]
    plan = assign(members, TOPICS)
    a = sorted(p for m in plan.values() for p in m.get(T1, []))
    b = sorted(p for m in plan.values() for p in m.get(T2, []))
    assert a == [0, 0, 1, 2]  # three partitions, four members: one shared
    assert b == [0, 0, 0, 0]  # one partition, four members: all share it
    assert all(plan[m.member_id] for m in members)
    two = assign(members[:2], {"a": (T1, 4)})
    assert sorted(two["m0"][T1] + two["m1"][T1]) == [0, 1, 2, 3]
    assert len(two["m0"][T1]) == 2


def test_epochs_fencing_leave_and_session_timeout() -> None:
    groups = ShareGroups(ShareGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=100))
    told: list[tuple[str, str]] = []
    groups.departure_listeners.append(lambda g, m: told.append((g, m)))
    first = groups.heartbeat("g", hb("m1", 0, ("a",)), TOPICS, now_ms=0)
    assert first["error_code"] == 0 and first["assignment"] is not None
    e1 = first["member_epoch"]
    quiet = groups.heartbeat("g", hb("m1", e1), TOPICS, now_ms=100)
    assert quiet["member_epoch"] == e1 and quiet["assignment"] is None
    assert groups.heartbeat("g", hb("m1", e1 + 1), TOPICS, 100)["error_code"] == 110
    assert groups.heartbeat("g", hb("zz", 3), TOPICS, 100)["error_code"] == 25
    assert groups.heartbeat("g", hb("m2", 0), TOPICS, 100)["error_code"] == 42  # no topics
    second = groups.heartbeat("g", hb("m2", 0, ("a",)), TOPICS, now_ms=200)
    moved = groups.heartbeat("g", hb("m1", e1), TOPICS, now_ms=300)
    assert moved["member_epoch"] == second["member_epoch"] > e1
    assert moved["assignment"] is not None
    # m2 stops heartbeating: gone after the session timeout, m1 gets everything
    groups.expire(now_ms=1250, topics=TOPICS)
    assert list(groups.groups["g"].members) == ["m1"]
    assert told == [("g", "m2")]  # the node's leaders release m2's records
    again = groups.heartbeat("g", hb("m1", moved["member_epoch"]), TOPICS, now_ms=1250)
    parts = again["assignment"]["topic_partitions"][0]["partitions"]
    assert parts == [0, 1, 2]
    left = groups.heartbeat("g", hb("m1", -1), TOPICS, now_ms=1400)
    assert left["member_epoch"] == -1
    assert told == [("g", "m2")]  # a member that leaves closes its own share sessions
    assert groups.describe("g", {})["group_state"] == "Empty"
    assert groups.describe("nope", {})["error_code"] == 69


def test_group_max_size() -> None:
    groups = ShareGroups(ShareGroupConfig(max_size=1))
    assert groups.heartbeat("g", hb("m1", 0, ("a",)), TOPICS, 0)["error_code"] == 0
    assert groups.heartbeat("g", hb("m2", 0, ("a",)), TOPICS, 0)["error_code"] == 81


def test_share_sessions_epochs_and_limit() -> None:
    now = [0]
    cache = ShareSessionCache(max_sessions=2, idle_ms=1000, clock_ms=lambda: now[0])
    with pytest.raises(SessionError) as e:
        cache.lookup(("g", "m"), 1)
    assert e.value.code == SHARE_SESSION_NOT_FOUND
    cache.open(("g", "m"))
    assert cache.lookup(("g", "m"), 1).epoch == 2
    with pytest.raises(SessionError) as e:
        cache.lookup(("g", "m"), 1)
    assert e.value.code == INVALID_SHARE_SESSION_EPOCH
    cache.open(("g", "n"))
    with pytest.raises(SessionError) as e:
        cache.open(("g", "o"))
    assert e.value.code == SHARE_SESSION_LIMIT_REACHED
    now[0] = 1000  # both idle for the session timeout: evicted for a new one
    cache.open(("g", "o"))
    assert list(cache.sessions) == [("g", "o")]
