"""The three offset checkpoints of each log dir, taken and written.

``recovery-point-offset-checkpoint`` lists every online log's recovery point,
``replication-offset-checkpoint`` its high watermark and
``log-start-offset-checkpoint`` its log start offset where that is above the
first segment's base offset (Kafka's filter). The file format is
storage/checkpoint.py's. The broker's background tasks (broker/log_tasks.py)
write them every ``log.flush.offset.checkpoint.interval.ms``,
``replica.high.watermark.checkpoint.interval.ms`` and
``log.flush.start.offset.checkpoint.interval.ms``; ``LogManager.shutdown``
writes all three after the final flush and then the clean-shutdown marker.

A checkpoint is taken in two steps: ``snapshot`` reads the offsets (on the
event loop, where the logs change) and ``write_checkpoints`` writes them
anywhere (it touches no shared state), so the writes and their fsyncs can
run on a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from odradek.storage.checkpoint import CorruptCheckpoint, OffsetCheckpointFile
from odradek.storage.log import PartitionLog

log = logging.getLogger("odradek.storage.log_manager")

# Checkpoint writes: (dir, file, offsets) per online dir.
CheckpointWrites = list[tuple[Path, Path, dict[tuple[str, int], int]]]


def read_checkpoint(dir: Path, name: str) -> dict[tuple[str, int], int]:
    """The offsets of ``dir/name``; empty (and a warning) when it is unreadable."""
    try:
        return OffsetCheckpointFile(dir / name).read()
    except (CorruptCheckpoint, UnicodeDecodeError) as e:
        log.warning("ignoring %s: %s", dir / name, e)
        return {}


def snapshot(
    name: str,
    online_dirs: Iterable[Path],
    placed: Iterable[tuple[tuple[str, int], Path, PartitionLog]],
    value: Callable[[PartitionLog], int | None],
) -> CheckpointWrites:
    """The ``name`` checkpoint of every online dir: ``value`` of each online log
    placed in it (None leaves the log out)."""
    by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in online_dirs}
    for key, dir, plog in placed:
        if dir in by_dir and not plog.offline:
            offset = value(plog)
            if offset is not None:
                by_dir[dir][key] = offset
    return [(dir, dir / name, offsets) for dir, offsets in by_dir.items()]


def log_start_offset_to_checkpoint(plog: PartitionLog) -> int | None:
    """Kafka's filter: only a log start offset above the first segment's base."""
    if plog.log_start_offset > plog.first_segment_base_offset:
        return plog.log_start_offset
    return None


def write_checkpoints(writes: CheckpointWrites) -> list[tuple[Path, OSError]]:
    """Write each file atomically; returns the (dir, error) of failed writes."""
    errors = []
    for dir, path, offsets in writes:
        try:
            OffsetCheckpointFile(path).write(offsets)
        except OSError as e:
            errors.append((dir, e))
    return errors
