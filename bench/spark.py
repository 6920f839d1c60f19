"""Cost of the PySpark data source: rows/s of a streaming read into a no-op sink,
and of the streaming sink writing the same rows back.

    .venv/bin/python bench/spark.py                # 1,000,000 records of 100 B
    .venv/bin/python bench/spark.py --records 100000
    .venv/bin/python bench/spark.py --guarantee at-least-once   # one sink run only

One run starts an odradek broker (temporary data dir, free port), fills a topic
of `--partitions` partitions with `--records` records of `--value-bytes` bytes
(confluent-kafka producer, not timed), starts a SparkSession (`local[2]`, not
timed), then times two streaming queries, each with Trigger.AvailableNow so it
ends when it has read everything:

- read: `readStream.format("odradek")` -> `writeStream.format("noop")`;
- write: `readStream.format("odradek")` -> `writeStream.format("odradek")` into a
  new topic, once per guarantee: `--guarantee both` (the default) runs
  at-least-once and then exactly-once (each into its own topic, with its own
  checkpoint); `auto` is exactly-once when the broker serves transactions, else
  at-least-once (the result says which ran).

rows/s = rows / wall time of the query, from start() to its end, so it includes
Spark's per-batch planning (one batch here: no maxOffsetsPerTrigger). Results go
to stdout and `bench/results/spark-<time>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.broker_proc import BrokerProcess  # noqa: E402

QUERY_TIMEOUT_S = 900


def fill(bootstrap: str, topic: str, partitions: int, records: int, value_bytes: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep it alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * value_bytes
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def timed_query(writer: Any) -> tuple[float, int]:
    t0 = time.monotonic()
    q = writer.trigger(availableNow=True).start()
    if not q.awaitTermination(QUERY_TIMEOUT_S):
        q.stop()
        raise TimeoutError(f"query did not finish in {QUERY_TIMEOUT_S} s")
    elapsed = time.monotonic() - t0
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    for p in q.recentProgress:
        if p["numInputRows"]:
            print(f"  batch {p['batchId']}: {p['numInputRows']} rows, durationMs {p['durationMs']}",
                  file=sys.stderr)
    return elapsed, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--guarantee", default="both",
                    choices=("both", "auto", "exactly-once", "at-least-once"))
    args = ap.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import odradek.spark
    from odradek.spark.broker import broker_supports_transactions

    base = Path(tempfile.mkdtemp(prefix="odradek-spark-bench-"))
    broker = BrokerProcess("odradek", data_dir=base / "data", log_path=base / "broker.log")
    broker.start()
    try:
        bs = broker.bootstrap
        t0 = time.monotonic()
        fill(bs, "bench-in", args.partitions, args.records, args.value_bytes)
        fill_s = time.monotonic() - t0
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)

        def source() -> Any:
            return (
                spark.readStream.format("odradek")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", "bench-in")
                .option("startingOffsets", "earliest")
                .load()
            )

        read_s, read_rows = timed_query(
            source().writeStream.format("noop").option("checkpointLocation", str(base / "ck-read"))
        )
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bs})
        guarantees = ["at-least-once", "exactly-once"] if args.guarantee == "both" else [args.guarantee]
        writes = []
        for guarantee in guarantees:
            out_topic = f"bench-out-{guarantee}"
            admin.create_topics([NewTopic(out_topic, args.partitions, 1)])[out_topic].result(30)
            exactly_once = guarantee == "exactly-once" or (
                guarantee == "auto" and broker_supports_transactions(bs)
            )
            write_s, write_rows = timed_query(
                source()
                .select("key", "value")
                .writeStream.format("odradek")
                .option("kafka.bootstrap.servers", bs)
                .option("topic", out_topic)
                .option("deliveryGuarantee", guarantee)
                .option("checkpointLocation", str(base / f"ck-write-{guarantee}"))
            )
            writes.append({
                "guarantee": "exactly-once" if exactly_once else "at-least-once",
                "rows": write_rows,
                "s": round(write_s, 2),
                "rows_per_s": round(write_rows / write_s),
            })
        spark.stop()
        result = {
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "records": args.records,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "fill_s": round(fill_s, 2),
            "read_noop": {"rows": read_rows, "s": round(read_s, 2), "rows_per_s": round(read_rows / read_s)},
            "writes": writes,
            "load_average_1m": os.getloadavg()[0],
        }
    finally:
        broker.close()
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=2))
    out = REPO_ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"spark-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
