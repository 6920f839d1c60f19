"""Share groups (KIP-932) with librdkafka 2.16's ShareConsumer, and the protocol's
edge cases over the wire: docs/share_groups.md."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer, TopicCollection
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.coordinator.share_coordinator import kafka_uuid
from odradek.protocol import api
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Wire, ck_admin, ck_producer, create_topic
from tests.integration.test_groups_helpers import kio_call, start_group_broker

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

K = api.ApiKey
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND = 25, 110, 69
INVALID_REQUEST, INVALID_RECORD_STATE = 42, 121
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 122, 123


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_group_broker(tmp_path_factory.mktemp("share"), "odradek", **{
        "group.share.heartbeat.interval.ms": 500})
    try:
        yield b
    finally:
        b.stop()


def _group_configs(bootstrap: str, group: str, **configs: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin = ck_admin(bootstrap)  # held until the answer: a dropped client cancels it
    admin.incremental_alter_configs([res])[res].result(15)


def _new_group(bootstrap: str, lock_ms: int = 30000) -> str:
    group = f"sg-{uuid.uuid4().hex[:8]}"
    _group_configs(bootstrap, group, **{"share.auto.offset.reset": "earliest",
                                        "share.record.lock.duration.ms": str(lock_ms)})
    return group


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    p = ck_producer(bootstrap)
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def _consumer(bootstrap: str, group: str, topic: str, **conf: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def _poll(c: ShareConsumer, want: int, timeout_s: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            out.append(m)
    return out


def test_two_share_consumers_read_every_record_once(broker: BrokerProcess) -> None:
    topic, n = "share-split", 3000
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap)
    seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    total = threading.Semaphore(0)
    stop = threading.Event()
    # a ShareFetch takes whole batches up to max_records: 100 is one batch below
    consumers = {name: _consumer(broker.bootstrap, group, topic, **{"max.poll.records": 100})
                 for name in seen}

    def run(name: str) -> None:
        c = consumers[name]
        while not stop.is_set():
            for m in c.poll(0.2):
                assert m.error() is None
                seen[name].append((m.offset(), m.delivery_count()))
                total.release()

    threads = [threading.Thread(target=run, args=(name,), daemon=True) for name in seen]
    for t in threads:
        t.start()
    # both members are in the group, sharing the one partition, before the records come
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = _describe(broker.bootstrap, group)
        if d.error_code.value == 0 and len(d.members) == 2 and all(
                m.assignment.topic_partitions for m in d.members):
            break
        time.sleep(0.2)
    assert [tp.partitions for m in d.members for tp in m.assignment.topic_partitions] == [
        (0,), (0,)]
    # 30 batches of 100: a ShareFetch acquires whole batches (past max_records), so
    # one batch of 3000 would go to one member
    p = ck_producer(broker.bootstrap)
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
        if i % 100 == 99:
            assert p.flush(30) == 0
    for _ in range(n):
        assert total.acquire(timeout=60)
    stop.set()
    for t in threads:
        t.join(30)
    for c in consumers.values():
        c.close()
    a = {o for o, _ in seen["a"]}
    b = {o for o, _ in seen["b"]}
    assert a | b == set(range(n))
    assert not a & b  # implicit acknowledgement: no record delivered twice
    assert len(seen["a"]) + len(seen["b"]) == n
    assert all(count == 1 for _, count in seen["a"] + seen["b"])
    assert seen["a"] and seen["b"], "both members were fetching when the records came"


def test_release_reject_and_unacknowledged_records_are_redelivered(
        broker: BrokerProcess) -> None:
    topic = "share-acks"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap)
    _produce(broker.bootstrap, topic, 40)
    explicit = {"share.acknowledgement.mode": "explicit"}
    c1 = _consumer(broker.bootstrap, group, topic, **explicit)
    got = _poll(c1, 40)
    assert sorted(m.offset() for m in got) == list(range(40))
    kinds = {}
    for m in got:
        o = m.offset()
        kinds[o] = (AcknowledgeType.ACCEPT if o < 20 else AcknowledgeType.RELEASE if o < 30
                    else AcknowledgeType.REJECT)
        c1.acknowledge(m, kinds[o])
    results = c1.commit_sync(30)
    assert results and all(err is None for err in results.values()), results
    c1.close()

    # only the released records come back, delivered a second time
    c2 = _consumer(broker.bootstrap, group, topic, **explicit)
    again = _poll(c2, 10)
    assert sorted((m.offset(), m.delivery_count()) for m in again) == [
        (o, 2) for o in range(20, 30)]
    # c2 closes without acknowledging them: its session ends, they are released
    c2.close()
    c3 = _consumer(broker.bootstrap, group, topic, **explicit)
    third = _poll(c3, 10)
    assert sorted((m.offset(), m.delivery_count()) for m in third) == [
        (o, 3) for o in range(20, 30)]
    for m in third:
        c3.acknowledge(m, AcknowledgeType.ACCEPT)
    assert all(err is None for err in c3.commit_sync(30).values())
    assert not [m for m in c3.poll(2.0) if m.error() is None]
    c3.close()


def test_lock_expiry_redelivers_to_another_member(broker: BrokerProcess) -> None:
    topic = "share-locks"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap, lock_ms=2000)
    _produce(broker.bootstrap, topic, 5)
    holder = _consumer(broker.bootstrap, group, topic,
                       **{"share.acknowledgement.mode": "explicit"})
    held = _poll(holder, 5)
    assert sorted(m.offset() for m in held) == list(range(5))
    started = time.monotonic()
    # holder stops polling and never acknowledges: the locks run out after 2 s
    other = _consumer(broker.bootstrap, group, topic)
    redelivered = _poll(other, 5)
    waited = time.monotonic() - started
    assert sorted((m.offset(), m.delivery_count()) for m in redelivered) == [
        (o, 2) for o in range(5)]
    assert waited >= 1.5, waited
    other.close()
    holder.close()


def test_acknowledged_records_are_not_redelivered_after_kill9(tmp_path: Path) -> None:
    b = start_group_broker(tmp_path, "odradek")
    try:
        topic = "share-durable"
        create_topic(b.bootstrap, topic, 2)
        group = _new_group(b.bootstrap)
        _produce(b.bootstrap, topic, 100, partitions=2)
        c = _consumer(b.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
        got = _poll(c, 100)
        assert len(got) == 100
        accepted = {(m.partition(), m.offset()) for m in got if m.offset() < 30}
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 30
                          else AcknowledgeType.RELEASE)
        assert all(err is None for err in c.commit_sync(30).values())
        # closed first: a live member would rejoin after the restart and, assigned
        # one of the two partitions, hold it without polling (explicit mode)
        c.close()
        b.kill9()
        b.start()
        c2 = _consumer(b.bootstrap, group, topic)
        after = _poll(c2, 40, timeout_s=60)
        c2.close()
        assert sorted((m.partition(), m.offset(), m.delivery_count()) for m in after) == \
            sorted((p, o, 2) for p in (0, 1) for o in range(30, 50))
        assert not accepted & {(m.partition(), m.offset()) for m in after}
    finally:
        b.stop()


# -- the protocol's edge cases ---------------------------------------------------------------


def _hb(bootstrap: str, group: str, member: str, epoch: int,
        topics: list[str] | None) -> Any:
    deadline = time.monotonic() + 30
    while True:  # the offsets topic is created and loaded on first use
        with Wire(bootstrap) as w:
            r = kio_call(w, K.SHARE_GROUP_HEARTBEAT, 1, {
                "group_id": group, "member_id": member, "member_epoch": epoch,
                "rack_id": None, "subscribed_topic_names": topics})
        if r.error_code.value not in (14, 15) or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def _describe(bootstrap: str, group: str) -> Any:
    with Wire(bootstrap) as w:
        return kio_call(w, K.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]


def _share_fetch(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                 acks: list[dict[str, Any]] | None = None, max_wait_ms: int = 0) -> Any:
    return kio_call(w, K.SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
        "batch_size": 100, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": acks or []}]}],
        "forgotten_topics_data": []})


def test_heartbeat_and_describe_errors(broker: BrokerProcess) -> None:
    topic = "share-hb"
    create_topic(broker.bootstrap, topic, 3)
    group = f"sg-{uuid.uuid4().hex[:8]}"
    member = uuid.uuid4().hex
    joined = _hb(broker.bootstrap, group, member, 0, [topic])
    assert joined.error_code.value == 0 and joined.member_epoch > 0
    assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1, 2]
    epoch = joined.member_epoch
    assert _hb(broker.bootstrap, group, member, epoch, None).error_code.value == 0
    assert _hb(broker.bootstrap, group, member, epoch + 1, None).error_code.value \
        == FENCED_MEMBER_EPOCH
    assert _hb(broker.bootstrap, group, uuid.uuid4().hex, 1, None).error_code.value \
        == UNKNOWN_MEMBER_ID
    assert _hb(broker.bootstrap, group, "", 0, [topic]).error_code.value == INVALID_REQUEST
    assert _hb(broker.bootstrap, group, uuid.uuid4().hex, 0, None).error_code.value \
        == INVALID_REQUEST  # the first heartbeat must subscribe
    # a second member: the three partitions are spread, epochs move on
    other = uuid.uuid4().hex
    second = _hb(broker.bootstrap, group, other, 0, [topic])
    assert second.member_epoch > epoch
    mine = _hb(broker.bootstrap, group, member, epoch, None)
    assert mine.member_epoch == second.member_epoch
    spread = sorted(mine.assignment.topic_partitions[0].partitions
                    + second.assignment.topic_partitions[0].partitions)
    assert spread == [0, 1, 2]
    d = _describe(broker.bootstrap, group)
    assert (d.error_code.value, d.group_state, len(d.members)) == (0, "Stable", 2)
    assert _describe(broker.bootstrap, "no-such-share-group").error_code.value \
        == GROUP_ID_NOT_FOUND
    # the id is taken: a KIP-848 consumer group of that name is refused
    with Wire(broker.bootstrap) as w:
        consumer = kio_call(w, K.CONSUMER_GROUP_HEARTBEAT, 0, {
            "group_id": group, "member_id": "", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": [topic],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert consumer.error_code.value == GROUP_ID_NOT_FOUND
    # ListGroups with the "share" type filter
    with Wire(broker.bootstrap) as w:
        listed = kio_call(w, K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    assert group in {g.group_id for g in listed.groups}
    assert {g.group_type for g in listed.groups} == {"share"}
    assert _hb(broker.bootstrap, group, member, -1, None).member_epoch == -1
    assert _hb(broker.bootstrap, group, other, -1, None).member_epoch == -1
    assert _describe(broker.bootstrap, group).group_state == "Empty"


def test_share_fetch_session_and_acknowledgement_errors(broker: BrokerProcess) -> None:
    topic = "share-wire"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap)
    _produce(broker.bootstrap, topic, 10)
    with Wire(broker.bootstrap) as w:
        md = kio_call(w, K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    topic_id = md.topics[0].topic_id
    member = uuid.uuid4().hex
    with Wire(broker.bootstrap) as w:
        assert _share_fetch(w, group, member, 1, topic_id).error_code.value \
            == SHARE_SESSION_NOT_FOUND
        acks = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
        assert _share_fetch(w, group, member, 0, topic_id, acks).error_code.value \
            == INVALID_REQUEST  # acknowledgements on the initial epoch
        r = _share_fetch(w, group, member, 0, topic_id, max_wait_ms=5000)
        part = r.responses[0].partitions[0]
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired_records] == [(0, 9, 1)]
        assert r.acquisition_lock_timeout.total_seconds() == 30
        assert _share_fetch(w, group, member, 5, topic_id).error_code.value \
            == INVALID_SHARE_SESSION_EPOCH
        bad = {
            "last before first": [{"first_offset": 3, "last_offset": 2,
                                   "acknowledge_types": [1]}],
            "types count": [{"first_offset": 0, "last_offset": 2,
                             "acknowledge_types": [1, 1]}],
            "unknown type": [{"first_offset": 0, "last_offset": 0,
                              "acknowledge_types": [7]}],
            "overlapping": [{"first_offset": 0, "last_offset": 3, "acknowledge_types": [1]},
                            {"first_offset": 2, "last_offset": 4, "acknowledge_types": [1]}],
        }
        epoch = 1
        for name, batches in bad.items():
            r = _share_fetch(w, group, member, epoch, topic_id, batches)
            epoch += 1
            assert r.error_code.value == 0, name
            assert r.responses[0].partitions[0].acknowledge_error_code == INVALID_REQUEST, name
        # not acquired (beyond the log end) / acquired by someone else
        r = _share_fetch(w, group, member, epoch, topic_id, [
            {"first_offset": 50, "last_offset": 50, "acknowledge_types": [1]}])
        epoch += 1
        assert r.responses[0].partitions[0].acknowledge_error_code == INVALID_RECORD_STATE
        with Wire(broker.bootstrap) as w2:
            other = uuid.uuid4().hex
            _share_fetch(w2, group, other, 0, topic_id)
            r = kio_call(w2, K.SHARE_ACKNOWLEDGE, 1, {
                "group_id": group, "member_id": other, "share_session_epoch": 1,
                "topics": [{"topic_id": topic_id, "partitions": [{
                    "partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]})
            assert r.responses[0].partitions[0].error_code == INVALID_RECORD_STATE
            r = kio_call(w2, K.SHARE_ACKNOWLEDGE, 1, {
                "group_id": group, "member_id": other, "share_session_epoch": 0,
                "topics": []})
            assert r.error_code.value == INVALID_SHARE_SESSION_EPOCH
        # accept 0-4, release 5-9, closing the session
        r = kio_call(w, K.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": member, "share_session_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 9,
                     "acknowledge_types": [1] * 5 + [2] * 5}]}]}]})
        assert r.error_code.value == 0
        assert r.responses[0].partitions[0].error_code == 0
        r = _share_fetch(w, group, member, 0, topic_id, max_wait_ms=5000)
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in r.responses[0].partitions[0].acquired_records] == [(5, 9, 2)]


def test_describe_alter_delete_share_group_offsets(broker: BrokerProcess) -> None:
    topic = "share-offsets"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap)
    _produce(broker.bootstrap, topic, 20)
    c = _consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    got = _poll(c, 20)
    for m in got:
        c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 12 else AcknowledgeType.RELEASE)
    assert all(err is None for err in c.commit_sync(30).values())

    def describe(topics: list[dict[str, Any]] | None) -> Any:
        with Wire(broker.bootstrap) as w:
            return kio_call(w, K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {
                "groups": [{"group_id": group, "topics": topics}]}).groups[0]

    d = describe(None)  # every topic the group has state for
    part = d.topics[0].partitions[0]
    assert (d.error_code.value, d.topics[0].topic_name) == (0, topic)
    assert (part.start_offset, part.lag) == (12, 8)
    with Wire(broker.bootstrap) as w:
        busy = kio_call(w, K.ALTER_SHARE_GROUP_OFFSETS, 0, {
            "group_id": group, "topics": [{"topic_name": topic, "partitions": [
                {"partition_index": 0, "start_offset": 5}]}]})
    assert busy.error_code.value == 68  # NON_EMPTY_GROUP: a member is still in it
    c.close()
    with Wire(broker.bootstrap) as w:
        altered = kio_call(w, K.ALTER_SHARE_GROUP_OFFSETS, 0, {
            "group_id": group, "topics": [{"topic_name": topic, "partitions": [
                {"partition_index": 0, "start_offset": 5}]}]})
    assert altered.error_code.value == 0
    assert altered.responses[0].partitions[0].error_code.value == 0
    part = describe([{"topic_name": topic, "partitions": [0]}]).topics[0].partitions[0]
    assert (part.start_offset, part.lag) == (5, 15)
    # a new member starts at the altered offset, first deliveries again
    c2 = _consumer(broker.bootstrap, group, topic)
    again = _poll(c2, 15)
    assert sorted((m.offset(), m.delivery_count()) for m in again) == [
        (o, 1) for o in range(5, 20)]
    c2.close()
    with Wire(broker.bootstrap) as w:
        deleted = kio_call(w, K.DELETE_SHARE_GROUP_OFFSETS, 0, {
            "group_id": group, "topics": [{"topic_name": topic}]})
    assert (deleted.error_code.value, deleted.responses[0].error_code.value) == (0, 0)
    assert describe(None).topics == ()


def test_share_coordinator_state_apis_over_the_wire(broker: BrokerProcess) -> None:
    """Initialize/Read/Write/Delete/ReadShareGroupStateSummary (83-87) as a
    share-partition leader on another broker sends them: one broker coordinates
    every key of __share_group_state."""
    group, topic_id = f"sg-{uuid.uuid4().hex[:8]}", uuid.uuid4()

    def call(key: int, version: int, **partition: Any) -> Any:
        with Wire(broker.bootstrap) as w:
            deadline = time.monotonic() + 30
            while True:  # the topic is made by the first call, then loaded
                resp = kio_call(w, key, version, {"group_id": group, "topics": [
                    {"topic_id": topic_id, "partitions": [{"partition": 0, **partition}]}]})
                p = resp.results[0].partitions[0]
                if p.error_code.value not in (14, 15, 16) or time.monotonic() > deadline:
                    return p
                time.sleep(0.2)

    assert call(K.INITIALIZE_SHARE_GROUP_STATE, 0, state_epoch=0,
                start_offset=10).error_code.value == 0
    assert call(K.WRITE_SHARE_GROUP_STATE, 0, state_epoch=0, leader_epoch=3, start_offset=12,
                state_batches=[{"first_offset": 12, "last_offset": 14, "delivery_state": 2,
                                "delivery_count": 1},
                               {"first_offset": 15, "last_offset": 15, "delivery_state": 0,
                                "delivery_count": 2}]).error_code.value == 0
    read = call(K.READ_SHARE_GROUP_STATE, 0, leader_epoch=3)
    assert (read.error_code.value, read.state_epoch, read.start_offset) == (0, 0, 12)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in read.state_batches] == [(12, 14, 2, 1), (15, 15, 0, 2)]
    summary = call(K.READ_SHARE_GROUP_STATE_SUMMARY, 1, leader_epoch=3)
    assert (summary.error_code.value, summary.start_offset, summary.leader_epoch,
            summary.delivery_complete_count) == (0, 12, 3, 3)
    # a leader under an older epoch is fenced (FENCED_LEADER_EPOCH)
    assert call(K.READ_SHARE_GROUP_STATE, 0, leader_epoch=2).error_code.value == 74
    assert call(K.DELETE_SHARE_GROUP_STATE, 0).error_code.value == 0
    assert call(K.READ_SHARE_GROUP_STATE, 0, leader_epoch=3).start_offset == -1
    # FindCoordinator key type SHARE (2) names the share coordinator of a key
    share_key = f"{group}:{kafka_uuid(topic_id)}:0"
    with Wire(broker.bootstrap) as w:
        found = kio_call(w, K.FIND_COORDINATOR, 6, {
            "key": "", "key_type": 2, "coordinator_keys": [share_key, "no-colons"]})
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    assert [(c.key, c.error_code.value, c.port) for c in found.coordinators] == [
        (share_key, 0, port), ("no-colons", 42, -1)]


def test_a_deleted_topic_takes_its_share_state(broker: BrokerProcess) -> None:
    topic = "share-deleted"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap)
    _produce(broker.bootstrap, topic, 5)
    c = _consumer(broker.bootstrap, group, topic)
    assert len(_poll(c, 5)) == 5
    assert len(c.poll(1.0)) == 0  # implicit mode: this poll's ShareFetch accepts the five
    c.close()
    admin = ck_admin(broker.bootstrap)
    topic_id = admin.describe_topics(TopicCollection([topic]))[topic].result(15).topic_id
    key = uuid.UUID(bytes=base64.urlsafe_b64decode(str(topic_id) + "=="))

    def stored() -> tuple[int, int]:
        with Wire(broker.bootstrap) as w:
            p = kio_call(w, K.READ_SHARE_GROUP_STATE, 0, {
                "group_id": group, "topics": [{"topic_id": key, "partitions": [
                    {"partition": 0, "leader_epoch": -1}]}]}).results[0].partitions[0]
        return p.error_code.value, p.start_offset

    assert stored() == (0, 5)
    admin.delete_topics([topic])[topic].result(15)
    deadline = time.monotonic() + 20
    while stored() != (0, -1):  # the coordinator deletes it when the image loses the topic
        assert time.monotonic() < deadline, "the share state outlived its topic"
        time.sleep(0.2)


def test_cli_lists_and_describes_a_share_group(broker: BrokerProcess) -> None:
    from tests.integration.test_groups_cli import odradek, rows

    topic = "share-cli"
    create_topic(broker.bootstrap, topic, 2)
    group = _new_group(broker.bootstrap)
    _produce(broker.bootstrap, topic, 10, partitions=2)
    c = _consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    got = _poll(c, 10)
    for m in got:
        c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 3 else AcknowledgeType.RELEASE)
    assert all(err is None for err in c.commit_sync(30).values())
    try:
        listed = odradek(broker.bootstrap, "list")
        assert listed.returncode == 0, listed.stderr
        assert [group, "Stable"] in [r[:2] for r in rows(listed.stdout)]
        offsets = odradek(broker.bootstrap, "describe-share", group)
        assert offsets.returncode == 0, offsets.stderr
        assert rows(offsets.stdout) == [[group, topic, "0", "3", "2"],
                                        [group, topic, "1", "3", "2"]]
        members = odradek(broker.bootstrap, "describe-share", group, "--members")
        assert members.returncode == 0, members.stderr
        (row,) = rows(members.stdout)
        assert row[-2:] == ["2", f"{topic}(0,1)"]
        state = odradek(broker.bootstrap, "describe-share", group, "--state")
        assert rows(state.stdout)[0][-2:] == ["Stable", "1"]
    finally:
        c.close()
    missing = odradek(broker.bootstrap, "describe-share", "no-such-share-group")
    assert missing.returncode == 1 and "does not exist" in missing.stderr


_HOLDER = """
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
got = 0
while got < int(sys.argv[4]):
    got += sum(1 for m in c.poll(0.5) if m.error() is None)
