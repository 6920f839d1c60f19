"""Classic consumer groups against a real broker with real clients.

confluent-kafka (librdkafka) for membership, rebalances (eager and
cooperative-sticky), static members, session expiry after kill -9 and the
admin APIs; kafka-python and aiokafka for their own group consumers and
commits. Each test uses its own group and topic.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    TopicPartition,
)

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import (
    TIMEOUT,
    Out,
    ck_admin,
    ck_produce,
    create_topic,
    wait_until,
)
from tests.integration.test_groups_helpers import Members, ck_member, start_group_broker, values

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture(scope="module")
def gbroker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups"), broker_kind)
    try:
        yield proc
    finally:
        proc.close()


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def produce_spread(bootstrap: str, topic: str, vals: list[bytes], partitions: int) -> None:
    ck_produce(bootstrap, topic, [Out(v, partition=i % partitions) for i, v in enumerate(vals)])


def test_three_consumers_share_six_partitions_and_a_leaver_moves_partitions(
    gbroker, topic_name, group
):
    create_topic(gbroker.bootstrap, topic_name, 6)
    first = values("a", 60)
    produce_spread(gbroker.bootstrap, topic_name, first, 6)
    m = Members()
    try:
        for name in ("c1", "c2", "c3"):
            m.add(name, ck_member(gbroker.bootstrap, group), [topic_name])
        m.poll_until(lambda: m.balanced(6) and set(first) <= m.values(), desc="3-way split")
        assert sorted(len(p) for p in m.assignments().values()) == [2, 2, 2]
        # a member joining or leaving moves partitions: c3 leaves, c1 and c2 take over
        m.remove("c3")
        m.poll_until(lambda: m.balanced(6) and len(m.consumers) == 2, desc="2-way split")
        assert sorted(len(p) for p in m.assignments().values()) == [3, 3]
        second = values("b", 60)
        produce_spread(gbroker.bootstrap, topic_name, second, 6)
        m.poll_until(lambda: set(second) <= m.values(), desc="records after the leave")
        got = [v for name in ("c1", "c2") for _, _, v in m.records[name] if v in set(second)]
        assert len(got) == len(second), "a record after the rebalance was read twice"
    finally:
        m.close()


def test_cooperative_sticky_keeps_unaffected_partitions_in_place(gbroker, topic_name, group):
    create_topic(gbroker.bootstrap, topic_name, 6)
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    m = Members()
    try:
        m.add("c1", ck_member(gbroker.bootstrap, group, **conf), [topic_name])
        m.add("c2", ck_member(gbroker.bootstrap, group, **conf), [topic_name])
        m.poll_until(lambda: m.balanced(6), desc="2-way split")
        before = m.assignments()
        m.add("c3", ck_member(gbroker.bootstrap, group, **conf), [topic_name])
        m.poll_until(lambda: m.balanced(6) and len(m.assignments()) == 3, desc="3-way split")
        after = m.assignments()
        assert after["c1"] <= before["c1"] and after["c2"] <= before["c2"]
        assert len(after["c3"]) == 2
    finally:
        m.close()


KILLED_MEMBER = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                  "fetch.wait.max.ms": 100})
    c.subscribe([topic], on_assign=lambda c, ps: print("ASSIGNED", len(ps), flush=True))
    while True:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        c.commit(message=m, asynchronous=False)
        print("C", m.value().decode(), flush=True)
""")


