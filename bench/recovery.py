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

Many partitions (issue 15.4): ``--partitions N`` instead times the start-up of
N partitions holding one record each, everything flushed and the recovery
points checkpointed at the log ends, after a clean stop and after kill -9:

* ``--partitions N --broker``: a real broker process (tests/integration/
  broker_proc.py, run from the checkout given by ``--repo``, default this
  one): the topic is created and written through the broker, which is then
  stopped cleanly, started (timed: process start to port open, and the log
  load the broker reports), killed with SIGKILL and started again (timed).
* ``--partitions N``: the storage classes only (LogManager.startup), the logs
  built directly: clean load vs load after a crash (active segments' indexes
  left preallocated, no clean-shutdown marker).

``--segments K`` gives each partition K records in K segments (each record
bigger than ``segment.bytes``): K - 1 closed segments, whose ``.log`` files
are opened on use and kept in the LRU of open segment files
(storage/open_files.py). Since issue 15.3's second step active segments'
``.log`` files are in that LRU too and no index holds a descriptor, so N is
not bounded by the open-files limit (50,000 partitions run under this
container's hard limit of 20,000, which cannot be raised without
CAP_SYS_RESOURCE). The broker mode prints the creation and the fill times
apart, and after each start the broker's RSS and open descriptors.

    python bench/recovery.py --partitions 5000 --broker
    python bench/recovery.py --partitions 4000 --segments 10 --broker
    python bench/recovery.py --partitions 5000 --segments 10
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


# -- many partitions -----------------------------------------------------------------

def _load_seconds(root: Path, config: LogConfig) -> tuple[float, int, int]:
    manager = LogManager([root], config, CLUSTER_ID, 1)
    started = time.monotonic()
    manager.startup()
    elapsed = time.monotonic() - started
    progress = manager.load_progress
    for log in manager.all_logs():
        log.close()
    return elapsed, progress.partitions_loaded, progress.partitions_recovered


