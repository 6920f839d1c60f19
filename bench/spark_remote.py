"""Spark reading the remote tier directly vs through the broker (issue 14, bench c).

    .venv/bin/python bench/spark_remote.py                 # 500,000 records of 100 B
    .venv/bin/python bench/spark_remote.py --records 100000 --compression lz4

One run starts a SeaweedFS S3 server and an odradek broker (temporary dirs,
free ports), fills a topic of `--partitions` partitions with `--records`
records of `--value-bytes` bytes (segment.bytes `--segment-mb`; not timed),
copies every closed segment into S3 in the remote layout (as the tiered-storage
copier does, tests/integration/remote_tier_copy.py; not timed), starts a
SparkSession (`local[2]`, not timed), then times the same batch query
(`spark.read.format("odradek")`, earliest to latest, into the `noop` sink so
every column is materialised) with `remoteRead=off` (every row through the
broker) and `remoteRead=direct` (the remote segments from S3 on the executors,
the local tail through the broker), `--repeat` times each, alternating.

rows/s = rows / wall time of the query (planning included). On a shared
box the wall time says little, so each run also records CPU seconds: of Spark
(this process's tree: the driver JVM and the executors' Python workers), of
the broker and of the S3 server. Results go to stdout and
`bench/results/spark-remote-<time>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.broker_proc import BrokerProcess
from tests.integration.remote_tier_copy import copy_closed_segments
from tests.integration.s3_server import S3Server


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int,
         segment_bytes: int, compression: str) -> None:
    """Records with a key and a value of `value_bytes` (a fifth random, the rest
    repeated: compressible, as real data is)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={
        "segment.bytes": str(segment_bytes)})])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": compression})
    rnd = value_bytes // 5
    filler = b"x" * (value_bytes - rnd)
    for i in range(records):
        value = os.urandom(rnd) + filler
        while True:
            try:
                p.produce(topic, value, f"key-{i}".encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def cpu_seconds(pid: int, exclude: frozenset[int] | set[int] = frozenset()) -> float:
    """User + system CPU of a process and its live descendants (minus `exclude`)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        if p.pid in exclude:
            continue
        try:
            t = p.cpu_times()
            total += t.user + t.system + getattr(t, "children_user", 0) + getattr(
                t, "children_system", 0)
        except psutil.Error:
            pass
    return total


def timed_read(spark: Any, opts: dict[str, str], broker_pid: int, weed_pid: int) -> dict[str, float]:
    """Wall seconds, and CPU seconds of Spark (driver JVM, executors' Python
    workers), of the broker and of the S3 server, for one query."""
    others = {broker_pid, weed_pid}
    before = (cpu_seconds(os.getpid(), others), cpu_seconds(broker_pid), cpu_seconds(weed_pid))
    t0 = time.perf_counter()
    spark.read.format("odradek").options(**opts).load().write.format("noop").mode(
        "overwrite").save()
    wall = time.perf_counter() - t0
    after = (cpu_seconds(os.getpid(), others), cpu_seconds(broker_pid), cpu_seconds(weed_pid))
    return {"wall_s": wall, "spark_cpu_s": after[0] - before[0],
            "broker_cpu_s": after[1] - before[1], "s3_cpu_s": after[2] - before[2]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--segment-mb", type=int, default=4)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    s3 = S3Server().start()
    broker = BrokerProcess("odradek", overrides={"auto.create.topics.enable": "false",
                                                 "compression.type": "producer"})
    broker.start()
    topic = f"bench-remote-{uuid.uuid4().hex[:6]}"
    try:
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import AdminClient

        from odradek.spark.remote_plan import kafka_uuid

        fill(broker.bootstrap, topic, args.partitions, args.records, args.value_bytes,
             segment_bytes=args.segment_mb << 20, compression=args.compression)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
        bucket = s3.bucket("bench")
        t0 = time.perf_counter()
        segments = copy_closed_segments(broker.data_dir, topic, kafka_uuid(desc.topic_id),
                                        args.partitions, s3.filesystem(), f"{bucket}/tier")
        copy_s = time.perf_counter() - t0

        from pyspark.sql import SparkSession

        import odradek.spark

        spark = (SparkSession.builder.master("local[2]").appName("odradek-bench-remote")
                 .config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1")
                 .config("spark.driver.bindAddress", "127.0.0.1")
                 .config("spark.python.worker.reuse", "true")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)
        base = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                "startingOffsets": "earliest", "endingOffsets": "latest",
                "remote.rsm.config.url": f"s3://{bucket}/tier",
                **{f"remote.rsm.config.fs.{k}": v for k, v in s3.storage_options.items()}}
        runs: dict[str, list[dict[str, float]]] = {"off": [], "direct": []}
        # warm-up (Python workers, JIT) and the row count, untimed
        rows = spark.read.format("odradek").options(**base, remoteRead="off").load().count()
        assert rows == args.records, rows
        assert broker.pid is not None and s3.proc is not None
        for _ in range(args.repeat):
            for mode in ("off", "direct"):
                r = timed_read(spark, {**base, "remoteRead": mode}, broker.pid, s3.proc.pid)
                r["rows_per_s"] = rows / r["wall_s"]
                runs[mode].append(r)
                print(f"{mode:>6}: {rows:,} rows in {r['wall_s']:.2f} s = {r['rows_per_s']:,.0f} "
                      f"rows/s; CPU s: Spark {r['spark_cpu_s']:.1f}, broker "
                      f"{r['broker_cpu_s']:.1f}, S3 server {r['s3_cpu_s']:.1f}", flush=True)
        spark.stop()
        result = {
            "bench": "spark_remote", "records": args.records, "value_bytes": args.value_bytes,
            "partitions": args.partitions, "segment_mb": args.segment_mb,
            "compression": args.compression, "remote_segments": segments,
            "copy_seconds": round(copy_s, 2), "rows": rows,
            "runs": {m: [{k: round(v, 2) for k, v in r.items()} for r in rs]
                     for m, rs in runs.items()},
            "speedup_best": round(max(r["rows_per_s"] for r in runs["direct"])
                                  / max(r["rows_per_s"] for r in runs["off"]), 2),
        }
        print(json.dumps(result, indent=2))
        out = REPO_ROOT / "bench" / "results"
        out.mkdir(exist_ok=True)
        (out / f"spark-remote-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
            json.dumps(result, indent=2))
    finally:
        broker.close()
        s3.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
