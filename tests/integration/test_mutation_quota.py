"""KIP-599's controller_mutation_rate against a real broker, set with `odradek quotas`:
CreateTopics, CreatePartitions and DeleteTopics spend one credit per partition from a
token bucket (rate = the quota, burst = quota * (quota.window.num - 1) * window).

- strict versions (CreateTopics v7, DeleteTopics v6, CreatePartitions v3, sent with
  odradek's KafkaChannel): once the credits are below zero, the topics beyond are
  refused with THROTTLING_QUOTA_EXCEEDED (89) and throttle_time_ms says when the
  credits are back; after that wait the same request succeeds;
- permissive versions (confluent-kafka's AdminClient sends CreateTopics v4, from
  before KIP-599): every topic is created, the answer carries the throttle time
  (librdkafka's throttle_cb sees it);
- a client id the quota does not cover is neither refused nor throttled;
- in a cluster (a controller and a broker), the broker forwards CreateTopics to the
  controller, which counts it as the client the Envelope names, and the broker mutes
  its client for the throttle time in the controller's answer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from odradek.protocol.client import KafkaChannel
from tests.integration.broker_proc import HOST, BrokerProcess
from tests.integration.clients import ck_common
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_quotas import quotas_cli

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only, pytest.mark.timeout(180)]

WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}
RATE = 10  # partitions/s; with 2 windows of 1 s the burst is 10 partitions
THROTTLED = 89
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def call(broker: BrokerProcess, client_id: str, key: int, version: int,
         data: dict[str, Any]) -> Any:
    async def go() -> Any:
        ch = KafkaChannel(HOST, broker.port, client_id=client_id.encode())
        try:
            return await ch.request(key, version, data)
        finally:
            ch.close()
    return asyncio.run(go())


def create_v7(broker: BrokerProcess, client_id: str, topics: dict[str, int]) -> Any:
    return call(broker, client_id, CREATE_TOPICS, 7, {"timeout": 10_000, "validate_only": False,
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1,
                    "assignments": [], "configs": []} for n, p in topics.items()]})


def throttle_ms(response: Any) -> int:
    value = response.throttle_time  # kio: a timedelta
    return round(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def errors(response: Any, field: str = "topics") -> dict[str, int]:
    return {t.name: int(getattr(t.error_code, "value", t.error_code))
            for t in getattr(response, field)}


@pytest.fixture
def broker(broker_factory: Any) -> BrokerProcess:
    b = broker_factory(WINDOW)
    out = quotas_cli(b, "alter", "--client", "mutator",
                     "--add-config", f"controller_mutation_rate={RATE}")
    assert out.returncode == 0, out.stderr
    assert f"controller_mutation_rate={RATE}" in quotas_cli(b, "describe").stdout
    return b


def test_strict_versions_refuse_the_topics_beyond_the_quota(broker: BrokerProcess) -> None:
    tag = uuid.uuid4().hex[:6]
    a, b, c = f"mq-a-{tag}", f"mq-b-{tag}", f"mq-c-{tag}"
    # 10 credits: a takes 8 (2 left), b 8 (-6 left, admitted: credits were not negative)
    first = create_v7(broker, "mutator", {a: 8, b: 8, c: 1})
    assert errors(first) == {a: 0, b: 0, c: THROTTLED}
    refused = next(t for t in first.topics if t.name == c)
    assert refused.error_message == "The throttling quota has been exceeded."
    # -6 credits at 10/s: about 600 ms until they are back to zero
    assert 300 <= throttle_ms(first) <= 700, throttle_ms(first)
    # not covered by the quota: never refused nor throttled
    free = create_v7(broker, "free", {f"mq-free-{tag}": 40})
    assert (errors(free), throttle_ms(free)) == ({f"mq-free-{tag}": 0}, 0)
    time.sleep(throttle_ms(first) / 1000 + 0.1)
    again = create_v7(broker, "mutator", {c: 1})
    assert (errors(again), throttle_ms(again)) == ({c: 0}, 0)

    # CreatePartitions v3: c grows by 12 (credits about -2 after), then refused
    time.sleep(1.1)  # credits back to 10
    grow = call(broker, "mutator", CREATE_PARTITIONS, 3, {"timeout": 10_000,
        "validate_only": False, "topics": [
            {"name": c, "count": 13, "assignments": None},
            {"name": a, "count": 9, "assignments": None}]})
    assert errors(grow, "results") == {c: 0, a: THROTTLED}
    assert throttle_ms(grow) > 0

    # DeleteTopics v6: a (8) and b (8) cost 16; after a wait for 10 credits, a is
    # deleted (credits -> 2), b too (-> -6), the free topic (40) is refused
    time.sleep(1.5)
    deleted = call(broker, "mutator", DELETE_TOPICS, 6, {"timeout": 10_000, "topics": [
        {"name": n, "topic_id": uuid.UUID(int=0)} for n in (a, b, f"mq-free-{tag}")]})
    assert {r.name: int(getattr(r.error_code, "value", r.error_code))
            for r in deleted.responses} == {a: 0, b: 0, f"mq-free-{tag}": THROTTLED}
    assert throttle_ms(deleted) > 0


def test_confluent_admin_permissive_versions_get_the_throttle_time(
        broker: BrokerProcess) -> None:
    throttles: list[int] = []  # ms; librdkafka's ThrottleEvent.throttle_time is in seconds
    conf: dict[str, Any] = {**ck_common(broker.bootstrap), "client.id": "mutator",
                            "throttle_cb": lambda ev: throttles.append(
                                round(ev.throttle_time * 1000))}
    admin = AdminClient(conf)
    tag = uuid.uuid4().hex[:6]
    names = [f"mq-ck-{tag}-{i}" for i in range(3)]
    futures = admin.create_topics([NewTopic(n, 6, 1) for n in names], operation_timeout=20)
    for f in futures.values():
        f.result(timeout=30)  # 18 partitions: all created (no such error before v6)
    deadline = time.monotonic() + 10
    while max(throttles, default=0) == 0 and time.monotonic() < deadline:
        admin.poll(0.2)
    # 10 - 18 = -8 credits: about 800 ms
    assert throttles and 500 <= max(throttles) <= 900, throttles
    md = admin.list_topics(timeout=10)
    assert all(len(md.topics[n].partitions) == 6 for n in names)
    time.sleep(1.0)
    futures = admin.create_partitions([NewPartitions(names[0], 20)])
    futures[names[0]].result(timeout=30)  # 14 more: admitted, throttled
    futures = admin.delete_topics(names, operation_timeout=20)
    for f in futures.values():
        f.result(timeout=30)


def test_a_forwarded_create_topics_is_counted_by_the_controller(tmp_path: Any) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=1, overrides=dict(WINDOW))
    try:
        cluster.start()
        broker = cluster.brokers[1]
        out = quotas_cli(broker, "alter", "--client", "mutator",
                         "--add-config", f"controller_mutation_rate={RATE}")
        assert out.returncode == 0, out.stderr
        tag = uuid.uuid4().hex[:6]
        a, b, c = f"fq-a-{tag}", f"fq-b-{tag}", f"fq-c-{tag}"

        async def go() -> tuple[Any, Any, float]:
            ch = KafkaChannel(HOST, broker.port, client_id=b"mutator")
            try:
                data = {"timeout": 10_000, "validate_only": False, "topics": [
                    {"name": n, "num_partitions": p, "replication_factor": 1,
                     "assignments": [], "configs": []} for n, p in ((a, 8), (b, 8), (c, 1))]}
                first = await ch.request(CREATE_TOPICS, 7, data)
                started = time.monotonic()
                # the broker muted this connection: the next answer waits for it
                second = await ch.request(3, 12, {"topics": None,
                                                  "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
                return first, second, time.monotonic() - started
            finally:
                ch.close()

        first, _, waited = asyncio.run(go())
        assert errors(first) == {a: 0, b: 0, c: THROTTLED}
        assert 300 <= throttle_ms(first) <= 700, throttle_ms(first)
        assert waited >= throttle_ms(first) / 1000 - 0.15, (waited, throttle_ms(first))
    finally:
        cluster.close()
