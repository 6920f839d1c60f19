"""Group configs (KIP-848): per-group overrides of the consumer-group settings.

A GROUP config resource (ConfigResource type 32) holds a group's overrides of
`group.consumer.session.timeout.ms` and `group.consumer.heartbeat.interval.ms`,
under Kafka's group-level names `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms` (Kafka's `GroupConfig`). They are set with
IncrementalAlterConfigs (or AlterConfigs), stored in the metadata log as
ConfigRecords of resource type GROUP, and read by the group coordinator at
each ConsumerGroupHeartbeat of the group: the member's session deadline and
the heartbeat interval it is given follow the group's value from then on.

Validation is Kafka's `GroupConfig.validate`: only these names; each value an
int of at least 1, within the broker's `group.consumer.min/max.session.
timeout.ms` and `group.consumer.min/max.heartbeat.interval.ms`; and the
session timeout above the heartbeat interval (defaults filling the keys a
group does not set). The share-group keys (KIP-932, docs/share_groups.md):
`share.auto.offset.reset` (latest|earliest: where a share partition starts
when the group first reads it), `share.record.lock.duration.ms`,
`share.session.timeout.ms`, `share.heartbeat.interval.ms`, each defaulting to
its broker key (`group.share.*`), and `share.isolation.level`
(read_uncommitted|read_committed, a group key only, as in Kafka).

DescribeConfigs of a group lists every group key: its own value (source
GROUP_CONFIG) or the broker's (DEFAULT_CONFIG), each with itself as its one
synonym, as Kafka's `ConfigHelper.createGroupConfigEntry` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.config import BrokerConfig
from odradek.configdef import (
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    Importance,
    at_least,
    format_value,
    one_of,
)
from odradek.topic_config import ConfigEntry, ConfigSynonym

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

# group key -> (its definition, the broker key that gives its default, if any)
GROUP_CONFIGS: dict[str, tuple[ConfigDef, str | None]] = {
    SESSION_TIMEOUT: (ConfigDef(
        SESSION_TIMEOUT, ConfigType.INT, 45000,
        "The timeout to detect client failures when using the consumer group protocol.",
        Importance.MEDIUM, at_least(1)), "group.consumer.session.timeout.ms"),
    HEARTBEAT_INTERVAL: (ConfigDef(
        HEARTBEAT_INTERVAL, ConfigType.INT, 5000,
        "The heartbeat interval given to the members of a consumer group.",
        Importance.MEDIUM, at_least(1)), "group.consumer.heartbeat.interval.ms"),
    SHARE_AUTO_OFFSET_RESET: (ConfigDef(
        SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest",
        "Where a share group starts reading a partition it has no state for.",
        Importance.MEDIUM, one_of("latest", "earliest")), None),
    SHARE_LOCK_DURATION: (ConfigDef(
        SHARE_LOCK_DURATION, ConfigType.INT, 30000,
        "How long a share group member holds the records it acquired.",
        Importance.MEDIUM, at_least(1)), "group.share.record.lock.duration.ms"),
    SHARE_SESSION_TIMEOUT: (ConfigDef(
        SHARE_SESSION_TIMEOUT, ConfigType.INT, 45000,
        "The timeout to detect share group member failures.",
        Importance.MEDIUM, at_least(1)), "group.share.session.timeout.ms"),
    SHARE_HEARTBEAT_INTERVAL: (ConfigDef(
        SHARE_HEARTBEAT_INTERVAL, ConfigType.INT, 5000,
        "The heartbeat interval given to the members of a share group.",
        Importance.MEDIUM, at_least(1)), "group.share.heartbeat.interval.ms"),
    SHARE_ISOLATION_LEVEL: (ConfigDef(
        SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted",
        "What a share group delivers of transactional records: read_committed stops "
        "at the last stable offset and never delivers aborted transactions' records.",
        Importance.MEDIUM, one_of("read_uncommitted", "read_committed")), None),
}

_BOUNDS = {
    SESSION_TIMEOUT: ("group.consumer.min.session.timeout.ms",
                      "group.consumer.max.session.timeout.ms"),
    HEARTBEAT_INTERVAL: ("group.consumer.min.heartbeat.interval.ms",
                         "group.consumer.max.heartbeat.interval.ms"),
}


def group_values(broker: BrokerConfig, overrides: Mapping[str, str | None]) -> dict[str, Any]:
    """The group's effective settings: its overrides over the broker's values.
    Raises ConfigError for a value that does not parse."""
    values: dict[str, Any] = {}
    for name, (definition, broker_key) in GROUP_CONFIGS.items():
        raw = overrides.get(name)
        if raw is not None:
            value = definition.parse(raw)
        else:
            value = definition.default if broker_key is None else broker.get(broker_key)
        values[name] = value
    return values


def validate_group_configs(broker: BrokerConfig,
                           configs: Mapping[str, str | None]) -> str | None:
    """A GROUP resource's new configs: the message for INVALID_CONFIG, or None."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    try:
        values = group_values(broker, configs)
    except ConfigError as e:
        return e.message
    for name, (low_key, high_key) in _BOUNDS.items():
        if name not in configs:  # the broker's own value is not the group's to fix
            continue
        if values[name] < broker.get(low_key):
            return f"{name} must be greater than or equal to {low_key}"
        if values[name] > broker.get(high_key):
            return f"{name} must be less than or equal to {high_key}"
    if values[SESSION_TIMEOUT] <= values[HEARTBEAT_INTERVAL]:
        return f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"
    if values[SHARE_SESSION_TIMEOUT] <= values[SHARE_HEARTBEAT_INTERVAL]:
        return f"{SHARE_SESSION_TIMEOUT} must be greater than {SHARE_HEARTBEAT_INTERVAL}"
    return None


def describe_group_config(broker: BrokerConfig,
                          overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every group key of one group, sorted by name (DescribeConfigs)."""
    try:
        values = group_values(broker, overrides)
    except ConfigError:  # validated when stored; never fail a describe over it
        values = group_values(broker, {})
    entries = []
    for name in sorted(GROUP_CONFIGS):
        definition, _ = GROUP_CONFIGS[name]
        shown = format_value(definition.type, values[name])
        source = (ConfigSource.GROUP_CONFIG if name in overrides
                  else ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(
            name=name, value=shown, source=source, read_only=False, is_sensitive=False,
            config_type=definition.type, documentation=definition.doc,
            synonyms=[ConfigSynonym(name, shown, source)]))
    return entries
