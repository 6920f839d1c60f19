"""DescribeLogDirs: which partitions live in which log dir, and their sizes;
AlterReplicaLogDirs: move a replica to another log dir of this broker.

DescribeLogDirs v4 (KIP-827) adds each dir's total and usable bytes; v5 adds
`is_cordoned` (KIP-1066), always false: odradek has no cordoned dirs. A replica
being moved shows twice: in its current dir, and in the destination as the
future replica (`is_future_key`, its lag behind the current log's end)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..context import RequestContext
from ..services import LogDirServices


async def handle_describe_log_dirs(
    broker: LogDirServices, ctx: RequestContext, req: Any
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
    for (topic, index), (future, fdir) in sorted(broker.log_manager.futures.items()):
        moving = rm.partitions.get((topic, index))
        if moving is None or (wanted is not None and (topic, index) not in wanted):
            continue
        by_dir.setdefault(str(fdir), {}).setdefault(topic, []).append(
            {"partition_index": index, "partition_size": future.size_bytes(),
             "offset_lag": max(moving.log.log_end_offset - future.log_end_offset, 0),
             "is_future_key": True})
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


# -- AlterReplicaLogDirs ------------------------------------------------------------------

LOG_DIR_NOT_FOUND = 57
REPLICA_NOT_AVAILABLE = 9
UNKNOWN_TOPIC_OR_PARTITION = 3
KAFKA_STORAGE_ERROR = 56


def _dir_named(broker: LogDirServices, path: str) -> Path | None:
    for d in broker.log_dirs:
        if str(d) == path or os.path.abspath(d) == os.path.abspath(path):
            return d
    return None


async def handle_alter_replica_log_dirs(
    broker: LogDirServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    """Move replicas of this broker to other log dirs (broker/log_dir_moves.py), as
    Kafka's ReplicaManager.alterReplicaLogDirs answers: LOG_DIR_NOT_FOUND for a path
    that is not one of `log.dirs`, KAFKA_STORAGE_ERROR for an offline dir or replica,
    UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have,
    REPLICA_NOT_AVAILABLE for one this broker does not host."""
    rm = broker.replica_manager
    lm = broker.log_manager
    image = broker.image
    results: dict[str, list[dict[str, Any]]] = {}
    for d in req.dirs:
        dest = _dir_named(broker, d.path)
        for t in d.topics:
            for p in t.partitions:
                results.setdefault(t.name, []).append({
                    "partition_index": p,
                    "error_code": _move(broker, rm, lm, image, dest, t.name, int(p))})
    return {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in results.items()]}


def alter_replica_log_dirs_errors(req: Any, code: int, message: str) -> dict[str, Any]:
    """A refused AlterReplicaLogDirs (no ALTER on the cluster): every partition asked
    for answers the error, as Kafka's does (the response has no top-level code)."""
    results: dict[str, list[dict[str, Any]]] = {}
    for d in req.dirs:
        for t in d.topics:
            results.setdefault(t.name, []).extend(
                {"partition_index": p, "error_code": code} for p in t.partitions)
    return {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in results.items()]}


def _move(broker: LogDirServices, rm: Any, lm: Any, image: Any, dest: Path | None,
          topic: str, index: int) -> int:
    if dest is None:
        return LOG_DIR_NOT_FOUND
    if dest in lm.offline_dirs:
        return KAFKA_STORAGE_ERROR
    known = image.topics_by_name.get(topic)
    if known is None or index not in known.partitions:
        return UNKNOWN_TOPIC_OR_PARTITION
    part = rm.get(topic, index)
    if part is None:
        return REPLICA_NOT_AVAILABLE
    if part.log.offline:
        return KAFKA_STORAGE_ERROR
    if lm.dir_of(part.log) == dest:
        broker.log_dir_moves.cancel((topic, index))  # already there: stop any other move
        return 0
    try:
        broker.log_dir_moves.start(part, dest)
    except OSError:
        return KAFKA_STORAGE_ERROR
    return 0
