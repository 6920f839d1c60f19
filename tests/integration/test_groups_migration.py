"""KIP-848 online migration with librdkafka: a classic group upgraded to a
consumer group when a `group.protocol=consumer` member joins, classic and
consumer-protocol members sharing it, and the downgrade back to classic when
the last consumer-protocol member leaves (`group.consumer.migration.policy`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.protocol import api
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Out, Wire, ck_admin, ck_common, ck_produce, create_topic
from tests.integration.test_groups_helpers import (
    Members,
    ck_member,
    kio_call,
    start_group_broker,
    values,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PARTITIONS = 4


@pytest.fixture(scope="module")
def gbroker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("migr"), broker_kind)
    try:
        yield proc
    finally:
        proc.close()


class Committing(Members):
    """Members that commit synchronously after every batch they read, so a
    partition moving to another member resumes where the last one stopped."""

    def poll_round(self, timeout_s: float = 0.05) -> None:
        for name, c in list(self.consumers.items()):
            msgs = c.consume(100, timeout=timeout_s)
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                self.records[name].append((m.partition(), m.offset(), m.value()))
            if any(not m.error() for m in msgs):
                try:
                    c.commit(asynchronous=False)
                except KafkaException:
                    pass  # a rebalance under way: the next owner reads from the last commit


def classic(bootstrap: str, group: str, strategy: str = "range") -> Consumer:
    return ck_member(bootstrap, group, **{"group.protocol": "classic",
                                          "partition.assignment.strategy": strategy})


def kip848(bootstrap: str, group: str) -> Consumer:
    return Consumer({
        **ck_common(bootstrap), "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
    })


def consumer_describe(bootstrap: str, group: str) -> Any:
    body = {"group_ids": [group], "include_authorized_operations": False}
    with Wire(bootstrap) as w:
        return kio_call(w, api.ApiKey.CONSUMER_GROUP_DESCRIBE, 1, body).groups[0]


def group_type(bootstrap: str, group: str) -> str:
    with Wire(bootstrap) as w:
        r = kio_call(w, api.ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return {g.group_id: g.group_type for g in r.groups}[group]


def classic_describe(bootstrap: str, group: str) -> Any:
    body = {"groups": [group], "include_authorized_operations": False}
    with Wire(bootstrap) as w:
        return kio_call(w, api.ApiKey.DESCRIBE_GROUPS, 5, body).groups[0]


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = ck_admin(bootstrap)
    from confluent_kafka import ConsumerGroupTopicPartitions

    fut = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])]
    )[group]
    return {tp.partition: tp.offset for tp in fut.result(timeout=30).topic_partitions}


def produce(bootstrap: str, topic: str, prefix: str, n: int = 80) -> list[bytes]:
    vs = values(prefix, n)
    ck_produce(bootstrap, topic, [Out(v, partition=i % PARTITIONS) for i, v in enumerate(vs)])
    return vs


def duplicates(m: Members) -> int:
    seen = [(p, o) for recs in m.records.values() for p, o, _ in recs]
    return len(seen) - len(set(seen))


def classic_group_that_read(
    bs: str, topic: str, m: Members, strategy: str = "range"
) -> tuple[str, list[bytes]]:
    """A new group of one classic member that read (and committed) 80 records."""
    group = f"gmig-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic, PARTITIONS)
    first = produce(bs, topic, "a")
    m.add("classic", classic(bs, group, strategy), [topic])
    m.poll_until(lambda: set(first) <= m.values(), desc="the classic member reads")
    assert group_type(bs, group) == "classic"
    return group, first


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_classic_group_upgrades_when_a_consumer_member_joins_then_stays_consumer(
    gbroker, topic_name, strategy
):
    """Eager (range) and cooperative classic members alike."""
    bs = gbroker.bootstrap
    m = Committing()
    try:
        group, first = classic_group_that_read(bs, topic_name, m, strategy)
        before = committed(bs, group, topic_name)
        assert sum(before.values()) == len(first)

        m.add("kip848", kip848(bs, group), [topic_name])
        m.poll_until(lambda: m.balanced(PARTITIONS), desc="both members own partitions")
        assert group_type(bs, group) == "consumer"
        d = consumer_describe(bs, group)
        assert d.error_code.value == 0
        assert sorted(mem.member_type for mem in d.members) == [0, 1]  # classic, consumer
        second = produce(bs, topic_name, "b")
        m.poll_until(lambda: set(second) <= m.values(), desc="both read after the upgrade")
        # nothing read twice: the offsets committed before the switch were kept
        assert not {v for _, _, v in m.records["kip848"]} & set(first)

        m.remove("classic")  # LeaveGroup of the classic member
        m.poll_until(lambda: m.assignment("kip848") == set(range(PARTITIONS)),
                     desc="the consumer member takes every partition")
        third = produce(bs, topic_name, "c")
        m.poll_until(lambda: set(third) <= m.values(), desc="records after the classic left")
        assert group_type(bs, group) == "consumer"
        d = consumer_describe(bs, group)
        assert [mem.member_type for mem in d.members] == [1]
        assert duplicates(m) <= 100, duplicates(m)  # at most one uncommitted batch re-read
        assert set(first + second + third) <= m.values()
    finally:
        m.close()
    after = committed(bs, group, topic_name)
    assert sum(after.values()) == 3 * len(first)


def test_group_downgrades_when_the_last_consumer_member_leaves(gbroker, topic_name):
    bs = gbroker.bootstrap
    m = Committing()
    try:
        group, first = classic_group_that_read(bs, topic_name, m)
        m.add("kip848", kip848(bs, group), [topic_name])
        m.poll_until(lambda: m.balanced(PARTITIONS), desc="both members own partitions")
        assert group_type(bs, group) == "consumer"

        m.remove("kip848")  # ConsumerGroupHeartbeat epoch -1: only a classic member is left
        m.poll_until(lambda: m.assignment("classic") == set(range(PARTITIONS)),
                     desc="the classic member takes every partition again")
        assert group_type(bs, group) == "classic"
        d = classic_describe(bs, group)
        assert d.protocol_type == "consumer" and len(d.members) == 1
        second = produce(bs, topic_name, "b")
        m.poll_until(lambda: set(second) <= m.values(), desc="records after the downgrade")
        assert set(first + second) <= m.values()
    finally:
        m.close()
    assert sum(committed(bs, group, topic_name).values()) == 2 * len(first)


def _join_848(bs: str, group: str, topic: str) -> tuple[int, str | None]:
    body = {
        "group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
        "subscribed_topic_names": [topic], "server_assignor": None, "topic_partitions": [],
    }
    with Wire(bs) as w:
        r = kio_call(w, api.ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
    return r.error_code.value, r.error_message


def test_policy_disabled_refuses_the_upgrade(broker_kind, tmp_path, topic_name):
    proc = start_group_broker(
        tmp_path, broker_kind, **{"group.consumer.migration.policy": "disabled"}
    )
    group = f"gmig-{uuid.uuid4().hex[:8]}"
    m = Members()
    try:
        bs = proc.bootstrap
        create_topic(bs, topic_name, PARTITIONS)
        m.add("classic", classic(bs, group), [topic_name])
        m.poll_until(lambda: m.assignment("classic") == set(range(PARTITIONS)), desc="joined")
        code, message = _join_848(bs, group, topic_name)
        assert code == 69, message  # GROUP_ID_NOT_FOUND, as Kafka answers
        assert message is not None and "disabled" in message
        assert group_type(bs, group) == "classic"
    finally:
        m.close()
        proc.close()
