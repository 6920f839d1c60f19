"""The tiered-storage offsets of a partition for `odradek topics describe`: ListOffsets
v9 to the partition's leader for -2 (log start, remote tier included), -4 (local log
start), -5 (last offset in the remote tier) and -1 (end)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import api

from .client_config import CommandConfig
from .connection import Connection

VERSIONS: dict[int, int] = {int(api.ApiKey.LIST_OFFSETS): 9}
SPECS = (("LogStartOffset", -2), ("LocalLogStartOffset", -4), ("LatestTieredOffset", -5),
         ("EndOffset", -1))


def tiered_offsets(address: str, topic: str, partition: int, timeout_s: float,
                   config: CommandConfig | None) -> str:
    """`Name: offset` pairs, tab-separated ("?" for an offset the leader refused)."""
    conn = Connection(address, timeout_s, VERSIONS, b"odradek-topics", config=config)
    try:
        out = []
        for name, spec in SPECS:
            resp: Any = conn.call(api.ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [{
                    "name": topic, "partitions": [{
                        "partition_index": partition, "current_leader_epoch": -1,
                        "timestamp": spec}]}]})
            p = resp.topics[0].partitions[0]
            code = int(getattr(p.error_code, "value", p.error_code))
            out.append(f"{name}: {p.offset if code == 0 else '?'}")
        return "\t".join(out)
    finally:
        conn.close()
