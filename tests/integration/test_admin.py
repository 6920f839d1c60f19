"""Admin operations through confluent-kafka's AdminClient and kafka-python's
KafkaAdminClient: topics, partitions, configs, cluster and log dirs.

Expected values are Kafka's: error codes, config defaults and config sources.
"""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.integration.clients import (
    TIMEOUT,
    Out,
    assert_broker_serves,
    ck_admin,
    ck_consume,
    ck_produce,
    create_topic,
    wait_for_topic,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
STATIC_BROKER = ConfigSource.STATIC_BROKER_CONFIG.value


def _err(fut) -> KafkaError:
    """The KafkaError a failed admin future carries."""
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=TIMEOUT)
    return ei.value.args[0]


def _topic_configs(admin, topic: str) -> dict:
    fs = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic)], request_timeout=TIMEOUT
    )
    [f] = fs.values()
    return f.result(timeout=TIMEOUT)


def _topic_names(admin) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def _partition_count(admin, topic: str) -> int:
    t = admin.list_topics(topic, timeout=10).topics[topic]
    return len(t.partitions)


# --------------------------------------------------------------------------
# CreateTopics
# --------------------------------------------------------------------------


def test_create_topic_with_partitions_and_configs(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics(
        [
            NewTopic(
                topic_name, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}
            )
        ],
        request_timeout=TIMEOUT,
        operation_timeout=TIMEOUT,
    )
    assert fs[topic_name].result(timeout=TIMEOUT) is None
    wait_for_topic(broker.bootstrap, topic_name, 3)
    md = a.list_topics(topic_name, timeout=10)
    [node_id] = md.brokers
    t = md.topics[topic_name]
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert p.error is None
        assert p.leader == node_id
        assert list(p.replicas) == [node_id]
        assert list(p.isrs) == [node_id]
    cfg = _topic_configs(a, topic_name)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["cleanup.policy"].value == "compact"
    for name in ("retention.ms", "cleanup.policy"):
        assert cfg[name].source == DYNAMIC_TOPIC, name
        assert cfg[name].is_default is False, name


def test_create_topic_default_partition_count(broker, topic_name):
    """num_partitions=-1 and replication_factor=-1 take the broker defaults
    (num.partitions=1, default.replication.factor=1) -- KIP-464."""
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name)], request_timeout=TIMEOUT)
    fs[topic_name].result(timeout=TIMEOUT)
    wait_for_topic(broker.bootstrap, topic_name, 1)


def test_create_existing_topic_fails(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, 4, 1)], request_timeout=TIMEOUT)
    e = _err(fs[topic_name])
    assert e.code() == KafkaError.TOPIC_ALREADY_EXISTS  # 36
    assert _partition_count(a, topic_name) == 2  # untouched


def test_create_topic_invalid_partitions(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, 0, 1)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.INVALID_PARTITIONS  # 37
    assert topic_name not in _topic_names(a)


def test_create_topic_invalid_replication_factor(broker, topic_name):
    """Replication factor 3 on a one-broker cluster cannot be placed."""
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, 1, 3)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.INVALID_REPLICATION_FACTOR  # 38
    assert topic_name not in _topic_names(a)


@pytest.mark.parametrize(
    "config",
    [
        {"no.such.config": "1"},
        {"retention.ms": "not-a-number"},
        {"cleanup.policy": "shred"},
    ],
)
def test_create_topic_invalid_config(broker, topic_name, config):
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, 1, 1, config=config)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.INVALID_CONFIG  # 40
    assert topic_name not in _topic_names(a)


@pytest.mark.parametrize("name", ["bad/name", "..", "a" * 250, "sp ace"])
def test_create_topic_invalid_name(broker, name):
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(name, 1, 1)], request_timeout=TIMEOUT)
    assert _err(fs[name]).code() == KafkaError.TOPIC_EXCEPTION  # 17 INVALID_TOPIC_EXCEPTION
    assert name not in _topic_names(a)


