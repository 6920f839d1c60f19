"""The table of topic config keys odradek knows: Kafka's names, types, defaults, rules,
and the broker keys that supply each one's default (its synonyms, in precedence order).

Kept apart from odradek/topic_config.py, as broker_config_defs.py is from config.py:
both the broker config (which names a topic key given to the broker in its error) and
topic_config.py (which validates, resolves and describes topic configs against a
BrokerConfig) read this table, so it sits below both. Imports only the config
definitions (configdef, broker_config_defs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from odradek.broker_config_defs import (
    BROKER_CONFIGS,
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    MIN_SEGMENT_BYTES,
    TIMESTAMP_TYPES,
)
from odradek.configdef import (
    LONG_MAX,
    ConfigDef,
    ConfigType,
    Importance,
    Validator,
    at_least,
    between,
    one_of,
)

__all__ = ["TOPIC_CONFIGS", "ThrottledReplicas", "TopicConfigDef"]


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
    _t("remote.log.copy.disable", B, False, (), "Stop copying segments to the remote tier "
       "while keeping and serving what it holds (KIP-950).", MEDIUM),
    _t("remote.log.delete.on.disable", B, False, (), "Must be true to turn "
       "remote.storage.enable off: the remote data is then deleted (KIP-950).", MEDIUM),
    _t("remote.storage.enable", B, False, (), "Copy closed segments to the remote tier "
       "(retention.* then counts both tiers, local.retention.* the local one).", MEDIUM),
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
