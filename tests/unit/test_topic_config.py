"""Topic configs: validation (INVALID_CONFIG), effective LogConfig, DescribeConfigs entries."""

from __future__ import annotations

import pytest

from odradek.broker_config_defs import DYNAMIC_BROKER_CONFIGS
from odradek.config import BROKER_CONFIGS, BrokerConfig
from odradek.configdef import LONG_MAX, ConfigSource, ConfigType
from odradek.storage.log_config import LogConfig
from odradek.topic_config import (
    TOPIC_CONFIGS,
    ConfigEntry,
    ConfigSynonym,
    InvalidConfig,
    describe_broker_config,
    describe_topic_config,
    effective_log_config,
    validate_topic_configs,
)

STATIC = ConfigSource.STATIC_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG
TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG

KAFKA_TOPIC_KEYS = {
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
    "max.message.bytes", "message.timestamp.type", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
    "message.downconversion.enable", "remote.storage.enable", "local.retention.ms",
    "local.retention.bytes", "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
}


def broker(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    (found,) = [e for e in entries if e.name == name]
    return found


def invalid(configs: dict[str, str | None]) -> InvalidConfig:
    with pytest.raises(InvalidConfig) as info:
        validate_topic_configs(configs)
    assert info.value.error_code == 40
    return info.value


# ---- the table --------------------------------------------------------------------------


def test_every_kafka_topic_key_is_defined() -> None:
    assert KAFKA_TOPIC_KEYS <= set(TOPIC_CONFIGS)


@pytest.mark.parametrize(("topic_key", "broker_key"), [
    ("segment.bytes", "log.segment.bytes"),
    ("retention.ms", "log.retention.ms"),
    ("max.message.bytes", "message.max.bytes"),
    ("segment.ms", "log.roll.ms"),
    ("segment.index.bytes", "log.index.size.max.bytes"),
    ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
    ("file.delete.delay.ms", "log.segment.delete.delay.ms"),
    ("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    ("min.insync.replicas", "min.insync.replicas"),
])
def test_broker_synonym(topic_key: str, broker_key: str) -> None:
    assert TOPIC_CONFIGS[topic_key].broker_synonyms[0] == broker_key


def test_topic_and_broker_types_agree() -> None:
    for spec in TOPIC_CONFIGS.values():
        for synonym in spec.broker_synonyms:
            broker_type = BROKER_CONFIGS[synonym].type
            # the .hours/.minutes synonyms are INTs converted to a LONG of ms
            assert broker_type == spec.type or synonym.endswith((".hours", ".minutes",
                                                                 "scheduler.interval.ms")), \
                (spec.name, synonym)


# ---- validate_topic_configs -------------------------------------------------------------


def test_valid_configs_are_parsed_to_python_values() -> None:
    assert validate_topic_configs({
        "segment.bytes": "1024", "cleanup.policy": "compact, delete", "preallocate": "true",
        "min.cleanable.dirty.ratio": "0.1", "retention.ms": "-1",
        "leader.replication.throttled.replicas": "0:1,1:2",
    }) == {"segment.bytes": 1024, "cleanup.policy": ["compact", "delete"],
           "preallocate": True, "min.cleanable.dirty.ratio": 0.1, "retention.ms": -1,
           "leader.replication.throttled.replicas": ["0:1", "1:2"]}


def test_unknown_topic_key() -> None:
    err = invalid({"segment.byte": "1"})
    assert err.key == "segment.byte"
    assert err.message == "Unknown topic config name: segment.byte"


def test_broker_key_is_not_a_topic_key() -> None:
    assert invalid({"log.segment.bytes": "1024"}).key == "log.segment.bytes"


def test_bad_value_message_is_kafkas() -> None:
    assert invalid({"segment.bytes": "big"}).message == (
        "Invalid value 'big' for configuration segment.bytes: Not a number of type INT")


@pytest.mark.parametrize(("configs", "reason"), [
    ({"segment.bytes": "13"}, "Value must be at least 14"),
    ({"retention.ms": "-2"}, "Value must be at least -1"),
    ({"min.insync.replicas": "0"}, "Value must be at least 1"),
    ({"min.cleanable.dirty.ratio": "2"}, "no more than 1"),
    ({"cleanup.policy": "compact,remove"}, "String must be one of: compact, delete"),
    ({"compression.type": "brotli"}, "String must be one of"),
    ({"message.timestamp.type": "logappendtime"}, "CreateTime, LogAppendTime"),
    ({"preallocate": "1"}, "either true or false"),
    ({"segment.ms": "0"}, "Value must be at least 1"),
    ({"follower.replication.throttled.replicas": "0-1"}, "[partitionId]:[brokerId]"),
])
def test_bad_values(configs: dict[str, str | None], reason: str) -> None:
    err = invalid(configs)
    assert err.key == next(iter(configs))
    assert reason in err.message


def test_throttled_replicas_wildcard() -> None:
    assert validate_topic_configs({"leader.replication.throttled.replicas": "*"}) == {
        "leader.replication.throttled.replicas": ["*"]}


def test_min_compaction_lag_above_max() -> None:
    err = invalid({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)" in err.message


def test_local_retention_above_retention() -> None:
    err = invalid({"local.retention.ms": "1000", "retention.ms": "100"})
    assert err.key == "local.retention.ms"
    assert validate_topic_configs({"local.retention.ms": "100", "retention.ms": "-1"})


def test_null_values_only_where_allowed() -> None:
    assert "Null value not supported" in invalid({"retention.ms": None}).message
    assert validate_topic_configs({"retention.ms": None}, allow_null=True) == {
        "retention.ms": None}


# ---- effective_log_config ---------------------------------------------------------------


def test_topic_override_wins_over_broker_default() -> None:
    b = broker(log_segment_bytes="5000", log_retention_minutes="3")
    lc = effective_log_config(b, {"segment.bytes": "2000", "cleanup.policy": "compact,delete"})
    assert lc.segment_bytes == 2000
    assert lc.retention_ms == 180_000  # from the broker
    assert lc.cleanup_policy == "compact,delete"


def test_no_overrides_give_the_broker_log_config() -> None:
    b = broker(log_roll_hours="1")
    assert effective_log_config(b, {}) == b.log_config()
    assert effective_log_config(broker(), {}) == LogConfig()


def test_effective_log_config_validates() -> None:
    with pytest.raises(InvalidConfig):
        effective_log_config(broker(), {"segment.bytes": "x"})


def test_every_log_config_field_is_reachable_from_a_topic_key() -> None:
    from dataclasses import fields

    topic_fields = {key.replace(".", "_") for key in TOPIC_CONFIGS}
    assert {f.name for f in fields(LogConfig)} <= topic_fields


# ---- describe_topic_config --------------------------------------------------------------


def test_describe_topic_defaults() -> None:
    entries = describe_topic_config(broker(), {})
    assert [e.name for e in entries] == sorted(TOPIC_CONFIGS)
    e = entry(entries, "segment.bytes")
    assert (e.value, e.source, e.read_only, e.is_sensitive, e.config_type) == (
        "1073741824", DEFAULT, False, False, ConfigType.INT)
    assert e.synonyms == [ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT)]
    assert e.documentation


def test_describe_formats_values_like_kafka() -> None:
    entries = describe_topic_config(broker(), {"cleanup.policy": "compact, delete"})
    assert entry(entries, "preallocate").value == "false"
    assert entry(entries, "preallocate").config_type == ConfigType.BOOLEAN
    assert entry(entries, "min.cleanable.dirty.ratio").value == "0.5"
    assert entry(entries, "flush.messages").value == str(LONG_MAX)
    assert entry(entries, "cleanup.policy").value == "compact,delete"
    assert entry(entries, "cleanup.policy").config_type == ConfigType.LIST
    assert entry(entries, "leader.replication.throttled.replicas").value == ""


def test_describe_topic_override_then_static_then_default_synonyms() -> None:
    entries = describe_topic_config(broker(log_segment_bytes="5000"), {"segment.bytes": "2000"})
    e = entry(entries, "segment.bytes")
    assert (e.value, e.source) == ("2000", TOPIC)
    assert e.synonyms == [ConfigSynonym("segment.bytes", "2000", TOPIC),
                          ConfigSynonym("log.segment.bytes", "5000", STATIC),
                          ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT)]


def test_describe_retention_from_broker_minutes() -> None:
    """Kafka's ConfigHelper drops the synonyms found before the first one named
    log.retention.ms (the topic key's primary broker synonym): with only
    log.retention.minutes set, none is listed and the source is DEFAULT_CONFIG,
    though the value is the one the minutes give."""
    e = entry(describe_topic_config(broker(log_retention_minutes="5"), {}), "retention.ms")
    assert (e.value, e.source, e.synonyms) == ("300000", DEFAULT, [])
    e = entry(describe_topic_config(broker(log_retention_ms="7000",
                                           log_retention_minutes="5"), {}), "retention.ms")
    assert (e.value, e.source) == ("7000", STATIC)
    assert e.synonyms == [ConfigSynonym("log.retention.ms", "7000", STATIC),
                          ConfigSynonym("log.retention.minutes", "5", STATIC),
                          ConfigSynonym("log.retention.hours", "168", DEFAULT)]


def test_describe_shows_an_unparseable_stored_override_as_stored() -> None:
    e = entry(describe_topic_config(broker(), {"segment.bytes": "junk", "bogus.key": "1"}),
              "segment.bytes")
    assert (e.value, e.source) == ("junk", TOPIC)


def test_describe_key_without_broker_synonym() -> None:
    e = entry(describe_topic_config(broker(), {}), "remote.storage.enable")
    assert (e.value, e.source, e.synonyms) == ("false", DEFAULT, [])


# ---- describe_broker_config -------------------------------------------------------------


def test_describe_broker_lists_every_key_read_only_but_the_dynamic_ones() -> None:
    entries = describe_broker_config(broker(num_partitions="3"))
    assert [e.name for e in entries] == sorted(BROKER_CONFIGS)
    assert all(e.read_only == (e.name not in DYNAMIC_BROKER_CONFIGS) for e in entries)
    e = entry(entries, "num.partitions")
    assert (e.value, e.source) == ("3", STATIC)
    assert e.synonyms == [ConfigSynonym("num.partitions", "3", STATIC),
                          ConfigSynonym("num.partitions", "1", DEFAULT)]
    assert entry(entries, "log.retention.hours").source == DEFAULT


def test_describe_broker_shows_dynamic_values_before_the_cluster_default_and_static() -> None:
    key = "leader.replication.throttled.rate"
    e = entry(describe_broker_config(broker(), {key: "200"}, {key: "500"}), key)
    assert (e.value, e.source, e.read_only) == ("200", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert [(s.value, s.source) for s in e.synonyms] == [
        ("200", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("500", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("9223372036854775807", DEFAULT)]


def test_describe_broker_unset_key_without_default() -> None:
    e = entry(describe_broker_config(broker()), "log.retention.ms")
    assert (e.value, e.source, e.synonyms) == (None, DEFAULT, [])
    e = entry(describe_broker_config(broker()), "log.retention.hours")
    assert e.synonyms == [ConfigSynonym("log.retention.hours", "168", DEFAULT)]


def test_describe_broker_hides_passwords() -> None:
    e = entry(describe_broker_config(broker(ssl_key_password="hunter2")), "ssl.key.password")
    assert (e.value, e.is_sensitive, e.config_type) == (None, True, ConfigType.PASSWORD)
    assert all(s.value is None for s in e.synonyms)
