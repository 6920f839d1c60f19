"""The log cleaner: its throughput, and produce/fetch latency while it cleans.

    python bench/cleaner.py            # 128 MiB throughput log, 64 MiB dirty topic
    python bench/cleaner.py --quick    # 16 MiB / 16 MiB

Part 1, throughput (the storage classes in this process, no network): a
compacted log of ``--log-mib`` MiB of updates (100-byte values, half random, over
``--keys`` keys, batches of 200 records) is built with ``PartitionLog`` and
cleaned once with ``clean_now``: offset map, recopy, swap, as the broker's
worker does it. Reported per codec (none, lz4): MB/s of log processed (bytes
read to build the map plus bytes read to recopy, Kafka's "MB/sec" in its
cleaner log line) and MB/s of log cleaned (log bytes / wall time).

Part 2, latency (one real broker, ``python -m odradek server``): a probe topic
(cleanup.policy=delete) and a compacted topic filled with ``--dirty-mib`` MiB of
updates while ``min.compaction.lag.ms`` holds the cleaner off. The probe sends
one Produce (acks=1, one 100-byte record) and one Fetch (offset 0, 64 KiB, no
wait) every 5 ms on two persistent connections, and times each answer.

  idle       ``--idle-s`` seconds before and ``--idle-s`` after the cleaning
             (pooled: the machine's load drifts), nothing to clean;
  cleaning   ``min.compaction.lag.ms`` set to 0 (IncrementalAlterConfigs), the
             probe runs until the broker logs that the cleaning ended.

p50/p99/max of each, and cleaning/idle ratios; the broker's own "cleaned"
line gives the cleaner's MB/s under the probe load, its "cleaner worker" line
where the worker's CPU priority comes from (SCHED_IDLE, idle cgroup).
``--override key=value`` passes a broker config (e.g.
``odradek.log.cleaner.cgroup.idle=false`` to compare without the idle cgroup).
Results: stdout and bench/results/cleaner-<time>.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.protocol import api, entities
from odradek.protocol.records import Compression, Record, build_batch, validate_produce_records
from odradek.storage.cleaner.manager import CleanerConfig, clean_now
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Wire, create_topic
from tests.integration.compaction_helpers import produce_updates

MIB = 1024 * 1024
VALUE_BYTES = 100
BATCH_RECORDS = 200
PROBE_INTERVAL_S = 0.005
# Values that do not compress away: half random bytes, half text.
VALUES = [os.urandom(VALUE_BYTES // 2) + b"x" * (VALUE_BYTES // 2) for _ in range(1024)]


# -- part 1 --------------------------------------------------------------------------------


def build_log(root: Path, log_bytes: int, keys: int, codec: int) -> PartitionLog:
    config = LogConfig(segment_bytes=64 * MIB, cleanup_policy="compact")
    plog = PartitionLog.open(root / "bench-0", "bench", 0, config, uuid.uuid4())
    n = 0
    now = int(time.time() * 1000)
    while plog.size_bytes() < log_bytes:
        records = [Record(-1, now, b"key-%08d" % ((n + i) * 7919 % keys),
                          VALUES[(n + i) % len(VALUES)]) for i in range(BATCH_RECORDS)]
        n += BATCH_RECORDS
        buf = bytearray(build_batch(records, compression=codec))
        plog.append_as_leader(buf, validate_produce_records(buf, 1 << 30), 0)
    plog.roll()
    plog.flush()
    plog.high_watermark = plog.log_end_offset
    return plog


def throughput(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for codec in (Compression.NONE, Compression.LZ4):
        with tempfile.TemporaryDirectory(prefix="bench-cleaner-") as tmp:
            plog = build_log(Path(tmp), args.log_mib * MIB, args.keys, codec)
            size = plog.size_bytes()
            started = time.monotonic()
            _, result = clean_now(plog, replace(CleanerConfig(), threads=1), None,
                                  int(time.time() * 1000))
            seconds = time.monotonic() - started
            s = result.stats
            processed = s.bytes_read + s.map_bytes_read
            row = {
                "codec": Compression(codec).name.lower(), "log_mib": size / MIB,
                "seconds": seconds, "processed_mb_s": processed / MIB / seconds,
                "cleaned_log_mb_s": size / MIB / seconds, "records": s.records_read,
                "records_per_s": s.records_read / seconds,
                "map_seconds": s.map_seconds, "recopy_seconds": s.clean_seconds,
                "kept_mib": s.bytes_written / MIB,
            }
            plog.close()
        out.append(row)
        print(f"throughput {row['codec']:>4}: {row['log_mib']:.0f} MiB log cleaned in "
              f"{seconds:.1f} s: {row['processed_mb_s']:.1f} MB/s processed, "
              f"{row['cleaned_log_mb_s']:.1f} MB/s of log, "
              f"{row['records_per_s'] / 1000:.0f}k records/s", flush=True)
    return out


# -- part 2 --------------------------------------------------------------------------------


def _produce_body(topic: str, batch: bytes) -> bytes:
    cls = api.request_class(api.ApiKey.PRODUCE, 9)
    buf = io.BytesIO()
    from kio.serial import entity_writer

    entity_writer(cls)(buf, entities.build(cls, {
        "transactional_id": None, "acks": 1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    return buf.getvalue()


def _fetch_body(topic: str) -> bytes:
    cls = api.request_class(api.ApiKey.FETCH, 12)
    buf = io.BytesIO()
    from kio.serial import entity_writer

    entity_writer(cls)(buf, entities.build(cls, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 65536,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 65536}]}],
        "forgotten_topics_data": [], "rack_id": ""}))
    return buf.getvalue()


class Probe:
    """Produce + Fetch round trips every PROBE_INTERVAL_S on persistent connections."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.produce_wire = Wire(bootstrap, timeout=30)
        self.fetch_wire = Wire(bootstrap, timeout=30)
        batch = build_batch([Record(-1, int(time.time() * 1000), b"probe", b"p" * 100)])
        self.produce_body = _produce_body(topic, batch)
        self.fetch_body = _fetch_body(topic)
        self.correlation = 0

    def _round_trip(self, wire: Wire, key: int, version: int, body: bytes) -> float:
        self.correlation += 1
        started = time.perf_counter()
        wire.send_request(key, version, self.correlation, body, header_version=2)
        frame = wire.read_frame()
        elapsed = time.perf_counter() - started
        assert frame is not None and struct.unpack_from(">i", frame)[0] == self.correlation
        return elapsed * 1000

    def run(self, until: Any) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {"produce": [], "fetch": []}
        while not until():
            samples["produce"].append(self._round_trip(self.produce_wire, 0, 9,
                                                       self.produce_body))
            samples["fetch"].append(self._round_trip(self.fetch_wire, 1, 12, self.fetch_body))
            time.sleep(PROBE_INTERVAL_S)
        return samples

    def close(self) -> None:
        self.produce_wire.close()
        self.fetch_wire.close()


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "max_ms": ordered[-1],
    }


