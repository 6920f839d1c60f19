"""Cost of the PySpark data source: rows/s of a batch and a streaming read into a
no-op sink, and of the streaming sink copying the same rows, with the broker read
path of before (`brokerReadPath=consumer`, librdkafka, one object per record) and
of now (`brokerReadPath=fetch`, record batches decoded in bulk) in the same run.

    .venv/bin/python bench/spark.py                # 1,000,000 records of 100 B
    .venv/bin/python bench/spark.py --records 100000
    .venv/bin/python bench/spark.py --guarantee at-least-once   # one sink run only

One run starts an odradek broker (temporary data dir, free port), fills a topic
of `--partitions` partitions with `--records` records of `--value-bytes` bytes
(confluent-kafka producer, not timed), starts a SparkSession (`local[2]`, not
timed), then, for each read path of `--paths` (alternating, `--rounds` times), times:

- batch: `read.format("odradek")` (earliest to latest) -> `write.format("noop")`;
- stream: `readStream.format("odradek")` -> `writeStream.format("noop")`
  (Trigger.AvailableNow: it ends when it has read everything);
- copy: `readStream.format("odradek")` -> `writeStream.format("odradek")` into a
  new topic, once per guarantee of `--guarantee` (`both`: at-least-once, then
  exactly-once; `auto` is exactly-once when the broker serves transactions) and
  per sink `producerPath` of `--producer-paths` (`client`: librdkafka, one object
  per row; `batch`: Arrow to record batches, odradek's own producer);
- write (only with `--queries ...,write`): a batch read written by
  `write.format("odradek")` into a new topic, per `--producer-paths`.

rows/s = rows / wall time of the query, from its start to its end, so it includes
Spark's planning. CPU seconds per query are read from /proc: the driver's Python
(this process), the JVM (driver and executors: `local[2]` is one JVM), the
executors' Python workers and the broker. The 1-minute load average before and
after is recorded: other work on the machine shows there. Results go to stdout
and `bench/results/spark-<time>.json`.
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

from tests.integration.broker_proc import BrokerProcess

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


def _proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime, stime, and cutime, cstime: the CPU of children that ended (and were
    # waited for), so Python workers that came and went are counted too.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            out.extend(int(c) for c in text)
    except OSError:
        pass
    return out


def cpu_by_role(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of this process's tree, by role, and of the broker's."""
    roles = {"driver_python": 0.0, "jvm": 0.0, "python_workers": 0.0, "broker": 0.0}
    todo = [(os.getpid(), "driver_python")]
    seen: set[int] = set()
    while todo:
        pid, role = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        if pid == broker_pid or role == "broker":
            role = "broker"
        else:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"java" in cmd.split(b"\0")[0]:
                role = "jvm"
            elif b"pyspark" in cmd and pid != os.getpid():
                role = "python_workers"
        roles[role] += _proc_cpu_s(pid)
        todo.extend((c, role) for c in _children(pid))
    return roles


