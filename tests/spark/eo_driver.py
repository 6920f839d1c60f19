"""Child process of test_exactly_once: one Spark driver running one streaming query
(source topic -> odradek sink, Trigger.AvailableNow) until it ends or is killed.

    python -m tests.spark.eo_driver --bootstrap H:P --src T --dst U --checkpoint DIR
        [--master local[2,3]] [--max-offsets 10]

It is its own process group (the test starts it with start_new_session), and it
names that group in ODRADEK_SPARK_TEST_CRASH_PGID before Spark starts, so the
writer's test hook (ODRADEK_SPARK_TEST_CRASH_AT, odradek/spark/writer.py) can
kill -9 the whole driver — this Python process and its JVM — from a Spark task.

Exit 0 and a last stdout line `EO-DONE <json>` when the query finished; 1 with
the query's error otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

QUERY_TIMEOUT_S = 150


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--max-offsets", type=int, default=10)
    ap.add_argument("--guarantee", default="auto")
    args = ap.parse_args(argv)
    t0 = time.monotonic()

    from odradek.spark.writer import CRASH_PGID_ENV

    os.environ[CRASH_PGID_ENV] = str(os.getpgid(0))
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    from pyspark.sql import SparkSession

    import odradek.spark

    spark = (
        SparkSession.builder.master(args.master)
        .appName("odradek-eo-driver")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.memory", "512m")
        # A short-lived test driver: start fast rather than run fast.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    print(f"EO-SESSION up after {time.monotonic() - t0:.1f} s", flush=True)
    q = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.dst)
        .option("deliveryGuarantee", args.guarantee)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    if not q.awaitTermination(QUERY_TIMEOUT_S):
        q.stop()
        print(f"EO-ERROR query did not end within {QUERY_TIMEOUT_S} s", flush=True)
        return 1
    if q.exception() is not None:
        print(f"EO-ERROR {q.exception()}", flush=True)
        return 1
    batches = [p["batchId"] for p in q.recentProgress if p["numInputRows"]]
    print("EO-DONE " + json.dumps({"batches": batches}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
