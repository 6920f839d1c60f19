"""KIP-848 consumer groups (`group.protocol=consumer`) with librdkafka.

The broker assigns (server-side `uniform` / `range`); members reconcile on
their heartbeats, revoking before another member is given a partition.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException

from odradek.protocol import api
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Out, Wire, ck_common, ck_produce, create_topic
from tests.integration.test_groups_helpers import (
    Members,
    kio_call,
    offset_commit_v8,
    start_group_broker,
    values,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture(scope="module")
def gbroker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("kip848"), broker_kind)
    try:
        yield proc
    finally:
        proc.close()


def ck_848(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer(
        {
            **ck_common(bootstrap),
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **conf,
        }
    )


def describe(bootstrap: str, group: str, version: int = 0):
    body = {"group_ids": [group], "include_authorized_operations": False}
    with Wire(bootstrap) as w:
        return kio_call(w, api.ApiKey.CONSUMER_GROUP_DESCRIBE, version, body).groups[0]


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_kip848_members_share_partitions_and_take_over_when_one_leaves(
    gbroker, topic_name, assignor
):
    group = f"g848-{uuid.uuid4().hex[:8]}"
    create_topic(gbroker.bootstrap, topic_name, 6)
    first = values("a", 60)
    ck_produce(
        gbroker.bootstrap, topic_name, [Out(v, partition=i % 6) for i, v in enumerate(first)]
    )
    conf = {"group.remote.assignor": assignor}
    m = Members()
    try:
        m.add("c1", ck_848(gbroker.bootstrap, group, **conf), [topic_name])
        m.add("c2", ck_848(gbroker.bootstrap, group, **conf), [topic_name])
        m.add("c3", ck_848(gbroker.bootstrap, group, **conf), [topic_name])
        m.poll_until(lambda: m.balanced(6) and set(first) <= m.values(), desc="3-way split")
        d = describe(gbroker.bootstrap, group)
        assert d.group_state == "Stable" and d.assignor_name == assignor
        assert len(d.members) == 3
        assert all(mem.member_epoch == d.assignment_epoch for mem in d.members)
        owned = sorted(
            p for mem in d.members for tp in mem.assignment.topic_partitions for p in tp.partitions
        )
        assert owned == list(range(6))
        described = subprocess.run(
            [
                sys.executable,
                "-m",
                "odradek",
                "groups",
                "--bootstrap-server",
                gbroker.bootstrap,
                "describe",
                group,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = [ln.split() for ln in described.stdout.splitlines()[1:] if ln.strip()]
        assert sorted(int(ln[2]) for ln in lines) == list(range(6)), described.stdout
        assert {ln[6] for ln in lines} == {mem.member_id for mem in d.members}
        m.remove("c3")
        m.poll_until(lambda: m.balanced(6) and len(m.consumers) == 2, desc="2-way split")
        second = values("b", 60)
        ck_produce(
            gbroker.bootstrap, topic_name, [Out(v, partition=i % 6) for i, v in enumerate(second)]
        )
        m.poll_until(lambda: set(second) <= m.values(), desc="records after the leave")
        m.consumers["c1"].commit(asynchronous=False)
        m.consumers["c2"].commit(asynchronous=False)
    finally:
        m.close()
    d = describe(gbroker.bootstrap, group)
    assert d.group_state == "Empty"


def test_kip848_member_commits_need_offset_commit_v9(gbroker, topic_name):
    """A consumer-protocol member's OffsetCommit below v9 answers UNSUPPORTED_VERSION
    (its errors, e.g. STALE_MEMBER_EPOCH, came with v9), as Kafka's ConsumerGroup
    .validateOffsetCommit; v9 takes the member epoch and refuses a stale one."""
    group = f"g848-{uuid.uuid4().hex[:8]}"
    create_topic(gbroker.bootstrap, topic_name, 2)
    m = Members()
    try:
        m.add("c1", ck_848(gbroker.bootstrap, group), [topic_name])
        m.poll_until(lambda: m.balanced(2), desc="assigned")
        (member,) = describe(gbroker.bootstrap, group).members

        def commit(version: int, epoch: int) -> int:
            body = offset_commit_v8(group, topic_name, {0: 1})
            body.update(member_id=member.member_id, generation_id_or_member_epoch=epoch)
            with Wire(gbroker.bootstrap) as w:
                r = kio_call(w, api.ApiKey.OFFSET_COMMIT, version, body)
            return r.topics[0].partitions[0].error_code.value

        assert commit(8, member.member_epoch) == 35  # UNSUPPORTED_VERSION
        assert commit(9, member.member_epoch) == 0
        assert commit(9, member.member_epoch - 1) == 113  # STALE_MEMBER_EPOCH
    finally:
        m.close()


def test_kip848_describe_unknown_group_is_group_id_not_found(gbroker):
    d = describe(gbroker.bootstrap, "no-such-group-" + uuid.uuid4().hex)
    assert d.error_code.value == 69


def _members_view(d) -> dict[str, tuple[int, list[int]]]:
    """member id -> (member epoch, owned partitions) from ConsumerGroupDescribe."""
    return {
        m.member_id: (
            m.member_epoch,
            sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions),
        )
        for m in d.members
    }


@pytest.mark.parametrize("hard", [True, False], ids=["kill9", "clean"])
def test_kip848_group_survives_broker_restart_without_reassignment(
    broker_kind, tmp_path, topic_name, hard
):
    """Kafka's coordinator failover: the group's records are replayed, members that
    heartbeat with their id and epoch keep their partitions, no one is fenced."""
    proc = start_group_broker(tmp_path, broker_kind)
    group = f"g848r-{uuid.uuid4().hex[:8]}"
    m = Members()
    try:
        create_topic(proc.bootstrap, topic_name, 4)
        first = values("before", 80)
        ck_produce(
            proc.bootstrap, topic_name, [Out(v, partition=i % 4) for i, v in enumerate(first)]
        )
        m.add("c1", ck_848(proc.bootstrap, group), [topic_name])
        m.add("c2", ck_848(proc.bootstrap, group), [topic_name])
        m.poll_until(lambda: m.balanced(4) and set(first) <= m.values(), desc="2-way split")
        before = describe(proc.bootstrap, group)
        assert before.group_state == "Stable", before
        for c in m.consumers.values():
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:
                # A member may own only partitions the other one read before the
                # split (nothing consumed since, nothing to commit).
                if e.args[0].code() != KafkaError._NO_OFFSET:
                    raise
        assigned_before = dict(m.assign_calls)
        owned_before = m.assignments()

        proc.restart(hard=hard)

        second = values("after", 80)
        ck_produce(
            proc.bootstrap, topic_name, [Out(v, partition=i % 4) for i, v in enumerate(second)]
        )
        m.poll_until(lambda: set(second) <= m.values(), desc="records produced after the restart")
        after = describe(proc.bootstrap, group)
        # The same members, epochs and partitions: nothing was reassigned.
        assert after.group_epoch == before.group_epoch
        assert after.assignment_epoch == before.assignment_epoch
        assert _members_view(after) == _members_view(before)
        assert m.assignments() == owned_before
        assert m.assign_calls == assigned_before
        # At least once: every record produced was consumed.
        assert set(first) | set(second) <= m.values()
    finally:
        m.close()
        proc.close()
