"""Creating the logs of many new partitions off the event loop (issue 15.5).

A CreateTopics or CreatePartitions of thousands of partitions used to create
every log on the event loop when the metadata was applied (LogManager's
``get_or_create``, from the replica manager): a directory, partition.metadata,
three segment files and, as leader, the leader-epoch checkpoint each, with an
fsync or more apiece: seconds during which no request was answered.

The node that decides the creation (handlers/admin.py, on the active
controller) now creates this node's new logs before it commits the records:
`plan` places them on the loop (the rule of ``get_or_create``: the online dir
with the fewest partitions), `open_planned` creates the files in a worker
thread (no LogManager state touched; the fsyncs of those writes deferred and
replaced by one syncfs(2) of each log dir's filesystem at the end) and `adopt` hands them to the LogManager on the loop, where
the metadata apply finds them. With a log dir offline nothing is planned (the
inline path keeps its placement rules for that case).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.checkpoint import deferred_sync, syncfs
from odradek.storage.log import PartitionLog, log_dir_name
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager


@dataclass(slots=True)
class NewLog:
    topic: str
    partition: int
    topic_id: uuid.UUID
    config: LogConfig
    leader_epoch: int | None  # this node leads from the start: the epoch it leads in
    dir: Path | None = None
    log: PartitionLog | None = None


def plan(lm: LogManager, new: list[NewLog]) -> list[NewLog]:
    """Place the logs that do not exist yet (on the loop); [] with a dir offline."""
    if lm.offline_dirs or not new:
        return []
    online = lm.online_dirs()
    counts = lm.partition_counts()
    planned = []
    for spec in new:
        if lm.get(spec.topic, spec.partition) is not None:
            continue
        spec.dir = min(online, key=lambda d: counts.get(d, 0))
        counts[spec.dir] = counts.get(spec.dir, 0) + 1
        planned.append(spec)
    return planned


def open_planned(planned: list[NewLog]) -> list[NewLog]:
    """Create the files (any thread). A log that fails is left out (the apply
    creates it inline and handles the error as before)."""
    dirs: set[Path] = set()
    with deferred_sync():  # one syncfs per log dir below, not ~5 fsyncs per log
        for spec in planned:
            assert spec.dir is not None
            try:
                plog = PartitionLog.open(spec.dir / log_dir_name(spec.topic, spec.partition),
                                         spec.topic, spec.partition, spec.config, spec.topic_id)
                if spec.leader_epoch is not None:
                    plog.assign_leader_epoch(spec.leader_epoch)
            except OSError:
                continue
            spec.log = plog
            dirs.add(spec.dir)
    for dir in dirs:
        try:
            syncfs(dir)
        except OSError:
            pass  # the first write there will meet it and take the dir offline
    return [spec for spec in planned if spec.log is not None]


def adopt(lm: LogManager, opened: list[NewLog]) -> list[tuple[str, int]]:
    """Give the created logs to the LogManager (on the loop); their keys."""
    keys = []
    for spec in opened:
        assert spec.log is not None and spec.dir is not None
        if lm.get(spec.topic, spec.partition) is not None or spec.dir in lm.offline_dirs:
            spec.log.close()
            continue
        lm.adopt(spec.topic, spec.partition, spec.log, spec.dir)
        keys.append((spec.topic, spec.partition))
    return keys
