"""DescribeLogDirs: which partitions live in which log dir, and their sizes.

v4 (KIP-827) adds each dir's total and usable bytes; v5 adds `is_cordoned`
(KIP-1066), always false: odradek has no cordoned dirs."""

from __future__ import annotations

import os
from typing import Any

from ..context import RequestContext
from ..services import LogDirServices


async def handle_describe_log_dirs(
    broker: "LogDirServices", ctx: RequestContext, req: Any
) -> dict[str, Any]:
    rm = broker.replica_manager
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {str(d): {} for d in broker.log_dirs}
    offline = {str(d) for d in broker.log_manager.offline_dirs}
    for (topic, index), part in sorted(rm.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        if part.log.offline:
            continue
        d = str(broker.log_manager.dir_of(part.log))
        by_dir.setdefault(d, {}).setdefault(topic, []).append(
            {"partition_index": index, "partition_size": part.log.size_bytes(),
             "offset_lag": 0, "is_future_key": False}
        )
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        if d in offline:
            # Kafka's answer for an offline dir: the error, no partitions, no sizes.
            results.append({"error_code": 56, "log_dir": d, "topics": [],  # KAFKA_STORAGE_ERROR
                            "total_bytes": -1, "usable_bytes": -1})
            continue
        results.append(
            {
                "error_code": 0,
                "log_dir": d,
                "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"error_code": 0, "results": results}
