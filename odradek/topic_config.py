"""Topic-level configs: Kafka's topic keys, their broker-wide synonyms, and DescribeConfigs.

Theory of operation. A topic's effective setting for key K is its own override (stored in
the metadata log as a topic config record) if there is one, else the broker's value for
K's broker synonym (`segment.bytes` <- `log.segment.bytes`, `retention.ms` <-
`log.retention.ms` / `.minutes` / `.hours`), else Kafka's default. TOPIC_CONFIGS
(`topic_config_defs.py`, re-exported here) lists every topic key odradek accepts with its
type, validator and synonyms in precedence order.

- `validate_topic_configs` is what CreateTopics / AlterConfigs / IncrementalAlterConfigs
  call; it raises InvalidConfig, which the broker answers with INVALID_CONFIG (40) and
  the exception's message.
- `effective_log_config` turns broker defaults plus topic overrides into the LogConfig
  a partition log runs with.
- `describe_topic_config` / `describe_broker_config` build DescribeConfigs entries with
  Kafka's source codes and synonym lists (`config_synonyms`: Kafka's ConfigHelper
  order and its drop of the entries before the key's own name), so
  `kafka-configs --describe --all` reads as it does against Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker_config_defs import BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS
from odradek.config import BrokerConfig
from odradek.configdef import ConfigError, ConfigSource, ConfigType, format_value
from odradek.storage.log_config import LogConfig
from odradek.topic_config_defs import TOPIC_CONFIGS, TopicConfigDef

__all__ = [
    "TOPIC_CONFIGS",
    "ConfigEntry",
    "ConfigSynonym",
    "InvalidConfig",
    "TopicConfigDef",
    "check_topic_config_change",
    "config_synonyms",
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
    policy = parsed.get("cleanup.policy")
    if parsed.get("remote.storage.enable") is True and isinstance(policy, list) \
            and "compact" in policy:
        raise InvalidConfig("remote.storage.enable", "Remote log storage only supported "
                            "for topics with cleanup.policy=delete")
    for local_key, total_key in (("local.retention.ms", "retention.ms"),
                                 ("local.retention.bytes", "retention.bytes")):
        local, total = parsed.get(local_key), parsed.get(total_key)
        if (isinstance(local, int) and isinstance(total, int) and local != -2
                and total != -1 and (local == -1 or local > total)):
            raise InvalidConfig(local_key, f"Invalid value {local} for configuration "
                                f"{local_key}: Value must not be more than {total_key} "
                                f"property value: {total}")


DISABLE_REMOTE_MESSAGE = (
    "It is invalid to disable remote storage without deleting remote data. If you want "
    "to keep the remote data and turn to read only, please set `remote.storage.enable="
    "true,remote.log.copy.disable=true`. If you want to disable remote storage and delete "
    "all remote data, please set `remote.storage.enable=false,"
    "remote.log.delete.on.disable=true`.")


def check_topic_config_change(old: Mapping[str, str | None],
                              new: Mapping[str, str | None]) -> str | None:
    """Rules on a topic's config change (KIP-950): remote storage is turned off only
    with remote.log.delete.on.disable=true. The INVALID_CONFIG message, or None."""

    def on(configs: Mapping[str, str | None], key: str) -> bool:
        return str(configs.get(key) or "false").strip().lower() == "true"

    if on(old, "remote.storage.enable") and not on(new, "remote.storage.enable") \
            and not on(new, "remote.log.delete.on.disable"):
        return DISABLE_REMOTE_MESSAGE
    return None


def topic_default(broker: BrokerConfig, key: str) -> object:
    """The value a topic without an override gets for `key`, from the broker config."""
    spec = TOPIC_CONFIGS[key]
    derived = _DERIVED_DEFAULTS.get(key)
    if derived is not None:
        return derived(broker)
    if spec.broker_synonyms:
        return broker.get(spec.broker_synonyms[0])
    return spec.definition.default


def effective_log_config(broker: BrokerConfig, topic_overrides: Mapping[str, str],
                         dynamic: Mapping[str, str] | None = None,
                         dynamic_default: Mapping[str, str] | None = None) -> LogConfig:
    """The LogConfig a partition of a topic with these overrides runs with.
    `dynamic` / `dynamic_default`: this broker's and the cluster's dynamic
    broker configs; a dynamic broker key that is a topic key's broker synonym
    (`min.insync.replicas`) stands in for the file's value, as Kafka's
    DynamicLogConfig does."""
    overrides = dict(topic_overrides)
    for name, spec in TOPIC_CONFIGS.items():
        names = spec.broker_synonyms
        if name in overrides or not names or names[0] not in DYNAMIC_BROKER_CONFIGS:
            continue
        for layer in (dynamic, dynamic_default):
            if layer and names[0] in layer:
                overrides[name] = layer[names[0]]
                break
    parsed = validate_topic_configs(overrides)
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


def config_synonyms(
    broker: BrokerConfig, name: str, names: tuple[str, ...],
    dynamic: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
) -> list[ConfigSynonym]:
    """Kafka's `ConfigHelper.configSynonyms`: the broker keys `names` (one setting
    under several names, in precedence order) with a value, source by source
    (this broker's dynamic configs, the cluster-wide dynamic default, the file,
    the defaults; within a source in `names`' order), then everything before
    the first entry for `name` itself dropped. So `retention.ms`, whose broker
    key `log.retention.ms` has no value, lists no synonyms even though
    `log.retention.hours` has a default (Kafka's `dropWhile`)."""
    found: list[ConfigSynonym] = []
    for layer, source in ((dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
        for n in names:
            if layer and n in layer:
                found.append(ConfigSynonym(n, None if BROKER_CONFIGS[n].sensitive
                                           else layer[n], source))
    for n in names:
        if broker.is_set(n):
            found.append(ConfigSynonym(n, _shown(broker, n, broker.get(n)),
                                       ConfigSource.STATIC_BROKER_CONFIG))
    for n in names:
        default = BROKER_CONFIGS[n].default
        if default is not None:
            found.append(ConfigSynonym(n, _shown(broker, n, default),
                                       ConfigSource.DEFAULT_CONFIG))
    for i, synonym in enumerate(found):
        if synonym.name == name:
            return found[i:]
    return []


def _shown(broker: BrokerConfig, name: str, value: object) -> str | None:
    spec = BROKER_CONFIGS[name]
    return None if spec.sensitive else format_value(spec.type, value)


def describe_topic_config(broker: BrokerConfig,
                          topic_overrides: Mapping[str, str],
                          dynamic: Mapping[str, str] | None = None,
                          dynamic_default: Mapping[str, str] | None = None) -> list[ConfigEntry]:
    """Every topic config with its effective value, source and synonyms, sorted by name.

    `topic_overrides` are the stored (already validated) overrides of the topic;
    `dynamic` / `dynamic_default` this broker's and the cluster's dynamic broker
    configs (a topic without an override of `min.insync.replicas` shows the
    cluster's, source DYNAMIC_DEFAULT_BROKER_CONFIG, as Kafka 4.1 with ELR).
    """
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIGS):
        spec = TOPIC_CONFIGS[name]
        names = spec.broker_synonyms
        synonyms = config_synonyms(broker, names[0], names, dynamic,
                                   dynamic_default) if names else []
        if name in topic_overrides:
            try:
                shown = format_value(spec.type, spec.definition.parse(topic_overrides[name]))
            except ConfigError:  # validated when stored; never fail a describe over it
                shown = topic_overrides[name]
            synonyms.insert(0, ConfigSynonym(name, shown, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        elif synonyms and synonyms[0].source in (ConfigSource.DYNAMIC_BROKER_CONFIG,
                                                 ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG):
            shown = synonyms[0].value
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


# Broker keys that are one setting under several names (precedence order): Kafka's
# `DynamicBrokerConfig.brokerConfigSynonyms` (log.flush.interval.ms is listed alone
# there: its one synonym, the scheduler interval, is a default, not another name).
_BROKER_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def _synonym_names(name: str) -> tuple[str, ...]:
    if name == "log.flush.interval.ms":
        return (name, "log.flush.scheduler.interval.ms")
    for group in _BROKER_SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def describe_broker_config(
    broker: BrokerConfig,
    dynamic: Mapping[str, str] | None = None,
    dynamic_default: Mapping[str, str] | None = None,
    per_broker: bool = True,
) -> list[ConfigEntry]:
    """A BROKER resource's configs, sorted by name. `dynamic` holds this broker's
    dynamic configs and `dynamic_default` the cluster-wide ones (BROKER resource
    ""). For one broker (`per_broker`) every modelled key, its synonyms as
    `config_synonyms` finds them; for the cluster default (resource "") only the
    keys it sets, with only their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms, as
    Kafka's `createBrokerConfigEntry`. Only DYNAMIC_BROKER_CONFIGS may be
    altered: every other key is read-only."""
    entries: list[ConfigEntry] = []
    dynamic = dynamic or {}
    dynamic_default = dynamic_default or {}
    for name, value in broker.items():
        if not per_broker and name not in dynamic_default:
            continue
        spec = BROKER_CONFIGS[name]
        synonyms = config_synonyms(broker, name, _synonym_names(name),
                                   dynamic if per_broker else None, dynamic_default)
        if not per_broker:
            synonyms = [s for s in synonyms
                        if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        shown = None if spec.sensitive else format_value(spec.type, value)
        for overrides in ((dynamic_default, dynamic) if per_broker else (dynamic_default,)):
            if name in overrides:
                shown = None if spec.sensitive else overrides[name]
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