def latency(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-cleaner-broker-") as tmp:
        broker = BrokerProcess("odradek", data_dir=Path(tmp) / "data",
                               log_path=Path(tmp) / "broker.log",
                               overrides={"log.cleaner.backoff.ms": 200, **args.override})
        broker.start()
        try:
            create_topic(broker.bootstrap, "probe", 1)
            create_topic(broker.bootstrap, "dirty", 1, {
                "cleanup.policy": "compact", "segment.bytes": str(8 * MIB),
                "min.compaction.lag.ms": str(3_600_000)})
            per_round = 50_000
            written = 0
            n = 0
            while written < args.dirty_mib * MIB:
                produce_updates(broker.bootstrap, "dirty", [
                    (b"key-%08d" % ((n + i) * 7919 % args.keys), VALUES[(n + i) % len(VALUES)])
                    for i in range(per_round)])
                n += per_round
                written += per_round * (VALUE_BYTES + 20)
            probe = Probe(broker.bootstrap, "probe")
            deadline = time.monotonic() + args.idle_s
            idle = probe.run(lambda: time.monotonic() > deadline)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            resource = ConfigResource(ConfigResource.Type.TOPIC, "dirty", incremental_configs=[
                ConfigEntry("min.compaction.lag.ms", "0",
                            incremental_operation=AlterConfigOpType.SET)])
            started = time.monotonic()
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)

            def cleaned() -> bool:
                return "cleaned dirty-0:" in broker.log_path.read_text(errors="replace") or (
                    time.monotonic() - started > args.max_clean_s)

            cleaning = probe.run(cleaned)
            clean_seconds = time.monotonic() - started
            # Idle again: the machine's load drifts; idle is both before and after.
            deadline = time.monotonic() + args.idle_s
            after = probe.run(lambda: time.monotonic() > deadline)
            for kind in idle:
                idle[kind].extend(after[kind])
            probe.close()
            lines = broker.log_path.read_text().splitlines()
            line = next((x for x in lines if "cleaned dirty-0:" in x), "")
            worker_line = next((x for x in lines if "cleaner worker 0:" in x), "")
        finally:
            broker.stop()
    match = re.search(r"([\d.]+) MB processed in ([\d.]+) s \(([\d.]+) MB/s", line)
    result: dict[str, Any] = {
        "dirty_mib": args.dirty_mib,
        "cleaning_seconds_observed": clean_seconds,
        "broker_cleaner_line": line.split(": ", 1)[-1],
        "broker_cleaner_mb_s": float(match[3]) if match else None,
        "broker_worker_line": worker_line.split(": ", 1)[-1],
    }
    for kind in ("produce", "fetch"):
        result[kind] = {"idle": _summary(idle[kind]), "cleaning": _summary(cleaning[kind])}
        i, c = result[kind]["idle"], result[kind]["cleaning"]
        result[kind]["p50_ratio"] = c["p50_ms"] / i["p50_ms"]
        result[kind]["p99_ratio"] = c["p99_ms"] / i["p99_ms"]
        print(f"latency {kind:>7}: idle p50 {i['p50_ms']:.2f} ms p99 {i['p99_ms']:.2f} ms "
              f"max {i['max_ms']:.1f} ms ({i['n']} samples) | cleaning p50 "
              f"{c['p50_ms']:.2f} ms p99 {c['p99_ms']:.2f} ms max {c['max_ms']:.1f} ms "
              f"({c['n']} samples) | ratio p50 {result[kind]['p50_ratio']:.2f} "
              f"p99 {result[kind]['p99_ratio']:.2f}", flush=True)
    print(f"broker cleaner: {result['broker_cleaner_line']}", flush=True)
    print(f"broker {result['broker_worker_line']}", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-mib", type=int, default=128)
    parser.add_argument("--dirty-mib", type=int, default=64)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--max-clean-s", type=float, default=300.0)
    parser.add_argument("--quick", action="store_true", help="16 MiB logs, 5 s idle")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config for part 2 (repeatable)")
    args = parser.parse_args()
    args.override = dict(kv.split("=", 1) for kv in args.override)
    if args.quick:
        args.log_mib, args.dirty_mib, args.idle_s = 16, 16, 5.0
    report: dict[str, Any] = {"args": vars(args)}
    if not args.skip_throughput:
        report["throughput"] = throughput(args)
    if not args.skip_latency:
        report["latency"] = latency(args)
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    path = results / f"cleaner-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
