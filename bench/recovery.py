"""Start-up (log recovery) time of a partition, measured with the storage classes.

Builds partition logs directly with ``PartitionLog`` (no network), then times
``LogManager.startup()``, which is what a broker runs for its logs at start:

* ``unflushed``: ``--unflushed-gib`` of data past the recovery point and no
  clean-shutdown marker (a crash before any flush): every batch is CRC-checked.
* ``flushed-clean``: ``--flushed-gib`` of data, flushed, checkpointed and
  cleanly shut down: nothing is scanned.
* ``flushed-crash``: the same data after a crash with the recovery point
  checkpointed at the log end: only the segment holding the recovery point is
  scanned (Kafka's rule), so at most one segment.

Each case runs twice: with the files in the page cache, and (if this process
may write /proc/sys/vm/drop_caches) with the cache dropped. Disk use is bounded
by the largest case plus one segment; everything is deleted at the end. Free
space is checked first and the run scales down (and says so) if it does not fit.

    python bench/recovery.py --unflushed-gib 1 --flushed-gib 10 --dir /tmp
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)

GIB = 1024**3
BATCH_RECORDS = 512
RECORD_BYTES = 2000  # ~1 MiB batches
CLUSTER_ID = "YmVuY2gtcmVjb3ZlcnktMDAw"
TOPIC = "bench"


def build_log(root: Path, total_bytes: int, segment_bytes: int) -> LogManager:
    config = LogConfig(segment_bytes=segment_bytes)
    manager = LogManager([root], config, CLUSTER_ID, 1)
    manager.startup()
    plog = manager.get_or_create(TOPIC, 0, uuid.uuid4(), config)
    template = bytearray(build_batch(
        [Record(-1, int(time.time() * 1000), b"key", os.urandom(RECORD_BYTES))
         for _ in range(BATCH_RECORDS)]))
    written = 0
    while written < total_bytes:
        buf = bytearray(template)
        headers = validate_produce_records(buf, len(buf) + 1)
        plog.append_as_leader(buf, headers, 0)
        written += len(buf)
    return manager


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def time_startup(root: Path) -> tuple[float, int, int]:
    manager = LogManager([root], LogConfig(), CLUSTER_ID, 1)
    started = time.monotonic()
    manager.startup()
    elapsed = time.monotonic() - started
    plog = manager.get(TOPIC, 0)
    assert plog is not None
    result = (elapsed, plog.log_end_offset, plog.size_bytes())
    for log in manager.all_logs():
        log.close()
    return result


def crash(manager: LogManager, recovery_point: int | None) -> None:
    """Leave the dir as a crash would: no flush at close, no clean marker."""
    root = manager.log_dirs[0]
    plog = manager.get(TOPIC, 0)
    assert plog is not None
    offsets = {} if recovery_point is None else {(TOPIC, 0): recovery_point}
    OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT).write(offsets)
    for log in manager.all_logs():
        log.close()  # trims active indexes; the data itself is what recovery scans
    (root / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)


def run_case(name: str, base: Path, gib: float, segment_bytes: int) -> list[dict[str, object]]:
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    results = []
    started = time.monotonic()
    manager = build_log(root, int(gib * GIB), segment_bytes)
    build_s = time.monotonic() - started
    plog = manager.get(TOPIC, 0)
    assert plog is not None
    if name == "unflushed":
        crash(manager, 0)
    elif name == "flushed-clean":
        manager.shutdown()
    else:  # flushed-crash
        plog.flush()
        crash(manager, plog.log_end_offset)
    for cache in ("warm", "cold"):
        if cache == "cold" and not drop_caches():
            results.append({"case": name, "cache": "cold", "skipped": "cannot drop caches"})
            continue
        if name == "flushed-clean":
            (root / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":-1}')
        elif name == "unflushed":
            OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT).write({(TOPIC, 0): 0})
        elapsed, leo, size = time_startup(root)
        results.append({"case": name, "cache": cache, "gib": round(size / GIB, 2),
                        "segment_bytes": segment_bytes, "startup_s": round(elapsed, 3),
                        "log_end_offset": leo, "build_s": round(build_s, 1)})
        print(json.dumps(results[-1]), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unflushed-gib", type=float, default=1.0)
    parser.add_argument("--flushed-gib", type=float, default=10.0)
    parser.add_argument("--segment-bytes", type=int, default=GIB)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    base = Path(args.dir) / f"odradek-recovery-bench-{os.getpid()}"
    base.mkdir(parents=True)
    free = shutil.disk_usage(base).free
    need = max(args.unflushed_gib, args.flushed_gib) * GIB + args.segment_bytes
    flushed = args.flushed_gib
    if need > free * 0.8:
        flushed = max(0.1, (free * 0.8 - args.segment_bytes) / GIB)
        print(f"only {free / GIB:.1f} GiB free: scaling the flushed case to {flushed:.1f} GiB")
    try:
        run_case("unflushed", base, args.unflushed_gib, args.segment_bytes)
        run_case("flushed-clean", base, flushed, args.segment_bytes)
        run_case("flushed-crash", base, flushed, args.segment_bytes)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