print("held", got, flush=True)
sys.stdin.read()  # holds its records, unacknowledged, until killed
"""


@pytest.mark.parametrize("lock_ms", [3000, 120_000])
def test_records_of_a_killed_consumer_are_redelivered(broker: BrokerProcess,
                                                      lock_ms: int) -> None:
    """Released when the killed consumer's connection closes (its share session
    ends with it, as in Kafka): with a 120 s lock, and a 45 s member session,
    the records come back to another consumer within the 30 s poll."""
    import subprocess
    import sys

    topic = f"share-killed-{lock_ms}"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap, lock_ms=lock_ms)
    _produce(broker.bootstrap, topic, 8)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, broker.bootstrap, group, topic, "8"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held 8"
        holder.kill()  # SIGKILL: no acknowledgement, no share session close, no leave
        holder.wait(10)
        other = _consumer(broker.bootstrap, group, topic)
        again = _poll(other, 8)
        other.close()
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [
            (o, 2) for o in range(8)]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_share_group_over_three_brokers(tmp_path: Path) -> None:
    """Partitions led by three brokers, the group coordinated by one of them: each
    ShareFetch goes to a partition's leader, which keeps that partition's state
    with its share coordinator."""
    from tests.integration.cluster_proc import ClusterProcesses

    cluster = ClusterProcesses(tmp_path, brokers=3).start()
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, "share-cluster", 3)
        assert len({p.leader for p in cluster.partitions("share-cluster").values()}) == 3
        group = _new_group(bootstrap)
        _produce(bootstrap, "share-cluster", 300, partitions=3)
        got: list[tuple[int, int]] = []
        members = [_consumer(bootstrap, group, "share-cluster") for _ in range(2)]
        deadline = time.monotonic() + 60

        def run(c: ShareConsumer) -> None:
            # both poll until all are read (well within the 30 s locks)
            while len(got) < 300 and time.monotonic() < deadline:
                got.extend((m.partition(), m.offset()) for m in c.poll(0.5)
                           if m.error() is None)

        threads = [threading.Thread(target=run, args=(c,)) for c in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        for c in members:
            c.close()
        assert sorted(got) == sorted((p, o) for p in range(3) for o in range(100))
        # the group coordinator describes every partition's start offset, those
        # led elsewhere from the share coordinator (ReadShareGroupStateSummary)
        described = []
        for b in cluster.brokers.values():
            with Wire(b.bootstrap) as w:
                g = kio_call(w, K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{
                    "group_id": group, "topics": [{"topic_name": "share-cluster",
                                                   "partitions": [0, 1, 2]}]}]}).groups[0]
            if g.error_code.value == 0:
                # >= 0: the state exists (librdkafka's close may release, not
                # acknowledge, its last records: the start offset is where they are)
                described.append({p.partition_index: (p.error_code.value, p.start_offset >= 0)
                                  for p in g.topics[0].partitions})
        assert described == [{0: (0, True), 1: (0, True), 2: (0, True)}], described
        # the state is in __share_group_state (the share coordinator), no file
        assert cluster.partitions("__share_group_state")
        assert not list(tmp_path.glob("broker-*/*/share_group_state/*.json"))
        assert not list(tmp_path.glob("broker-*/share_group_state/*.json"))
    finally:
        cluster.close()


def _share_fetch_v2(w: Wire, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                    max_records: int, mode: int = 0, renew: bool = False,
                    acks: list[dict[str, Any]] | None = None) -> Any:
    return kio_call(w, K.SHARE_FETCH, 2, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": 0, "min_bytes": 0 if renew else 1, "max_bytes": 0 if renew else 1 << 20,
        "max_records": max_records, "batch_size": max_records, "share_acquire_mode": mode,
        "is_renew_ack": renew, "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": acks or []}]}],
        "forgotten_topics_data": []})


def _runs(r: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def test_share_fetch_v2_record_limit_and_renew(broker: BrokerProcess) -> None:
    """KIP-1206 record_limit takes exactly max_records; KIP-1222 RENEW keeps the
    records locked past the original 2 s lock; v1 still acquires whole batches."""
    topic = "share-v2"
    create_topic(broker.bootstrap, topic, 1)
    group = _new_group(broker.bootstrap, lock_ms=2000)
    _produce(broker.bootstrap, topic, 10)  # one batch
    with Wire(broker.bootstrap) as w:
        md = kio_call(w, K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
    topic_id = md.topics[0].topic_id
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    with Wire(broker.bootstrap) as wa, Wire(broker.bootstrap) as wb:
        deadline = time.monotonic() + 30
        while True:  # the share partition's state is initialized on first use
            r = _share_fetch_v2(wa, group, a, 0, topic_id, 3, mode=1)
            if _runs(r) or time.monotonic() > deadline:
                break
            _share_fetch_v2(wa, group, a, -1, topic_id, 3, mode=1)
        fetched_at = time.monotonic()
        assert _runs(r) == [(0, 2, 1)]  # exactly max_records, the batch split
        assert r.acquisition_lock_timeout.total_seconds() == 2
        # a renewing ShareFetch acquires nothing, even when its limits ask for records
        assert _share_fetch_v2(wa, group, a, 1, topic_id, 0, renew=True).error_code.value == 0
        asked = _share_fetch_v2(wa, group, a, 2, topic_id, 5, renew=True)
        assert asked.error_code.value == 0 and _runs(asked) == []
        renew = [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [4]}]
        # RENEW in ShareAcknowledge v1: INVALID_REQUEST, nothing renewed
        v1 = kio_call(wa, K.SHARE_ACKNOWLEDGE, 1, {
            "group_id": group, "member_id": a, "share_session_epoch": 3, "topics": [
                {"topic_id": topic_id, "partitions": [
                    {"partition_index": 0, "acknowledgement_batches": renew}]}]})
        assert v1.responses[0].partitions[0].error_code.value == INVALID_REQUEST
        # member b (v1, batch_optimized) takes the rest of the batch, not 0..2
        assert _runs(_share_fetch(wb, group, b, 0, topic_id)) == [(3, 9, 1)]
        time.sleep(max(0.0, fetched_at + 1.2 - time.monotonic()))  # renew at ~1.2 s
        renewed_at = time.monotonic()
        r = _share_fetch_v2(wa, group, a, 4, topic_id, 0, renew=True, acks=renew)
        assert r.error_code.value == 0 and _runs(r) == []  # the acknowledgements only
        assert r.responses[0].partitions[0].acknowledge_error_code == 0
        epoch, got_at = 1, None
        while time.monotonic() < renewed_at + 15:
            accept = [{"first_offset": 3, "last_offset": 9, "acknowledge_types": [1]}]
            runs = _runs(_share_fetch(wb, group, b, epoch, topic_id,
                                      accept if epoch == 1 else None, max_wait_ms=100))
            epoch += 1
            if runs:
                got_at = time.monotonic()
                assert runs == [(0, 2, 2)]  # redelivered once the renewed lock ran out
                break
        assert got_at is not None
        assert got_at >= renewed_at + 2.0 > fetched_at + 2.0  # past the original lock too
        # ShareAcknowledge v2 carries the lock duration; renewing b's records works there
        ack = kio_call(wb, K.SHARE_ACKNOWLEDGE, 2, {
            "group_id": group, "member_id": b, "share_session_epoch": epoch,
            "is_renew_ack": True, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": renew}]}]})
        assert ack.error_code.value == 0 and ack.responses[0].partitions[0].error_code.value == 0
        assert ack.acquisition_lock_timeout.total_seconds() == 2