def test_member_killed_with_kill9_loses_partitions_after_session_timeout(
    gbroker, topic_name, group, tmp_path: Path
):
    create_topic(gbroker.bootstrap, topic_name, 6)
    first = values("a", 60)
    produce_spread(gbroker.bootstrap, topic_name, first, 6)
    out_path = tmp_path / "member.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_MEMBER, gbroker.bootstrap, group, topic_name],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    m = Members()
    try:
        wait_until(lambda: "ASSIGNED 6" in out_path.read_text(), desc="the child owns all")
        m.add(
            "c1", ck_member(gbroker.bootstrap, group, **{"session.timeout.ms": 3000}), [topic_name]
        )
        m.poll_until(lambda: len(m.assignment("c1")) == 3, desc="c1 gets half")
        proc.kill()  # SIGKILL: no LeaveGroup
        proc.wait(10)
        killed_at = time.monotonic()
        second = values("b", 60)
        produce_spread(gbroker.bootstrap, topic_name, second, 6)
        m.poll_until(lambda: len(m.assignment("c1")) == 6, timeout=30, desc="c1 takes over")
        assert time.monotonic() - killed_at < 15
        committed_by_child = {
            line[2:].encode() for line in out_path.read_text().splitlines() if line.startswith("C ")
        }
        m.poll_until(
            lambda: set(first + second) <= m.values() | committed_by_child,
            desc="every record consumed (at least once)",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        m.close()


def test_static_members_rejoin_without_rebalance(gbroker, topic_name, group):
    create_topic(gbroker.bootstrap, topic_name, 4)
    m = Members()
    try:
        m.add(
            "s1", ck_member(gbroker.bootstrap, group, **{"group.instance.id": "s1"}), [topic_name]
        )
        m.add(
            "s2", ck_member(gbroker.bootstrap, group, **{"group.instance.id": "s2"}), [topic_name]
        )
        m.poll_until(lambda: m.balanced(4), desc="2-way split")
        before = m.assignments()
        calls = m.assign_calls["s2"]
        m.remove("s1")  # a static member does not send LeaveGroup on close
        m.add(
            "s1", ck_member(gbroker.bootstrap, group, **{"group.instance.id": "s1"}), [topic_name]
        )
        m.poll_until(lambda: m.assignment("s1") == before["s1"], desc="s1 back")
        for _ in range(20):
            m.poll_round(0.05)
        assert m.assign_calls["s2"] == calls, "s2 went through a rebalance"
        assert m.assignments() == before
    finally:
        m.close()


def test_closed_static_members_expire_after_the_session_timeout(gbroker, topic_name, group):
    """Static members closed without LeaveGroup (librdkafka sends none for them)
    leave the group once session.timeout.ms passes without a heartbeat: the group
    is empty by then (plus a coordinator tick and slack), and DeleteGroups
    succeeds, as on Kafka."""
    from confluent_kafka.admin import AdminClient

    session_ms = 5000
    create_topic(gbroker.bootstrap, topic_name, 4)
    m = Members()
    try:
        for name in ("a", "b"):
            m.add(name, ck_member(gbroker.bootstrap, group, **{
                "session.timeout.ms": session_ms, "enable.auto.commit": True,
                "group.instance.id": f"{group}-{name}"}), [topic_name])
        m.poll_until(lambda: m.balanced(4), desc="2-way split")
        for name in list(m.consumers):
            m.remove(name)
        closed_at = time.monotonic()
        admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
        state = None
        while time.monotonic() - closed_at < session_ms / 1000 + 10:
            desc = admin.describe_consumer_groups([group])[group].result(10)
            state = desc.state.name
            if state == "EMPTY":
                break
            time.sleep(0.1)
        emptied_s = time.monotonic() - closed_at
        print(f"static members expired after {emptied_s:.2f} s")
        assert state == "EMPTY", f"still {state} after {emptied_s:.1f} s"
        assert emptied_s <= session_ms / 1000 + 2.0, emptied_s
        admin.delete_consumer_groups([group])[group].result(10)
    finally:
        m.close()


def test_join_with_a_session_timeout_out_of_range_fails(gbroker, topic_name, group):
    create_topic(gbroker.bootstrap, topic_name, 1)
    c = ck_member(gbroker.bootstrap, group, **{"session.timeout.ms": 500})
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + TIMEOUT
        seen = None
        while time.monotonic() < deadline and seen is None:
            msg = c.poll(0.2)
            if msg is not None and msg.error():
                seen = msg.error()
        assert seen is not None and seen.code() == KafkaError.INVALID_SESSION_TIMEOUT
    finally:
        c.close()


def test_committed_offsets_and_metadata_survive_kill9(broker_kind, tmp_path, topic_name, group):
    proc = start_group_broker(tmp_path, broker_kind)
    try:
        create_topic(proc.bootstrap, topic_name, 3)
        produce_spread(proc.bootstrap, topic_name, values("a", 30), 3)
        c = ck_member(proc.bootstrap, group)
        c.subscribe([topic_name])
        m = Members()
        m.add("c", c, [topic_name])
        m.poll_until(lambda: len(m.records["c"]) >= 30, desc="all records")
        commits = [
            TopicPartition(topic_name, p, 5 + p, metadata=f"meta-{p} ünïcode") for p in range(3)
        ]
        c.commit(offsets=commits, asynchronous=False)
        m.close()
        proc.kill9()
        proc.start()
        c2 = ck_member(proc.bootstrap, group)
        try:
            got = c2.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=TIMEOUT)
        finally:
            c2.close()
        assert [(t.partition, t.offset, t.metadata) for t in got] == [
            (p, 5 + p, f"meta-{p} ünïcode") for p in range(3)
        ]
        # the group itself came back (Empty, with its offsets)
        a = ck_admin(proc.bootstrap)
        [res] = a.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT
        ).values()
        assert sorted((t.partition, t.offset) for t in res.result().topic_partitions) == [
            (0, 5),
            (1, 6),
            (2, 7),
        ]
    finally:
        proc.close()


