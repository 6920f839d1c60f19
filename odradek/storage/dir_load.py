"""Loading every log of one log dir at start-up (``LogManager.startup``).

The clean-shutdown marker (``.kafka_cleanshutdown``, storage/log_dir.py)'s
presence at start-up says every log of the dir was flushed and checkpointed
at shutdown, so no log is recovered (recovery points are taken as the log end
offsets); it is removed once the logs are loaded. Without it, each log
recovers from its checkpointed recovery point (0 when the checkpoint has no
entry for it), so start-up time follows the unflushed tail.

Logs are opened ``num.recovery.threads.per.data.dir`` at a time (Kafka's
key): after a crash only logs with an unflushed tail are scanned
(log_loader.py), so most cost what a clean load costs. Progress goes to the
log and to a ``LoadProgress`` (load_progress.py). ``-delete`` and ``-future``
dirs (a deletion or a move that a restart cut short) are removed; ``-stray``
dirs and the KRaft metadata log are left alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.load_progress import LoadProgress
from odradek.storage.log import PartitionLog, read_partition_metadata
from odradek.storage.log_checkpoints import read_checkpoint
from odradek.storage.log_config import LogConfig
from odradek.storage.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    CLUSTER_METADATA_TOPIC,
    DELETE_SUFFIX,
    FUTURE_SUFFIX,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    STRAY_SUFFIX,
    InconsistentBrokerMetadata,
    parse_log_dir_name,
)

# The log manager's logger: these lines are part of its start-up.
log = logging.getLogger("odradek.storage.log_manager")


@dataclass(frozen=True, slots=True)
class DirLoad:
    """How to open the logs of a dir."""

    default_config: LogConfig
    config_for: Callable[[str], LogConfig] | None
    clock_ms: Callable[[], int]
    recovery_threads: int
    progress: LoadProgress


def load_dir(
    dir: Path,
    how: DirLoad,
    loaded: Mapping[tuple[str, int], Path],
    adopt: Callable[[tuple[str, int], PartitionLog, Path], None],
) -> bool:
    """Open every log of ``dir`` and hand each to ``adopt``; returns whether the
    dir had been shut down cleanly. ``loaded`` maps the logs already found in
    other dirs to their dir: a log in two dirs is InconsistentBrokerMetadata."""
    marker = dir / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    recovery_points = read_checkpoint(dir, RECOVERY_POINT_CHECKPOINT)
    start_offsets = read_checkpoint(dir, LOG_START_OFFSET_CHECKPOINT)
    high_watermarks = read_checkpoint(dir, HIGH_WATERMARK_CHECKPOINT)
    found: list[tuple[tuple[str, int], Path]] = []
    for entry in sorted(os.scandir(dir), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        name = entry.name
        if name.endswith((DELETE_SUFFIX, FUTURE_SUFFIX)):
            # a deleted log, or an unfinished move (the source is still whole)
            shutil.rmtree(entry.path, ignore_errors=True)
            continue
        if name.endswith(STRAY_SUFFIX):
            continue
        parsed = parse_log_dir_name(name)
        if parsed is None or parsed[0] == CLUSTER_METADATA_TOPIC:
            continue
        if parsed in loaded:
            raise InconsistentBrokerMetadata(f"{name} exists in both {loaded[parsed]} and {dir}")
        found.append((parsed, Path(entry.path)))
    progress = how.progress
    progress.found(len(found))
    started = time.monotonic()

    def open_one(item: tuple[tuple[str, int], Path]) -> PartitionLog:
        parsed, path = item
        begun = time.monotonic()
        config = how.default_config
        if how.config_for is not None:
            config = how.config_for(parsed[0])
        plog = PartitionLog.open(
            path, parsed[0], parsed[1], config, read_partition_metadata(path),
            clock_ms=how.clock_ms,
            recovery_point=recovery_points.get(parsed, 0),
            log_start_offset=start_offsets.get(parsed),
            high_watermark=high_watermarks.get(parsed),
            had_clean_shutdown=clean,
        )
        recovered = plog.recovered_on_load_bytes > 0 or plog.truncated_on_load_bytes > 0
        if recovered:
            log.info(
                "loaded %s from %s in %.0f ms (recovered after an unclean shutdown: "
                "%d bytes CRC-checked; log end offset %d, recovery point %d, truncated "
                "%d bytes)", path.name, dir, (time.monotonic() - begun) * 1000,
                plog.recovered_on_load_bytes, plog.log_end_offset, plog.recovery_point,
                plog.truncated_on_load_bytes,
            )
        progress.loaded(dir, plog.recovered_on_load_bytes, recovered)
        return plog

    if how.recovery_threads > 1 and len(found) > 1:
        with ThreadPoolExecutor(how.recovery_threads, "log-recovery") as pool:
            plogs = list(pool.map(open_one, found))
    else:
        plogs = [open_one(item) for item in found]
    for (parsed, _), plog in zip(found, plogs):
        adopt(parsed, plog, dir)
    progress.seconds += time.monotonic() - started
    progress.log_line(
        f"loaded the logs of {dir} in {(time.monotonic() - started) * 1000:.0f} ms "
        f"({'clean shutdown' if clean else 'unclean shutdown'}, "
        f"{how.recovery_threads} thread(s)):")
    if clean:
        marker.unlink()
        fsync_dir(dir)
    return clean
