"""Topic-level configs: Kafka's topic keys, their broker-wide synonyms, and DescribeConfigs.

Theory of operation. A topic's effective setting for key K is its own override (stored in
the metadata log as a topic config record) if there is one, else the broker's value for
K's broker synonym (`segment.bytes` <- `log.segment.bytes`, `retention.ms` <-
`log.retention.ms` / `.minutes` / `.hours`), else Kafka's default. TOPIC_CONFIGS lists
every topic key odradek accepts with its type, validator and synonyms in precedence
order.

- `validate_topic_configs` is what CreateTopics / AlterConfigs / IncrementalAlterConfigs
  call; it raises InvalidConfig, which the broker answers with INVALID_CONFIG (40) and
  the exception's message.
- `effective_log_config` turns broker defaults plus topic overrides into the LogConfig
  a partition log runs with.
- `describe_topic_config` / `describe_broker_config` build DescribeConfigs entries with
  Kafka's source codes and synonym lists, so `kafka-configs --describe --all` reads as
  it does against Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker_config_defs import (
    BROKER_CONFIGS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    DYNAMIC_BROKER_CONFIGS,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
)
from odradek.config import BrokerConfig
from odradek.configdef import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    Importance,
    Validator,
    at_least,
    between,
    format_value,
    one_of,
)
from odradek.storage.log_config import LogConfig

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigEntry",
    "ConfigSynonym",
    "InvalidConfig",
    "TopicConfigDef",
    "describe_broker_config",
    "describe_topic_config",
    "effective_log_config",
    "validate_dynamic_broker_configs",
    "validate_topic_configs",
]

INVALID_CONFIG = 40  # Kafka error code


class InvalidConfig(Exception):
    """A topic config the broker refuses; answered as INVALID_CONFIG with `message`."""

    error_code = INVALID_CONFIG

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(message)


class ThrottledReplicas:
    """`*` or `partition:broker,...` (Kafka's throttled-replica list syntax)."""

    _ITEM = re.compile(r"\A[0-9]+:[0-9]+\Z")

    def __call__(self, value: object) -> str | None:
        assert isinstance(value, list)
        if value == ["*"] or all(self._ITEM.match(item) for item in value):
            return None
        return ("must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic key: its definition and the broker keys that supply its default, in
    precedence order (the first one set wins)."""

    definition: ConfigDef
    broker_synonyms: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def type(self) -> ConfigType:
        return self.definition.type


B, S, I, L, D, LI = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                     ConfigType.DOUBLE, ConfigType.LIST)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW


def _t(name: str, type_: ConfigType, default: object, synonyms: tuple[str, ...], doc: str,
       importance: Importance = MEDIUM, validator: Validator | None = None) -> TopicConfigDef:
    return TopicConfigDef(ConfigDef(name, type_, default, doc, importance, validator), synonyms)


_TOPIC_DEFS = [
    _t("cleanup.policy", LI, ["delete"], ("log.cleanup.policy",), "'delete' removes old "
       "segments by retention; 'compact' keeps the latest record per key; both may be set.",
       MEDIUM, one_of(*CLEANUP_POLICIES)),
    _t("compression.type", S, "producer", ("compression.type",), "Compression of the "
       "topic's stored data; 'producer' keeps the producer's codec.", MEDIUM,
       one_of(*COMPRESSION_TYPES)),
    _t("compression.gzip.level", I, -1, ("compression.gzip.level",), "gzip level when the "
       "broker recompresses.", MEDIUM),
    _t("compression.lz4.level", I, 9, ("compression.lz4.level",), "lz4 level when the "
       "broker recompresses.", MEDIUM, between(1, 17)),
    _t("compression.zstd.level", I, 3, ("compression.zstd.level",), "zstd level when the "
       "broker recompresses.", MEDIUM, between(-131072, 22)),
    _t("delete.retention.ms", L, 86400000, ("log.cleaner.delete.retention.ms",), "How long "
       "tombstones stay in a compacted topic.", MEDIUM, at_least(0)),
    _t("file.delete.delay.ms", L, 60000, ("log.segment.delete.delay.ms",), "Time before a "
       "deleted segment's files are removed.", MEDIUM, at_least(0)),
    _t("flush.messages", L, LONG_MAX, ("log.flush.interval.messages",), "Messages between "
       "forced fsyncs.", MEDIUM, at_least(1)),
    _t("flush.ms", L, LONG_MAX, ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
       "Time between forced fsyncs.",
       MEDIUM, at_least(0)),
    _t("follower.replication.throttled.replicas", LI, [], (), "Replicas whose follower "
       "side is throttled: '*' or partition:broker,...", MEDIUM, ThrottledReplicas()),
    _t("index.interval.bytes", I, 4096, ("log.index.interval.bytes",), "Bytes between "
       "offset index entries.", MEDIUM, at_least(0)),
    _t("leader.replication.throttled.replicas", LI, [], (), "Replicas whose leader side is "
       "throttled: '*' or partition:broker,...", MEDIUM, ThrottledReplicas()),
    _t("local.retention.bytes", L, -2, ("log.local.retention.bytes",), "Local size limit "
       "of a tiered topic (-2: retention.bytes).", MEDIUM, at_least(-2)),
    _t("local.retention.ms", L, -2, ("log.local.retention.ms",), "Local retention of a "
       "tiered topic (-2: retention.ms).", MEDIUM, at_least(-2)),
    _t("max.compaction.lag.ms", L, LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), "Most "
       "time a record stays uncompacted.", MEDIUM, at_least(1)),
    _t("max.message.bytes", I, 1048588, ("message.max.bytes",), "Largest record batch the "
       "topic accepts.", MEDIUM, at_least(0)),
    _t("message.downconversion.enable", B, True, ("log.message.downconversion.enable",),
       "Whether old fetch versions get down-converted data.", LOW),
    _t("message.timestamp.after.max.ms", L, LONG_MAX,
       ("log.message.timestamp.after.max.ms",), "How far in the future a CreateTime "
       "timestamp may be.", MEDIUM, at_least(0)),
    _t("message.timestamp.before.max.ms", L, LONG_MAX,
       ("log.message.timestamp.before.max.ms",), "How far in the past a CreateTime "
       "timestamp may be.", MEDIUM, at_least(0)),
    _t("message.timestamp.difference.max.ms", L, LONG_MAX,
       ("log.message.timestamp.difference.max.ms",), "Deprecated: largest gap between a "
       "CreateTime timestamp and the broker clock.", MEDIUM, at_least(0)),
    _t("message.timestamp.type", S, "CreateTime", ("log.message.timestamp.type",),
       "CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time.",
       MEDIUM, one_of(*TIMESTAMP_TYPES)),
    _t("min.cleanable.dirty.ratio", D, 0.5, ("log.cleaner.min.cleanable.ratio",), "Dirty "
       "share of the log that makes it eligible for compaction.", MEDIUM, between(0, 1)),
    _t("min.compaction.lag.ms", L, 0, ("log.cleaner.min.compaction.lag.ms",), "Least time "
       "a record stays uncompacted.", MEDIUM, at_least(0)),
    _t("min.insync.replicas", I, 1, ("min.insync.replicas",), "In-sync replicas needed for "
       "an acks=all write.", MEDIUM, at_least(1)),
    _t("preallocate", B, False, ("log.preallocate",), "Preallocate segment files.", MEDIUM),
    _t("remote.storage.enable", B, False, (), "Move closed segments to the remote tier.",
       MEDIUM),
    _t("retention.bytes", L, -1, ("log.retention.bytes",), "Largest partition size before "
       "old segments are deleted (-1: no limit).", MEDIUM),
    _t("retention.ms", L, 604800000,
       ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), "How long a "
       "segment is kept (-1: forever).", MEDIUM, at_least(-1)),
    _t("segment.bytes", I, 1073741824, ("log.segment.bytes",), "Size at which a segment "
       "is rolled.", MEDIUM, at_least(MIN_SEGMENT_BYTES)),
    _t("segment.index.bytes", I, 10485760, ("log.index.size.max.bytes",), "Size of a "
       "segment's offset and time indexes.", MEDIUM, at_least(4)),
    _t("segment.jitter.ms", L, 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"),
       "Random jitter subtracted from segment.ms.", MEDIUM, at_least(0)),
    _t("segment.ms", L, 604800000, ("log.roll.ms", "log.roll.hours"), "Time after which a "
       "segment is rolled even if not full.", MEDIUM, at_least(1)),
    _t("unclean.leader.election.enable", B, False, ("unclean.leader.election.enable",),
       "Allow an out-of-sync replica to become leader, losing data.", MEDIUM),
]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}
assert all(s in BROKER_CONFIGS for d in _TOPIC_DEFS for s in d.broker_synonyms)

# Topic keys whose broker default is derived by a precedence rule, not read from one key.
_DERIVED_DEFAULTS = {
    "retention.ms": lambda b: b.log_retention_time_ms,
    "segment.ms": lambda b: b.log_roll_time_ms,
    "segment.jitter.ms": lambda b: b.log_roll_time_jitter_ms,
    "flush.ms": lambda b: b.log_flush_interval_ms,
}


def validate_topic_configs(configs: Mapping[str, str | None], *,
                           allow_null: bool = False) -> dict[str, object]:
    """Parse and check topic config overrides; return key -> typed value.

    A None value is "remove the override": kept as None when `allow_null` (AlterConfigs
    deletes), refused otherwise, as Kafka refuses it in CreateTopics.
    """
    parsed: dict[str, object] = {}
    for key, raw in configs.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            raise InvalidConfig(key, f"Unknown topic config name: {key}")
        if raw is None:
            if not allow_null:
                raise InvalidConfig(key, f"Null value not supported for topic configs: {key}")
            parsed[key] = None
            continue
        try:
            parsed[key] = spec.definition.parse(raw)
        except ConfigError as e:
            raise InvalidConfig(key, e.message) from None
    _check_pairs(parsed)
    return parsed


def validate_dynamic_broker_configs(configs: Mapping[str, str | None]) -> str | None:
    """A BROKER resource's dynamic configs (IncrementalAlterConfigs/AlterConfigs):
    the message for INVALID_CONFIG, or None. Only DYNAMIC_BROKER_CONFIGS may be
    set, as Kafka refuses the rest ("Cannot update these configs dynamically")."""
    static = sorted(key for key in configs if key not in DYNAMIC_BROKER_CONFIGS)
    if static:
        return f"Cannot update these configs dynamically: {static}"
    for key, raw in configs.items():
        try:
            BROKER_CONFIGS[key].parse(raw)
        except ConfigError as e:
            return e.message
    return None


def _check_pairs(parsed: Mapping[str, object]) -> None:
    """Rules between two keys given together."""
    low, high = parsed.get("min.compaction.lag.ms"), parsed.get("max.compaction.lag.ms")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise InvalidConfig("min.compaction.lag.ms", f"conflict topic config setting "
                            f"min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})")
    for local_key, total_key in (("local.retention.ms", "retention.ms"),
                                 ("local.retention.bytes", "retention.bytes")):
        local, total = parsed.get(local_key), parsed.get(total_key)
        if (isinstance(local, int) and isinstance(total, int) and local != -2
                and total != -1 and (local == -1 or local > total)):
            raise InvalidConfig(local_key, f"Invalid value {local} for configuration "
                                f"{local_key}: Value must not be more than {total_key} "
                                f"property value: {total}")


def topic_default(broker: BrokerConfig, key: str) -> object:
    """The value a topic without an override gets for `key`, from the broker config."""
    spec = TOPIC_CONFIGS[key]
    derived = _DERIVED_DEFAULTS.get(key)
    if derived is not None:
        return derived(broker)
    if spec.broker_synonyms:
        return broker.get(spec.broker_synonyms[0])
    return spec.definition.default


def effective_log_config(broker: BrokerConfig, topic_overrides: Mapping[str, str]) -> LogConfig:
    """The LogConfig a partition of a topic with these overrides runs with."""
    parsed = validate_topic_configs(topic_overrides)
    as_fields: dict[str, object] = {}
    for key, value in parsed.items():
        if isinstance(value, list):
            value = ",".join(value)
        as_fields[key] = value
    return broker.log_config().with_overrides(as_fields)


# ----------------------------------------------------------------------------------------
# DescribeConfigs


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs result entry, in Kafka's terms."""

    name: str
    value: str | None  # None for sensitive configs and unset keys without a default
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    documentation: str | None
    synonyms: list[ConfigSynonym] = field(default_factory=list)

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(broker: BrokerConfig, names: tuple[str, ...]) -> list[ConfigSynonym]:
    """Statically set synonyms first, then those with a default: Kafka's order."""
    result: list[ConfigSynonym] = []
    for name in names:
        if broker.is_set(name):
            result.append(ConfigSynonym(name, _shown(broker, name, broker.get(name)),
                                        ConfigSource.STATIC_BROKER_CONFIG))
    for name in names:
        default = BROKER_CONFIGS[name].default
        if default is not None:
            result.append(ConfigSynonym(name, _shown(broker, name, default),
                                        ConfigSource.DEFAULT_CONFIG))
    return result


def _shown(broker: BrokerConfig, name: str, value: object) -> str | None:
    spec = BROKER_CONFIGS[name]
    return None if spec.sensitive else format_value(spec.type, value)


def describe_topic_config(broker: BrokerConfig,
                          topic_overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config with its effective value, source and synonyms, sorted by name.

    `topic_overrides` are the stored (already validated) overrides of the topic.
    """
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIGS):
        spec = TOPIC_CONFIGS[name]
        synonyms = _broker_synonyms(broker, spec.broker_synonyms)
        if name in topic_overrides:
            try:
                shown = format_value(spec.type, spec.definition.parse(topic_overrides[name]))
            except ConfigError:  # validated when stored; never fail a describe over it
                shown = topic_overrides[name]
            synonyms.insert(0, ConfigSynonym(name, shown, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            shown = format_value(spec.type, topic_default(broker, name))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        sensitive = spec.definition.sensitive
        entries.append(ConfigEntry(
            name=name,
            value=None if sensitive else shown,
            source=source,
            read_only=False,
            is_sensitive=sensitive,
            config_type=spec.type,
            documentation=spec.definition.doc,
            synonyms=synonyms,
        ))
    return entries


# Broker keys that are one setting under several names (precedence order).
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.dirs", "log.dir"),
    ("node.id", "broker.id"),
)


def _synonym_names(name: str) -> tuple[str, ...]:
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def describe_broker_config(
    broker: BrokerConfig,
    dynamic: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """Every modelled broker config, sorted by name. `dynamic` holds this broker's
    dynamic configs and `dynamic_default` the cluster-wide ones (BROKER resource
    ""); they come first, in Kafka's order. Only DYNAMIC_BROKER_CONFIGS may be
    altered: every other key is read-only."""
    entries: list[ConfigEntry] = []
    layers = ((dynamic or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (dynamic_default or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    for name, value in broker.items():
        spec = BROKER_CONFIGS[name]
        synonyms = _broker_synonyms(broker, _synonym_names(name))
        shown = None if spec.sensitive else format_value(spec.type, value)
        for overrides, source in reversed(layers):
            if name in overrides:
                synonyms.insert(0, ConfigSynonym(name, overrides[name], source))
                shown = overrides[name]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=name,
            value=shown,
            source=source,
            read_only=name not in DYNAMIC_BROKER_CONFIGS,
            is_sensitive=spec.sensitive,
            config_type=spec.type,
            documentation=spec.doc,
            synonyms=synonyms,
        ))
    return entries
