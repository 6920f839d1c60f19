"""The node deciding a large creation makes its own new logs off the loop first.

CreateTopics and CreatePartitions on the active controller (handlers/admin.py):
between the controller's decision (the records) and their commit, the
partitions this node will host are created in a worker thread
(storage/new_logs.py), so that applying the records finds them and the event
loop goes on answering requests (issue 15.5). Below PRECREATE_MIN_LOGS new
logs the apply creates them inline, as before. If the commit fails the logs
made for it are deleted again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..metadata import records as R
from ..metadata.image import MetadataImage, apply
from ..replication.replica_manager import ReplicaManager
from ..storage import new_logs
from ..storage.log_config import LogConfig

T = TypeVar("T")

PRECREATE_MIN_LOGS = 64


async def commit_with_logs(
    node_id: int,
    replica_manager: ReplicaManager,
    image: MetadataImage,
    records: list[R.MetadataRecord],
    commit: Callable[[list[R.MetadataRecord]], Awaitable[T]],
) -> T:
    """``commit(records)`` once this node's new logs exist."""
    created = await _precreate(node_id, replica_manager, image, records)
    try:
        return await commit(records)
    except BaseException:
        for topic, partition in created:
            if replica_manager.get(topic, partition) is None:
                replica_manager.log_manager.delete(topic, partition)
        raise


async def _precreate(
    node_id: int, rm: ReplicaManager, image: MetadataImage, records: list[R.MetadataRecord]
) -> list[tuple[str, int]]:
    mine = [r for r in records if r["type"] == R.PARTITION and node_id in r["replicas"]]
    if len(mine) < PRECREATE_MIN_LOGS:
        return []
    after = apply(image, records, image.offset)
    configs: dict[str, LogConfig] = {}
    specs = []
    for r in mine:
        topic = after.topics_by_id.get(uuid.UUID(r["topic_id"]))
        if topic is None:
            continue
        if topic.name not in configs:
            configs[topic.name] = rm.log_config_for(after, topic.name)
        specs.append(new_logs.NewLog(
            topic.name, r["partition"], topic.topic_id, configs[topic.name],
            r["leader_epoch"] if r["leader"] == node_id else None))
    planned = new_logs.plan(rm.log_manager, specs)
    if not planned:
        return []
    opened = await asyncio.to_thread(new_logs.open_planned, planned)
    return new_logs.adopt(rm.log_manager, opened)