def test_describe_list_and_delete_groups_with_admin_client(gbroker, topic_name, group):
    create_topic(gbroker.bootstrap, topic_name, 2)
    a = ck_admin(gbroker.bootstrap)
    m = Members()
    try:
        m.add(
            "c1", ck_member(gbroker.bootstrap, group, **{"client.id": "client-one"}), [topic_name]
        )
        m.poll_until(lambda: len(m.assignment("c1")) == 2, desc="assignment")
        m.consumers["c1"].commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        listed = a.list_consumer_groups(
            states={ConsumerGroupState.STABLE}, request_timeout=TIMEOUT
        ).result()
        assert group in {g.group_id for g in listed.valid}
        empty = a.list_consumer_groups(
            states={ConsumerGroupState.EMPTY}, request_timeout=TIMEOUT
        ).result()
        assert group not in {g.group_id for g in empty.valid}
        [desc] = a.describe_consumer_groups([group], request_timeout=TIMEOUT).values()
        d = desc.result()
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range"
        [member] = d.members
        assert member.client_id == "client-one"
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
        [fut] = a.delete_consumer_groups([group], request_timeout=TIMEOUT).values()
        with pytest.raises(Exception) as e:
            fut.result()
        assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        m.close()
        wait_until(
            lambda: (
                a.describe_consumer_groups([group])[group].result().state
                == ConsumerGroupState.EMPTY
            ),
            desc="group empty",
        )
        [fut] = a.delete_consumer_groups([group], request_timeout=TIMEOUT).values()
        fut.result()
        listed = a.list_consumer_groups(request_timeout=TIMEOUT).result()
        assert group not in {g.group_id for g in listed.valid}
        [fut] = a.delete_consumer_groups([group], request_timeout=TIMEOUT).values()
        with pytest.raises(Exception) as e:
            fut.result()
        assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        m.close()


def test_offset_delete_with_kafka_python_admin(gbroker, topic_name, group):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    create_topic(gbroker.bootstrap, topic_name, 2)
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)

    def committed() -> dict[int, tuple[int, str]]:
        got = admin.list_group_offsets({group: None})[group]
        return {tp.partition: (om.offset, om.metadata) for tp, om in got.items()}

    try:
        result = admin.alter_group_offsets(
            group,
            {
                KTP(topic_name, 0): OffsetAndMetadata(3, "m", -1),
                KTP(topic_name, 1): OffsetAndMetadata(4, "", -1),
            },
        )
        assert {tp.partition: err.errno for tp, err in result.items()} == {0: 0, 1: 0}
        assert committed() == {0: (3, "m"), 1: (4, "")}
        result = admin.delete_group_offsets(group, [KTP(topic_name, 0)])
        assert {tp.partition: err.errno for tp, err in result.items()} == {0: 0}
        assert committed() == {1: (4, "")}
        # a consumer subscribed to the topic keeps its offsets from being deleted
        m = Members()
        try:
            m.add("c", ck_member(gbroker.bootstrap, group), [topic_name])
            m.poll_until(lambda: len(m.assignment("c")) == 2, desc="assignment")
            result = admin.delete_group_offsets(group, [KTP(topic_name, 1)])
            assert {tp.partition: err.errno for tp, err in result.items()} == {1: 86}
        finally:
            m.close()
    finally:
        admin.close()