def partitions_storage(base: Path, count: int, segments: int) -> None:
    """N partitions of ``segments`` one-record segments built with the storage
    classes; clean vs crash load."""
    import resource

    from odradek.storage import new_logs
    from odradek.storage.open_files import SEGMENT_FILES, derived_max_open

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    bound = derived_max_open(soft, 128)
    SEGMENT_FILES.configure(bound)
    root = base / "logs"
    config = LogConfig(segment_bytes=100 if segments > 1 else GIB)
    # The build is not measured and no crash happens during it: no fsyncs (a
    # roll per record would cost one each on a loaded disk). Restored below.
    real_fsync = os.fsync
    os.fsync = lambda fd: None
    manager = LogManager([root], config, CLUSTER_ID, 1)
    manager.startup()
    started = time.monotonic()
    specs = [new_logs.NewLog(TOPIC, p, uuid.uuid4(), config, 0) for p in range(count)]
    new_logs.adopt(manager, new_logs.open_planned(new_logs.plan(manager, specs)))
    for plog in manager.all_logs():
        for _ in range(segments):
            buf = bytearray(build_batch([Record(-1, int(time.time() * 1000), b"k",
                                                b"v" * 100)]))
            plog.append_as_leader(buf, validate_produce_records(buf, len(buf) + 1), 0)
    manager.shutdown()
    os.fsync = real_fsync
    os.sync()
    print(json.dumps({"partitions": count, "segments_per_partition": segments,
                      "lru_bound": bound,
                      "build_s": round(time.monotonic() - started, 1)}), flush=True)
    for run in range(2):
        (root / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":-1}')
        clean = _load_seconds(root, config)
        # A crash: the logs opened (active indexes preallocated), checkpointed, not closed.
        crashed = LogManager([root], config, CLUSTER_ID, 1)
        crashed.startup()
        crashed.checkpoint_recovery_points()
        for plog in crashed.all_logs():
            for segment in plog.segments:
                segment.close_files()
        crash_load = _load_seconds(root, config)
        print(json.dumps({"partitions": count, "segments": segments, "run": run + 1,
                          "mode": "storage", "open_fds": len(os.listdir("/proc/self/fd")),
                          "clean_load_s": round(clean[0], 2), "kill9_load_s":
                          round(crash_load[0], 2), "ratio": round(crash_load[0] / clean[0], 2),
                          "recovered_after_kill9": crash_load[2]}), flush=True)
        # the crash load checkpointed nothing and left no marker: back to a clean state
        again = LogManager([root], config, CLUSTER_ID, 1)
        again.startup()
        again.shutdown()


def partitions_broker(base: Path, count: int, repo: Path, segments: int = 1,
                      runs: int = 2) -> None:
    """N one-record partitions in a real broker: clean vs kill -9 start-up."""
    import re
    import sys

    sys.path.insert(0, str(repo))
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions, NewTopic

    from tests.integration.broker_proc import BrokerProcess  # the checkout under test
    from tests.integration.clients import ck_admin

    # The broker raises its soft limit to the hard one; the logs' descriptors
    # are bounded by the LRU whatever N (broker/fd_budget.py).
    limit: dict[str, object] = {}
    proc = BrokerProcess(data_dir=base / "data", log_path=base / "broker.log",
                         ready_timeout_s=3600, **limit,  # type: ignore[arg-type]
                         overrides={"log.flush.interval.messages": 1,
                                    "log.flush.offset.checkpoint.interval.ms": 500})
    summary = re.compile(r"loaded the logs of \S+ in (\d+) ms")
    try:
        proc.start()
        started = time.monotonic()
        admin = ck_admin(proc.bootstrap, **{"socket.timeout.ms": 300_000})
        topic_config = {"segment.bytes": "100"} if segments > 1 else {}
        # At most 10,000 partitions per request (Kafka's controller limit), and
        # a 10,000-partition request fails today (10,001 metadata records, one
        # over the raft append's bound): the topic is created with the first
        # 5,000, then grown 5,000 at a time.
        step = 5_000
        [f] = admin.create_topics([NewTopic(TOPIC, min(count, step), 1, config=topic_config)],
                                  operation_timeout=3600, request_timeout=3600).values()
        f.result(timeout=3600)
        steps = [round(time.monotonic() - started, 1)]
        for total in range(2 * step, count + step, step):
            t = time.monotonic()
            [f] = admin.create_partitions([NewPartitions(TOPIC, min(total, count))],
                                          operation_timeout=3600,
                                          request_timeout=3600).values()
            f.result(timeout=3600)
            steps.append(round(time.monotonic() - t, 1))
        created_s = time.monotonic() - started
        print(json.dumps({"partitions": count, "create_s": round(created_s, 1),
                          "create_steps_s": steps, **_usage(proc.pid)}), flush=True)
        p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 50,
                      **({"batch.num.messages": 1} if segments > 1 else {})})
        # flush() counts only what is still queued: a delivery that failed (the
        # producer's metadata not yet showing a partition the topic grew by, in
        # the 50,000 run: 6,364 partitions left empty) is counted and sent again.
        todo = [n % count for n in range(count * segments)]
        failed: list[int] = []
        errors = 0
        for _ in range(5):
            for n, partition in enumerate(todo):
                p.produce(TOPIC, b"v" * 200, partition=partition,
                          on_delivery=lambda err, msg: failed.append(msg.partition())
                          if err is not None else None)
                if n % 1000 == 0:
                    p.poll(0)
            assert p.flush(600) == 0
            if not failed:
                break
            errors += len(failed)
            todo = list(failed)
            failed.clear()
            time.sleep(5)  # the producer's metadata catches up
        print(json.dumps({"partitions": count, "create_and_fill_s":
                          round(time.monotonic() - started, 1), "fill_s":
                          round(time.monotonic() - started - created_s, 1),
                          "deliveries_failed_and_resent": errors, "unsent": len(failed),
                          **_usage(proc.pid)}), flush=True)
        time.sleep(2)  # recovery-point checkpoints
        proc.stop(timeout_s=1800)
        for run in range(runs):
            t = time.monotonic()
            proc.start()
            clean_s = time.monotonic() - t
            clean_usage = _usage(proc.pid)
            proc.kill9()
            t = time.monotonic()
            proc.start()
            kill9_s = time.monotonic() - t
            kill9_usage = _usage(proc.pid)
            loads = [int(m) for m in summary.findall(proc.log_path.read_text(errors="replace"))]
            recovered = re.findall(r"(\d+) recovered after an unclean shutdown",
                                   proc.log_path.read_text(errors="replace"))
            print(json.dumps({"partitions": count, "segments": segments, "run": run + 1,
                              "mode": "broker",
                              "clean_start_s": round(clean_s, 2), "kill9_start_s":
                              round(kill9_s, 2), "ratio": round(kill9_s / clean_s, 2),
                              "log_load_ms_clean_kill9": loads[-2:],
                              "recovered_after_kill9": int(recovered[-1]) if recovered
                              else None, "clean": clean_usage, "kill9": kill9_usage,
                              "loadavg": os.getloadavg()[0]}), flush=True)
            t = time.monotonic()
            proc.stop(timeout_s=1800)
            print(json.dumps({"partitions": count, "run": run + 1, "clean_stop_s":
                              round(time.monotonic() - t, 2)}), flush=True)
    finally:
        proc.close()


def _usage(pid: int | None) -> dict[str, int]:
    """RSS (MiB) and open descriptors of the broker process, from /proc."""
    if pid is None:
        return {}
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        rss_kib = int(next(line.split()[1] for line in status.splitlines()
                           if line.startswith("VmRSS:")))
        return {"rss_mib": rss_kib // 1024, "open_fds": len(os.listdir(f"/proc/{pid}/fd"))}
    except (OSError, StopIteration, ValueError):
        return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unflushed-gib", type=float, default=1.0)
    parser.add_argument("--flushed-gib", type=float, default=10.0)
    parser.add_argument("--segment-bytes", type=int, default=GIB)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--partitions", type=int, default=0)
    parser.add_argument("--segments", type=int, default=1,
                        help="records per partition, one segment each")
    parser.add_argument("--broker", action="store_true")
    parser.add_argument("--runs", type=int, default=2, help="broker mode: start pairs timed")
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    args = parser.parse_args()
    if args.partitions:
        base = Path(args.dir) / f"odradek-recovery-bench-{os.getpid()}"
        base.mkdir(parents=True)
        try:
            if args.broker:
                partitions_broker(base, args.partitions, Path(args.repo), args.segments,
                                  args.runs)
            else:
                partitions_storage(base, args.partitions, args.segments)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return 0
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
