"""Share groups over transactional topics (KIP-932's `share.isolation.level`), with
librdkafka's ShareConsumer: a read_committed group stops at the last stable
offset and never gets an aborted transaction's records; a read_uncommitted group
(the default) gets every data record. Transaction markers reach neither."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import ck_admin, ck_producer, create_topic
from tests.integration.test_groups_helpers import start_group_broker

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_group_broker(tmp_path_factory.mktemp("share-iso"), "odradek", **{
        "group.share.heartbeat.interval.ms": 500})
    try:
        yield b
    finally:
        b.stop()


def _set_group(bootstrap: str, group: str, **configs: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin = ck_admin(bootstrap)
    admin.incremental_alter_configs([res])[res].result(15)


def _group(bootstrap: str, isolation: str | None) -> str:
    group = f"sgi-{uuid.uuid4().hex[:8]}"
    configs = {"share.auto.offset.reset": "earliest"}
    if isolation is not None:
        configs["share.isolation.level"] = isolation
    _set_group(bootstrap, group, **configs)
    return group


def _read(c: ShareConsumer, want: set[bytes], timeout_s: float = 30.0,
          quiet_s: float = 0.0) -> list[bytes]:
    """Poll until every value of `want` arrived (and then `quiet_s` more)."""
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not want <= set(out):
        for m in c.poll(0.5):
            assert m.error() is None, m.error()
            out.append(m.value())
    end = time.monotonic() + quiet_s
    while time.monotonic() < end:
        for m in c.poll(0.3):
            assert m.error() is None, m.error()
            out.append(m.value())
    return out


def test_read_committed_share_group_skips_aborted_and_open_transactions(
        broker: BrokerProcess) -> None:
    topic = f"share-txn-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    tp = ck_producer(broker.bootstrap, **{"transactional.id": f"tx-{topic}"})
    tp.init_transactions(30)

    def txn(prefix: bytes, n: int, commit: bool) -> set[bytes]:
        tp.begin_transaction()
        values = {b"%s%d" % (prefix, i) for i in range(n)}
        for v in sorted(values):
            tp.produce(topic, value=v, partition=0)
        tp.flush(30)
        (tp.commit_transaction if commit else tp.abort_transaction)(30)
        return values

    committed = txn(b"c", 20, True)
    aborted = txn(b"a", 20, False)
    committed |= txn(b"d", 20, True)
    plain = ck_producer(broker.bootstrap)
    plain.produce(topic, value=b"plain", partition=0)
    assert plain.flush(30) == 0
    committed.add(b"plain")
    # a transaction left open: its records sit above the last stable offset
    tp.begin_transaction()
    opened = {b"o%d" % i for i in range(10)}
    for v in sorted(opened):
        tp.produce(topic, value=v, partition=0)
    tp.flush(30)

    rc = ShareConsumer({"bootstrap.servers": broker.bootstrap,
                        "group.id": _group(broker.bootstrap, "read_committed")})
    ru = ShareConsumer({"bootstrap.servers": broker.bootstrap,
                        "group.id": _group(broker.bootstrap, None)})
    try:
        rc.subscribe([topic])
        ru.subscribe([topic])
        got_ru = _read(ru, committed | aborted | opened)
        # read_uncommitted: every data record, each once; no marker
        assert sorted(got_ru) == sorted(committed | aborted | opened)
        # read_committed: the committed ones only, and nothing past the open
        # transaction (held 3 s after the last committed record arrived)
        got_rc = _read(rc, committed, quiet_s=3.0)
        assert sorted(got_rc) == sorted(committed), (
            sorted(set(got_rc) - committed), sorted(committed - set(got_rc)))
        # the open transaction commits: its records reach read_committed too
        tp.commit_transaction(30)
        got_rc2 = _read(rc, opened, quiet_s=1.0)
        assert sorted(got_rc2) == sorted(opened)
    finally:
        rc.close()
        ru.close()


def test_share_isolation_level_is_validated_and_described(broker: BrokerProcess) -> None:
    group = f"sgi-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as e:
        _set_group(broker.bootstrap, group, **{"share.isolation.level": "serializable"})
    assert e.value.args[0].code() == 40  # INVALID_CONFIG (KafkaError._INVALID_CONFIG)
    res = ConfigResource(ResourceType.GROUP, group)
    admin = ck_admin(broker.bootstrap)  # held until the answers: a dropped client cancels them
    described = admin.describe_configs([res])[res].result(15)
    entry = described["share.isolation.level"]
    assert entry.value == "read_uncommitted"
    _set_group(broker.bootstrap, group, **{"share.isolation.level": "read_committed"})
    described = admin.describe_configs([res])[res].result(15)
    assert described["share.isolation.level"].value == "read_committed"