def test_create_topic_validate_only(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True, request_timeout=TIMEOUT)
    assert fs[topic_name].result(timeout=TIMEOUT) is None
    assert topic_name not in _topic_names(a)
    # ...and validation still reports errors.
    fs = a.create_topics([NewTopic(topic_name, 0, 1)], validate_only=True, request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.INVALID_PARTITIONS


def test_create_several_topics_one_bad(broker, topic_name):
    """Each topic in a CreateTopics request succeeds or fails on its own."""
    a = ck_admin(broker.bootstrap)
    good, bad = topic_name + "-good", topic_name + "-bad"
    fs = a.create_topics([NewTopic(good, 2, 1), NewTopic(bad, 0, 1)], request_timeout=TIMEOUT)
    assert fs[good].result(timeout=TIMEOUT) is None
    assert _err(fs[bad]).code() == KafkaError.INVALID_PARTITIONS
    wait_for_topic(broker.bootstrap, good, 2)
    assert bad not in _topic_names(a)


# --------------------------------------------------------------------------
# Metadata / DescribeTopics / DescribeCluster
# --------------------------------------------------------------------------


def test_describe_topics(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 4)
    a = ck_admin(broker.bootstrap)
    md = a.list_topics(timeout=10)
    assert topic_name in md.topics
    assert len(md.topics[topic_name].partitions) == 4
    fs = a.describe_topics(TopicCollection([topic_name]), request_timeout=TIMEOUT)
    d = fs[topic_name].result(timeout=TIMEOUT)
    assert d.name == topic_name
    assert d.is_internal is False
    assert d.topic_id is not None and str(d.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"  # not zero
    assert [p.id for p in d.partitions] == [0, 1, 2, 3]
    [node_id] = md.brokers
    for p in d.partitions:
        assert p.leader.id == node_id
        assert [n.id for n in p.replicas] == [node_id]
        assert [n.id for n in p.isr] == [node_id]


def test_describe_unknown_topic(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.describe_topics(TopicCollection([topic_name]), request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # Describing must not auto-create it.
    assert topic_name not in _topic_names(a)


def test_describe_cluster(broker):
    a = ck_admin(broker.bootstrap)
    dc = a.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert isinstance(dc.cluster_id, str) and dc.cluster_id
    assert len(dc.nodes) == 1
    [node] = dc.nodes
    assert (node.host, node.port) == ("127.0.0.1", broker.port)
    assert dc.controller is not None
    # Metadata agrees with DescribeCluster.
    md = a.list_topics(timeout=10)
    assert list(md.brokers) == [node.id]
    assert md.cluster_id == dc.cluster_id


# --------------------------------------------------------------------------
# DescribeConfigs / IncrementalAlterConfigs / AlterConfigs
# --------------------------------------------------------------------------


def test_describe_configs_override_and_defaults(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config={"retention.ms": "86400000"})
    a = ck_admin(broker.bootstrap)
    cfg = _topic_configs(a, topic_name)
    r = cfg["retention.ms"]
    assert (r.value, r.source, r.is_default) == ("86400000", DYNAMIC_TOPIC, False)
    # Defaults are listed too, with Kafka's default values.
    for name, value in [
        ("cleanup.policy", "delete"),
        ("max.message.bytes", "1048588"),
        ("message.timestamp.type", "CreateTime"),
        ("compression.type", "producer"),
    ]:
        assert name in cfg, f"{name} missing from DescribeConfigs"
        assert cfg[name].value == value, name
        assert cfg[name].source == DEFAULT, name
        assert cfg[name].is_default is True, name
    # a new cluster starts with eligible leader replicas on (KIP-966, as Kafka
    # 4.1): its controller wrote the cluster-level min.insync.replicas
    m = cfg["min.insync.replicas"]
    assert (m.value, m.source, m.is_default) == (
        "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)
    assert {
        "segment.bytes",
        "retention.bytes",
        "segment.ms",
        "unclean.leader.election.enable",
    } <= set(cfg)


def test_describe_configs_unknown_topic(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic_name)], request_timeout=TIMEOUT
    )
    [f] = fs.values()
    assert _err(f).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs(broker):
    a = ck_admin(broker.bootstrap)
    [node_id] = a.list_topics(timeout=10).brokers
    fs = a.describe_configs(
        [ConfigResource(ResourceType.BROKER, str(node_id))], request_timeout=TIMEOUT
    )
    [f] = fs.values()
    cfg = f.result(timeout=TIMEOUT)
    assert cfg["auto.create.topics.enable"].value == "true"
    assert cfg["num.partitions"].value == "1"
    assert cfg["message.max.bytes"].value == "1048588"
    assert cfg["message.max.bytes"].source == DEFAULT
    # Settings given at startup (the harness passes log.dirs) are static broker config.
    ld = cfg["log.dirs"]
    assert os.path.realpath(ld.value) == os.path.realpath(str(broker.data_dir))
    assert ld.source == STATIC_BROKER


def test_incremental_alter_configs_set_and_delete(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, config={"retention.ms": "100000"})
    a = ck_admin(broker.bootstrap)
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("segment.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    assert f.result(timeout=TIMEOUT) is None
    cfg = _topic_configs(a, topic_name)
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == ("7200000", DYNAMIC_TOPIC)
    assert (cfg["cleanup.policy"].value, cfg["cleanup.policy"].source) == ("compact", DYNAMIC_TOPIC)
    # Untouched overrides stay (that is what "incremental" means).
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == ("100000", DYNAMIC_TOPIC)

    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    assert f.result(timeout=TIMEOUT) is None
    cfg = _topic_configs(a, topic_name)
    assert (
        cfg["retention.ms"].value,
        cfg["retention.ms"].source,
        cfg["retention.ms"].is_default,
    ) == ("604800000", DEFAULT, True)
    assert (cfg["cleanup.policy"].value, cfg["cleanup.policy"].source) == ("delete", DEFAULT)
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == ("7200000", DYNAMIC_TOPIC)


def test_incremental_alter_configs_append_subtract(broker, topic_name):
    """APPEND/SUBTRACT work on list configs; APPEND starts from the default."""
    create_topic(broker.bootstrap, topic_name, 1)
    a = ck_admin(broker.bootstrap)

    def alter(op, value):
        res = ConfigResource(
            ResourceType.TOPIC,
            topic_name,
            incremental_configs=[ConfigEntry("cleanup.policy", value, incremental_operation=op)],
        )
        [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
        return f.result(timeout=TIMEOUT)

    alter(AlterConfigOpType.APPEND, "compact")
    assert _topic_configs(a, topic_name)["cleanup.policy"].value == "delete,compact"
    alter(AlterConfigOpType.SUBTRACT, "delete")
    cp = _topic_configs(a, topic_name)["cleanup.policy"]
    assert (cp.value, cp.source) == ("compact", DYNAMIC_TOPIC)


def test_incremental_alter_configs_errors(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    a = ck_admin(broker.bootstrap)
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    assert _err(f).code() == KafkaError.INVALID_CONFIG
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    assert _err(f).code() == KafkaError.INVALID_CONFIG
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name + "-missing",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    assert _err(f).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # Nothing changed.
    r = _topic_configs(a, topic_name)["retention.ms"]
    assert (r.value, r.source) == ("604800000", DEFAULT)


def test_incremental_alter_configs_validate_only(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    a = ck_admin(broker.bootstrap)
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [f] = a.incremental_alter_configs([res], validate_only=True, request_timeout=TIMEOUT).values()
    assert f.result(timeout=TIMEOUT) is None
    assert _topic_configs(a, topic_name)["retention.ms"].value == "604800000"


def test_alter_configs_legacy_replaces_all_overrides(broker, topic_name):
    """Legacy AlterConfigs sets the whole override set: configs not named
    revert to their defaults."""
    create_topic(broker.bootstrap, topic_name, 1, config={"retention.ms": "100000"})
    a = ck_admin(broker.bootstrap)
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        set_config={"segment.bytes": "1048576", "max.message.bytes": "2000000"},
    )
    [f] = a.alter_configs([res], request_timeout=TIMEOUT).values()
    assert f.result(timeout=TIMEOUT) is None
    cfg = _topic_configs(a, topic_name)
    assert (cfg["segment.bytes"].value, cfg["segment.bytes"].source) == ("1048576", DYNAMIC_TOPIC)
    assert (cfg["max.message.bytes"].value, cfg["max.message.bytes"].source) == (
        "2000000",
        DYNAMIC_TOPIC,
    )
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == ("604800000", DEFAULT)
    # An invalid legacy alter is rejected whole.
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"no.such.config": "x"})
    [f] = a.alter_configs([res], request_timeout=TIMEOUT).values()
    assert _err(f).code() == KafkaError.INVALID_CONFIG
    assert _topic_configs(a, topic_name)["segment.bytes"].value == "1048576"


def test_altered_max_message_bytes_takes_effect(broker, topic_name):
    """A config change is not just stored: the broker enforces the new value."""
    create_topic(broker.bootstrap, topic_name, 1)
    a = ck_admin(broker.bootstrap)
    big = {"message.max.bytes": 5_000_000, "linger.ms": 0, "retries": 0}
    assert ck_produce(broker.bootstrap, topic_name, [Out(b"x" * 50_000)], **big)[0].offset == 0
    res = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "10000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    [f] = a.incremental_alter_configs([res], request_timeout=TIMEOUT).values()
    f.result(timeout=TIMEOUT)

    def rejected():
        d = ck_produce(
            broker.bootstrap, topic_name, [Out(b"y" * 50_000)], raise_on_error=False, **big
        )
        return d[0].error is not None and d[0].error.code() == KafkaError.MSG_SIZE_TOO_LARGE

    wait_until(rejected, 15, 0.5, "MSG_SIZE_TOO_LARGE after lowering max.message.bytes")


# --------------------------------------------------------------------------
# CreatePartitions
# --------------------------------------------------------------------------


def test_create_partitions_grows_count(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    a = ck_admin(broker.bootstrap)
    fs = a.create_partitions([NewPartitions(topic_name, 5)], request_timeout=TIMEOUT)
    assert fs[topic_name].result(timeout=TIMEOUT) is None
    wait_for_topic(broker.bootstrap, topic_name, 5)
    # The new partitions take records and serve them.
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"p4", partition=4)])
    assert (d[0].partition, d[0].offset) == (4, 0)
    assert [r.value for r in ck_consume(broker.bootstrap, topic_name, 1, partitions=(4,))] == [
        b"p4"
    ]


@pytest.mark.parametrize("new_total", [2, 1])
def test_create_partitions_cannot_shrink_or_stay(broker, topic_name, new_total):
    create_topic(broker.bootstrap, topic_name, 2)
    a = ck_admin(broker.bootstrap)
    fs = a.create_partitions([NewPartitions(topic_name, new_total)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.INVALID_PARTITIONS
    assert _partition_count(a, topic_name) == 2


def test_create_partitions_unknown_topic(broker, topic_name):
    a = ck_admin(broker.bootstrap)
    fs = a.create_partitions([NewPartitions(topic_name, 3)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --------------------------------------------------------------------------
# DeleteTopics
# --------------------------------------------------------------------------


def test_delete_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    ck_produce(broker.bootstrap, topic_name, [Out(b"old", partition=0)])
    a = ck_admin(broker.bootstrap)
    fs = a.delete_topics([topic_name], request_timeout=TIMEOUT, operation_timeout=TIMEOUT)
    assert fs[topic_name].result(timeout=TIMEOUT) is None
    wait_until(lambda: topic_name not in _topic_names(a), 15, desc="topic gone from metadata")
    fs = a.describe_topics(TopicCollection([topic_name]), request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # Deleting it again: unknown.
    fs = a.delete_topics([topic_name], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name can be reused; the new topic starts empty.
    create_topic(broker.bootstrap, topic_name, 1)
    d = ck_produce(broker.bootstrap, topic_name, [Out(b"new")])
    assert (d[0].partition, d[0].offset) == (0, 0)
    assert [r.value for r in ck_consume(broker.bootstrap, topic_name, 1)] == [b"new"]


# --------------------------------------------------------------------------
# kafka-python KafkaAdminClient
# --------------------------------------------------------------------------


@pytest.fixture
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def test_kafka_python_create_describe_delete(broker, kp_admin, topic_name):
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import TopicAlreadyExistsError

    r = kp_admin.create_topics(
        [KNewTopic(topic_name, 3, 1, topic_configs={"retention.ms": "5000000"})]
    )
    [t] = r["topics"]
    assert (t["name"], t["error_code"], t["num_partitions"]) == (topic_name, 0, 3)
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KNewTopic(topic_name, 3, 1)])
    wait_for_topic(broker.bootstrap, topic_name, 3)
    assert topic_name in kp_admin.list_topics()
    [d] = kp_admin.describe_topics([topic_name])
    assert (d["name"], d["error_code"], d["is_internal"]) == (topic_name, 0, False)
    assert sorted(p["partition_index"] for p in d["partitions"]) == [0, 1, 2]
    node = kp_admin.describe_cluster()["brokers"][0]["broker_id"]
    assert all(p["leader_id"] == node and p["error_code"] == 0 for p in d["partitions"])

    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType

    # kafka-python's default filter keeps only non-default ("modified") configs,
    # which it tells apart by the config source the broker reports.
    cfg = kp_admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic_name)])[
        "topic"
    ][topic_name]
    assert cfg["retention.ms"]["value"] == "5000000"
    assert cfg["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert "cleanup.policy" not in cfg
    cfg = kp_admin.describe_configs(
        [KConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all"
    )["topic"][topic_name]
    assert cfg["cleanup.policy"]["value"] == "delete"
    assert cfg["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    r = kp_admin.delete_topics([topic_name])
    [t] = r["topics"]
    assert (t["name"], t["error_code"]) == (topic_name, 0)
    wait_until(lambda: topic_name not in kp_admin.list_topics(), 15, desc="topic deleted")


def test_kafka_python_describe_cluster(broker, kp_admin):
    dc = kp_admin.describe_cluster()
    assert dc["cluster_id"]
    [b] = dc["brokers"]
    assert (b["host"], b["port"]) == ("127.0.0.1", broker.port)
    assert dc["controller_id"] == b["broker_id"]


def test_kafka_python_describe_log_dirs(broker, kp_admin, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    ck_produce(
        broker.bootstrap,
        topic_name,
        [Out(b"v" * 100, partition=0) for _ in range(20)],
        **{"compression.type": "none"},
    )
    [per_broker] = kp_admin.describe_log_dirs([topic_name])
    node = kp_admin.describe_cluster()["brokers"][0]["broker_id"]
    assert per_broker["broker"] == node
    [ld] = per_broker["log_dirs"]
    assert ld["error_code"] == 0
    assert os.path.isabs(ld["log_dir"])
    assert os.path.realpath(ld["log_dir"]) == os.path.realpath(str(broker.data_dir))
    [t] = [t for t in ld["topics"] if t["name"] == topic_name]
    parts = {p["partition_index"]: p for p in t["partitions"]}
    assert sorted(parts) == [0, 1]
    # 20 records of 100-byte values: at least 2000 bytes on disk; partition 1 is empty.
    assert parts[0]["partition_size"] >= 2000
    assert parts[1]["partition_size"] == 0
    assert parts[0]["offset_lag"] == 0 and parts[0]["is_future_key"] is False


@pytest.mark.parametrize("partitions", [10_001, 100_000])  # librdkafka allows <= 100000
def test_create_topic_excessive_partitions_is_policy_violation(broker, topic_name, partitions):
    """KRaft caps one CreateTopics request at 10000 partitions in total:
    more is POLICY_VIOLATION (44), and nothing is created."""
    a = ck_admin(broker.bootstrap)
    fs = a.create_topics([NewTopic(topic_name, partitions, 1)], request_timeout=TIMEOUT)
    assert _err(fs[topic_name]).code() == KafkaError.POLICY_VIOLATION
    assert topic_name not in _topic_names(a)
    assert_broker_serves(broker.bootstrap)
