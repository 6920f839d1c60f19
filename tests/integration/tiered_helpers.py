"""Helpers of the tiered-storage tests: broker settings, ListOffsets at a chosen
version through odradek's protocol client, and the remote tier on disk."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from odradek.protocol.api import ApiKey
from odradek.protocol.client import KafkaChannel

HOST = "127.0.0.1"

# Short intervals so copies, local deletion and remote retention happen in seconds.
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
}


def tiered_topic(**extra: str) -> dict[str, str]:
    config = {"remote.storage.enable": "true", "segment.bytes": "4096",
              "local.retention.bytes": "8192", "retention.bytes": "-1",
              "file.delete.delay.ms": "600000"}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return config


def list_offsets(port: int, topic: str, timestamp: int, version: int,
                 partition: int = 0) -> tuple[int, int]:
    """(error code, offset) of one ListOffsets partition at `version`."""

    async def go() -> Any:
        ch = KafkaChannel(HOST, port)
        try:
            data: dict[str, Any] = {
                "replica_id": -1, "isolation_level": 0,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": partition, "current_leader_epoch": -1,
                     "timestamp": timestamp}]}]}
            if version >= 10:
                data["timeout"] = 5000
            return await ch.request(ApiKey.LIST_OFFSETS, version, data)
        finally:
            ch.close()

    resp = asyncio.run(go())
    p = resp.topics[0].partitions[0]
    return int(getattr(p.error_code, "value", p.error_code)), int(p.offset)


def remote_partition_dir(remote_root: Path, topic: str, partition: int = 0) -> Path | None:
    found = sorted(remote_root.glob(f"{topic}-*/{partition}"))
    return found[0] if found else None


def remote_objects(remote_root: Path, topic: str, suffix: str) -> list[Path]:
    d = remote_partition_dir(remote_root, topic)
    return sorted(d.glob(f"*.{suffix}")) if d is not None else []


def local_segment_bytes(partition_dir: Path, base: str) -> bytes:
    """A local segment's bytes, whether retention has renamed it `.deleted` yet or not
    (it may do so between two looks)."""
    for _ in range(3):
        for name in (f"{base}.log", f"{base}.log.deleted"):
            try:
                return (partition_dir / name).read_bytes()
            except FileNotFoundError:
                continue
    raise FileNotFoundError(f"{partition_dir}/{base}.log")


def wait_copies_settled(port: int, topic: str, timeout: float = 60.0) -> int:
    """Wait until the last tiered offset (ListOffsets -5) has something and has not
    moved for a second (several task intervals): the copies of the closed segments are
    done. Returns it."""
    import time

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        now = list_offsets(port, topic, -5, 9)[1]
        if now >= 0 and now == last:
            return now
        last = now
        time.sleep(1.0)
    raise AssertionError(f"copies of {topic} did not settle in {timeout} s")
