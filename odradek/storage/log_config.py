"""Topic-level log configuration: Kafka's topic config keys as typed fields.

The broker-wide `log.*` keys give the defaults (see odradek/config.py); a topic's
own configs override them. Field names are the Kafka topic keys with '.' -> '_'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    segment_jitter_ms: int = 0  # segment.jitter.ms
    segment_index_bytes: int = 10485760  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 604800000  # retention.ms (-1 = unlimited)
    retention_bytes: int = -1  # retention.bytes (-1 = unlimited)
    flush_messages: int = LONG_MAX  # flush.messages
    flush_ms: int = LONG_MAX  # flush.ms
    max_message_bytes: int = 1048588  # max.message.bytes
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms
    cleanup_policy: str = "delete"  # cleanup.policy
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    min_insync_replicas: int = 1  # min.insync.replicas
    delete_retention_ms: int = 86400000  # delete.retention.ms
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    compression_type: str = "producer"  # compression.type
    preallocate: bool = False  # preallocate
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable
    # Tiered storage (KIP-405): local.retention.* -2 means "as retention.*".
    remote_storage_enable: bool = False  # remote.storage.enable
    local_retention_ms: int = -2  # local.retention.ms
    local_retention_bytes: int = -2  # local.retention.bytes
    remote_log_copy_disable: bool = False  # remote.log.copy.disable
    remote_log_delete_on_disable: bool = False  # remote.log.delete.on.disable

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return (self.retention_bytes if self.local_retention_bytes == -2
                else self.local_retention_bytes)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, overrides: Mapping[str, object]) -> LogConfig:
        """Return a copy with Kafka topic keys (already parsed to Python values) applied."""
        names = {f.name for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = key.replace(".", "_")
            if name in names:
                changes[name] = value
        return replace(self, **changes) if changes else self