def _measure(broker_pid: int, run: Any) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    cpu0 = cpu_by_role(broker_pid)
    t0 = time.monotonic()
    rows = run()
    elapsed = time.monotonic() - t0
    cpu1 = cpu_by_role(broker_pid)
    return {
        "rows": rows, "s": round(elapsed, 2), "rows_per_s": round(rows / elapsed),
        "cpu_s": {k: round(cpu1[k] - cpu0[k], 2) for k in cpu0},
        "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


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
    ap.add_argument("--paths", default="consumer,fetch",
                    help="brokerReadPath values to compare, comma-separated")
    ap.add_argument("--producer-paths", default="client,batch",
                    help="producerPath values of the sink to compare (copy and write), "
                         "comma-separated; the first pays the cold start of round 0")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--queries", default="batch,stream,copy",
                    help="of batch, stream, copy, write (a batch read written by the sink)")
    ap.add_argument("--guarantee", default="exactly-once",
                    choices=("both", "auto", "exactly-once", "at-least-once"))
    args = ap.parse_args()
    queries = args.queries.split(",")

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import odradek.spark
    from odradek.spark.broker import broker_supports_transactions

    base = Path(tempfile.mkdtemp(prefix="odradek-spark-bench-"))
    broker = BrokerProcess("odradek", data_dir=base / "data", log_path=base / "broker.log")
    broker.start()
    runs: list[dict[str, Any]] = []
    try:
        bs = broker.bootstrap
        broker_pid = broker.proc.pid if getattr(broker, "proc", None) else -1
        t0 = time.monotonic()
        fill(bs, "bench-in", args.partitions, args.records, args.value_bytes)
        fill_s = time.monotonic() - t0
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bs})
        guarantees = (["at-least-once", "exactly-once"] if args.guarantee == "both"
                      else [args.guarantee])

        def options(reader: Any, path: str) -> Any:
            return (reader.format("odradek").option("kafka.bootstrap.servers", bs)
                    .option("subscribe", "bench-in").option("startingOffsets", "earliest")
                    .option("brokerReadPath", path))

        def batch(path: str) -> int:
            df = options(spark.read, path).option("endingOffsets", "latest").load()
            df.write.format("noop").mode("overwrite").save()
            return args.records

        n = 0
        for round_ in range(args.rounds):
            for path in args.paths.split(","):
                n += 1
                if "batch" in queries:
                    runs.append({"query": "batch->noop", "path": path, "round": round_,
                                 **_measure(broker_pid, lambda path=path: batch(path))})
                    print(json.dumps(runs[-1]), file=sys.stderr)
                if "stream" in queries:
                    def stream(path: str = path, n: int = n) -> int:
                        return timed_query(options(spark.readStream, path).load().writeStream
                                           .format("noop").option(
                                               "checkpointLocation", str(base / f"ck-read-{n}")))[1]
                    runs.append({"query": "stream->noop", "path": path, "round": round_,
                                 **_measure(broker_pid, stream)})
                    print(json.dumps(runs[-1]), file=sys.stderr)
                for producer in args.producer_paths.split(","):
                    if "write" in queries:
                        n += 1
                        out_topic = f"bench-write-{n}"
                        admin.create_topics([NewTopic(out_topic, args.partitions, 1)])[
                            out_topic].result(30)

                        def write(path: str = path, out: str = out_topic,
                                  producer: str = producer) -> int:
                            (options(spark.read, path).option("endingOffsets", "latest").load()
                             .select("key", "value").write.format("odradek")
                             .option("kafka.bootstrap.servers", bs).option("topic", out)
                             .option("producerPath", producer).mode("append").save())
                            return args.records
                        runs.append({"query": "batch write", "path": path, "round": round_,
                                     "producer": producer, **_measure(broker_pid, write)})
                        print(json.dumps(runs[-1]), file=sys.stderr)
                    if "copy" not in queries:
                        continue
                    for guarantee in guarantees:
                        n += 1
                        out_topic = f"bench-out-{guarantee}-{n}"
                        admin.create_topics([NewTopic(out_topic, args.partitions, 1)])[
                            out_topic].result(30)
                        exactly_once = guarantee == "exactly-once" or (
                            guarantee == "auto" and broker_supports_transactions(bs))

                        def copy(path: str = path, guarantee: str = guarantee,
                                 out: str = out_topic, n: int = n, producer: str = producer) -> int:
                            return timed_query(
                                options(spark.readStream, path).load().select("key", "value")
                                .writeStream.format("odradek")
                                .option("kafka.bootstrap.servers", bs).option("topic", out)
                                .option("deliveryGuarantee", guarantee)
                                .option("producerPath", producer)
                                .option("checkpointLocation",
                                        str(base / f"ck-write-{guarantee}-{n}")))[1]
                        runs.append({"query": "stream copy", "path": path, "round": round_,
                                     "producer": producer,
                                     "guarantee": "exactly-once" if exactly_once else "at-least-once",
                                     **_measure(broker_pid, copy)})
                        print(json.dumps(runs[-1]), file=sys.stderr)
        spark.stop()
        result = {
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "records": args.records,
            "value_bytes": args.value_bytes,
            "partitions": args.partitions,
            "fill_s": round(fill_s, 2),
            "runs": runs,
            "cpus": os.cpu_count(),
            "uptime": Path("/proc/loadavg").read_text().strip(),
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