def test_kafka_python_group_consumer_commits(gbroker, topic_name, group):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    create_topic(gbroker.bootstrap, topic_name, 3)
    vals = values("kp", 30)
    produce_spread(gbroker.bootstrap, topic_name, vals, 3)
    c = KafkaConsumer(
        topic_name,
        bootstrap_servers=gbroker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        consumer_timeout_ms=500,
    )
    try:
        got: set[bytes] = set()
        deadline = time.monotonic() + TIMEOUT
        while got != set(vals) and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got |= {m.value for m in msgs}
        assert got == set(vals)
        c.commit()
        assert {p: c.committed(KTP(topic_name, p)) for p in range(3)} == {0: 10, 1: 10, 2: 10}
    finally:
        c.close()
    c2 = KafkaConsumer(
        topic_name,
        bootstrap_servers=gbroker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    try:
        assert list(c2) == []  # resumes from the committed offsets: nothing new
    finally:
        c2.close()


def test_aiokafka_two_members_share_and_commit(gbroker, topic_name, group):
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    create_topic(gbroker.bootstrap, topic_name, 4)
    vals = values("aio", 40)
    produce_spread(gbroker.bootstrap, topic_name, vals, 4)

    async def run() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic_name,
                bootstrap_servers=gbroker.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        try:
            got: set[bytes] = set()
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                for c in consumers:
                    batch = await c.getmany(timeout_ms=200)
                    got |= {m.value for ms in batch.values() for m in ms}
                parts = [c.assignment() for c in consumers]
                if got == set(vals) and all(len(p) == 2 for p in parts):
                    break
            assert got == set(vals)
            parts = [{tp.partition for tp in c.assignment()} for c in consumers]
            assert sorted(len(p) for p in parts) == [2, 2] and not (parts[0] & parts[1])
            for c in consumers:
                await c.commit()
            committed = {p: await consumers[0].committed(ATP(topic_name, p)) for p in range(4)}
            assert committed == {p: 10 for p in range(4)}
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(asyncio.wait_for(run(), TIMEOUT * 2))


def test_stable_group_survives_a_broker_restart_without_rebalance(
    broker_kind, tmp_path, topic_name, group
):
    proc = start_group_broker(tmp_path, broker_kind)
    m = Members()
    try:
        create_topic(proc.bootstrap, topic_name, 4)
        for name in ("c1", "c2"):
            # a restart on a loaded machine (stop, start, load the group) can take
            # longer than the helpers' 6 s session: this test is about the restart
            # itself not causing a rebalance, so the session outlasts it
            m.add(name, ck_member(proc.bootstrap, group, **{"session.timeout.ms": 30000}),
                  [topic_name])
        m.poll_until(lambda: m.balanced(4), desc="2-way split")
        before, calls = m.assignments(), dict(m.assign_calls)
        proc.restart()  # the group metadata record brings members and generation back
        vals = values("after", 20)
        produce_spread(proc.bootstrap, topic_name, vals, 4)
        m.poll_until(lambda: set(vals) <= m.values(), timeout=30, desc="records after restart")
        assert m.assignments() == before
        assert m.assign_calls == calls, "the restart caused a rebalance"
        a = ck_admin(proc.bootstrap)
        d = a.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result()
        assert d.state == ConsumerGroupState.STABLE and len(d.members) == 2
    finally:
        m.close()
        proc.close()
