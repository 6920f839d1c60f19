"""The broker's tiered-storage settings (Kafka's keys), read once from the BrokerConfig.

`rsm.config.url` is any fsspec URL; unset, the remote tier is the directory
`remote-tier` beside the first log dir (so the feature works with no server; brokers
of one cluster on one machine must be given a shared URL to read each other's
segments). `rsm.config.fs.<option>` keys go to the fsspec filesystem's constructor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..broker_config_defs import RSM_FS_PREFIX
from ..config import BrokerConfig

__all__ = ["REMOTE_LOG_METADATA_TOPIC", "RemoteTierSettings"]

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


def _fs_value(raw: str) -> object:
    """fsspec options come as strings; booleans and numbers are converted."""
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(raw)
    except ValueError:
        return raw


@dataclass(frozen=True, slots=True)
class RemoteTierSettings:
    enabled: bool
    url: str
    fs_options: dict[str, Any] = field(default_factory=dict)
    task_interval_ms: int = 30000
    copier_threads: int = 10
    expiration_threads: int = 10
    reader_threads: int = 10
    fetch_max_wait_ms: int = 500
    copy_max_bytes_per_second: int = 2**63 - 1
    fetch_max_bytes_per_second: int = 2**63 - 1
    index_cache_bytes: int = 1 << 30
    metadata_partitions: int = 50
    metadata_replication_factor: int = 3

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> RemoteTierSettings:
        url = config.get("rsm.config.url")
        if not url:
            url = (Path(config.log_dirs[0]).resolve().parent / "remote-tier").as_uri()
        options = {k[len(RSM_FS_PREFIX):]: _fs_value(v) for k, v in config.ignored.items()
                   if k.startswith(RSM_FS_PREFIX)}
        return cls(
            enabled=bool(config.get("remote.log.storage.system.enable")),
            url=str(url),
            fs_options=options,
            task_interval_ms=config.get("remote.log.manager.task.interval.ms"),
            copier_threads=config.get("remote.log.manager.copier.thread.pool.size"),
            expiration_threads=config.get("remote.log.manager.expiration.thread.pool.size"),
            reader_threads=config.get("remote.log.reader.threads"),
            fetch_max_wait_ms=config.get("remote.fetch.max.wait.ms"),
            copy_max_bytes_per_second=config.get(
                "remote.log.manager.copy.max.bytes.per.second"),
            fetch_max_bytes_per_second=config.get(
                "remote.log.manager.fetch.max.bytes.per.second"),
            index_cache_bytes=config.get("remote.log.index.file.cache.total.size.bytes"),
            metadata_partitions=config.get(
                "rlmm.config.remote.log.metadata.topic.num.partitions"),
            metadata_replication_factor=config.get(
                "rlmm.config.remote.log.metadata.topic.replication.factor"),
        )
