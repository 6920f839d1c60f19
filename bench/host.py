"""One host, 1 broker process vs N: what `odradek server --processes N` buys.

    python bench/host.py                          # RF=1, 1 vs 2 processes, 3 rounds
    python bench/host.py --processes 1 3 --rf 3 --acks all
    python bench/host.py --records 100000 --repeat 1
    python bench/host.py --size 100 --chunk 10 --records 200000   # small requests
    python bench/host.py --raw --producers 1 --records 1000000 --consume  # broker-bound

With --raw the load is bench/rawload.py instead of confluent-kafka: pre-encoded Produce
requests of --chunk (default 100) records, --connections per partition leader with
--in-flight requests each, costing the client a small fraction of the broker's CPU per
record, so that the broker, not the client, is the bottleneck (a librdkafka producer
spends about as much CPU per 1 KiB record as the broker). --consume then reads the whole
topic once with rawload's fetch load (one connection per partition, Fetch v4 of
--fetch-bytes) and reports the same figures for the read.

Each round starts, for each process count in --processes (in turn, in the same run, so
that both see the same machine), `odradek server --processes N` in combined mode
(tests/integration/host_proc.py; N=1 is the plain single-process server), creates a topic
of --partitions partitions with replication factor --rf, and runs --producers
confluent-kafka producer processes (bench/run.py's producer_proc: produce_batch of
--size-byte records, linger.ms=5, no compression, explicit partitions) that bootstrap
from the first port only and send --records records in all. With --chunk C the producers
send batches of C records with linger.ms=0 instead (many small requests: the regime where
the broker's per-request Python work, not the bytes, is the cost).

It reports records/s and, the fairer number on a shared machine, the broker CPU per
record: user+system CPU of the whole broker process tree (supervisor, brokers, cleaner
workers; psutil) over the run, divided by the records, and the Produce requests the
brokers answered (their odradek.metrics.port endpoints), to see how many records a
request carried. It also records what the rest
of the machine did: all-core busy time (psutil.cpu_times) minus the broker's and the
clients' CPU, as `other_cpu_cores`, and the idle fraction of the machine before the
round. Results go to stdout and bench/results/host-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

from bench.rawload import raw_consumer_proc, raw_producer_proc
from bench.run import producer_proc
from tests.integration.cluster_proc import FAST_TIMEOUTS
from tests.integration.host_proc import HostProcesses, free_ports

RESULTS_DIR = REPO_ROOT / "bench" / "results"
IDLE_SAMPLE_S = 2.0
IDLE_BROKER_S = 5.0  # the brokers' own CPU with no clients, after the topic is made


def small_batch_producer(bootstrap: str, topic: str, count: int, size: int, acks: str,
                         partitions: int, first_partition: int, deadline: float, go: Any,
                         out: Any, chunk: int) -> None:
    """bench/run.py's producer_proc with batches of `chunk` records and linger.ms=0: many
    small requests, the regime where the broker's per-request work dominates."""
    from confluent_kafka import Producer

    from bench.run import _rusage_s

    errors = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
        "compression.type": "none", "batch.num.messages": chunk,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": False, "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "message.timeout.ms": max(1000, int((deadline - time.time()) * 1000))})
    producer.list_topics(topic, timeout=15)
    template = [{"value": os.urandom(size)} for _ in range(chunk)]
    go.wait(timeout=60)
    cpu0, t0 = _rusage_s(), time.time()
    sent = calls = 0
    while sent < count and time.time() < deadline:
        batch = template[:min(chunk, count - sent)]
        partition = (first_partition + calls) % partitions
        calls += 1
        while batch:
            queued = producer.produce_batch(topic, batch, partition=partition)
            sent += queued
            if queued == len(batch):
                break
            batch = [m for m in batch if "_error" in m]  # queue full: retry the refused
            for m in batch:
                del m["_error"]
            producer.poll(0.005)
        producer.poll(0)
    left = producer.flush(max(0.0, deadline - time.time()))
    t1, cpu1 = time.time(), _rusage_s()
    out.put({"role": "producer", "start": t0, "end": t1, "cpu_s": cpu1 - cpu0, "sent": sent,
             "unacked": left, "errors": errors[0], "timed_out": left > 0})


_PRODUCE_REQUESTS = re.compile(r'^odradek_requests_total\{api="PRODUCE"\} (\S+)$', re.MULTILINE)


def _produce_requests(metrics_base: int, n: int) -> float:
    """Produce requests answered so far, summed over the n processes' metrics endpoints."""
    total = 0.0
    for i in range(n):
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_base + i}/metrics",
                                    timeout=10) as r:
            m = _PRODUCE_REQUESTS.search(r.read().decode())
        total += float(m.group(1)) if m else 0.0
    return total


def _tree_rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total / 1e6


def _tree_cpu_s(pids: list[int], system_only: bool = False) -> dict[int, float]:
    out: dict[int, float] = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            out[pid] = (t.system + t.children_system if system_only else
                        t.user + t.system + t.children_user + t.children_system)
        except psutil.Error:
            pass
    return out


def _delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(after.get(pid, v) - v for pid, v in before.items()) + sum(
        v for pid, v in after.items() if pid not in before)


def _machine_busy_s() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


def _create(bootstrap: str, topic: str, partitions: int, rf: int, brokers: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while len(admin.list_topics(timeout=10).brokers) < brokers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{brokers} brokers not in Metadata")
        time.sleep(0.2)
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(timeout=60)
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} not ready")


def run_once(n: int, args: argparse.Namespace, data_parent: Path) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix=f"host-{n}p-", dir=data_parent))
    before_idle = psutil.cpu_times_percent(interval=IDLE_SAMPLE_S).idle
    metrics_base = free_ports(n)
    host = HostProcesses(data / "data", n, {"broker.rack": "bench-host", **FAST_TIMEOUTS,
                                            "replica.lag.time.max.ms": 10000,
                                            "odradek.metrics.port": metrics_base})
    with host:
        bootstrap = host.bootstrap(0)
        _create(bootstrap, "t", args.partitions, args.rf, n)
        leaders: dict[int, int] = {}
        for p in AdminClient({"bootstrap.servers": bootstrap}).list_topics(
                "t", timeout=10).topics["t"].partitions.values():
            leaders[p.leader] = leaders.get(p.leader, 0) + 1
        ctx = mp.get_context("spawn")
        go, out = ctx.Event(), ctx.Queue()
        deadline = time.time() + args.timeout_s
        shares = [args.records // args.producers + (i < args.records % args.producers)
                  for i in range(args.producers)]
        if args.raw:
            procs = [ctx.Process(target=raw_producer_proc, args=(
                bootstrap, "t", shares[i], args.size, args.acks, deadline, go, out,
                args.chunk or 100, args.connections, args.in_flight))
                for i in range(args.producers)]
        else:
            procs = [ctx.Process(target=producer_proc, args=(
                bootstrap, "t", shares[i], args.size, args.acks, args.partitions, i, deadline,
                go, out)) if args.chunk is None else ctx.Process(
                    target=small_batch_producer, args=(
                        bootstrap, "t", shares[i], args.size, args.acks, args.partitions, i,
                        deadline, go, out, args.chunk)) for i in range(args.producers)]
        idle0 = _tree_cpu_s(host.pids())
        time.sleep(IDLE_BROKER_S)
        idle1 = _tree_cpu_s(host.pids())
        idle_cpu = sum(idle1.get(pid, v) - v for pid, v in idle0.items())
        rss = _tree_rss_mb(host.pids())
        for p in procs:
            p.start()
        time.sleep(2.0)  # connect, fetch metadata
        pids = host.pids()
        brokers0 = {node: _tree_cpu_s([c.pid]) for node, c in host.children().items()}
        cpu0, busy0 = _tree_cpu_s(pids), _machine_busy_s()
        sys0 = _tree_cpu_s(pids, system_only=True)
        produce0 = _produce_requests(metrics_base, n)
        load0 = os.getloadavg()[0]
        go.set()
        results = []
        for _ in procs:
            try:
                results.append(out.get(timeout=args.timeout_s + 30))
            except queue.Empty:
                break
        cpu1, busy1 = _tree_cpu_s(host.pids()), _machine_busy_s()
        sys1 = _tree_cpu_s(host.pids(), system_only=True)
        per_node = {node: round(_delta(before, _tree_cpu_s(list(before))), 2)
                    for node, before in brokers0.items()}
        produce_requests = _produce_requests(metrics_base, n) - produce0
        consume = _consume_phase(ctx, host, bootstrap, args) if args.consume else None
        for p in procs:
            p.join(10)
        host.stop()
    shutil.rmtree(data, ignore_errors=True)
    start, end = min(r["start"] for r in results), max(r["end"] for r in results)
    wall = end - start
    broker_cpu = _delta(cpu0, cpu1)
    broker_sys = _delta(sys0, sys1)
    client_cpu = sum(r["cpu_s"] for r in results)
    sent = sum(r["sent"] for r in results)
    errors = sum(r["errors"] for r in results)
    other = max(0.0, (busy1 - busy0) - broker_cpu - client_cpu)
    res = {
        "processes": n, "rf": args.rf, "acks": args.acks, "partitions": args.partitions,
        "producers": args.producers, "size": args.size,
        "load": "raw" if args.raw else "confluent-kafka",
        "chunk": args.chunk or (100 if args.raw else 1000), "records": sent, "errors": errors,
        "first_error": next((r["first_error"] for r in results if r.get("first_error")), None),
        "timed_out": any(r["timed_out"] for r in results), "wall_s": round(wall, 3),
        "records_per_s": round(sent / wall), "mb_per_s": round(sent * args.size / wall / 1e6, 1),
        "broker_cpu_s": round(broker_cpu, 2), "broker_cpu_cores": round(broker_cpu / wall, 2),
        "broker_cpu_us_per_record": round(broker_cpu / sent * 1e6, 1),
        "broker_system_share": round(broker_sys / broker_cpu, 2) if broker_cpu else 0.0,
        "cpu_s_per_broker_process": per_node,
        "produce_requests": round(produce_requests),
        "records_per_produce_request": round(sent / produce_requests, 1)
        if produce_requests else None,
        "client_cpu_cores": round(client_cpu / wall, 2),
        "client_cpu_us_per_record": round(client_cpu / sent * 1e6, 2) if sent else None,
        "loadavg_1m_at_start": round(load0, 2),
        "other_cpu_cores": round(other / wall, 2),
        "machine_idle_pct_before": round(before_idle, 1),
        "idle_broker_cpu_cores": round(idle_cpu / IDLE_BROKER_S, 3),
        "idle_rss_mb": round(rss),
        "leaders_per_node": leaders,
    }
    if consume is not None:
        res["consume"] = consume
    return res


def _consume_phase(ctx: Any, host: HostProcesses, bootstrap: str,
                   args: argparse.Namespace) -> dict[str, Any]:
    """bench/rawload.py's fetch load reads the whole topic once (one connection per
    partition); the brokers' CPU over that read."""
    go, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=raw_consumer_proc, args=(
        bootstrap, "t", args.size, args.fetch_bytes, time.time() + args.timeout_s, go, out))
    proc.start()
    time.sleep(2.0)
    cpu0, busy0, load0 = _tree_cpu_s(host.pids()), _machine_busy_s(), os.getloadavg()[0]
    go.set()
    r = out.get(timeout=args.timeout_s + 30)
    cpu1, busy1 = _tree_cpu_s(host.pids()), _machine_busy_s()
    proc.join(10)
    wall, broker = r["end"] - r["start"], _delta(cpu0, cpu1)
    got = r["received"]
    return {"records": got, "errors": r["errors"], "first_error": r["first_error"],
            "fetch_requests": r["requests"], "wall_s": round(wall, 3),
            "records_per_s": round(got / wall), "mb_per_s": round(got * args.size / wall / 1e6, 1),
            "broker_cpu_cores": round(broker / wall, 2),
            "broker_cpu_us_per_record": round(broker / got * 1e6, 2) if got else None,
            "client_cpu_cores": round(r["cpu_s"] / wall, 2),
            "client_cpu_us_per_record": r["client_cpu_us_per_record"],
            "other_cpu_cores": round(max(0.0, busy1 - busy0 - broker - r["cpu_s"]) / wall, 2),
            "loadavg_1m_at_start": round(load0, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rf", type=int, default=1)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=None,
                    help="records per batch with linger.ms=0 (default: bench/run.py's "
                         "producer, 1,000-record batches, linger.ms=5)")
    ap.add_argument("--raw", action="store_true",
                    help="bench/rawload.py's load (pre-encoded Produce v7 requests of --chunk "
                         "records, default 100) instead of confluent-kafka producers")
    ap.add_argument("--connections", type=int, default=2,
                    help="--raw: connections per partition leader")
    ap.add_argument("--in-flight", type=int, default=4, help="--raw: requests per connection")
    ap.add_argument("--consume", action="store_true",
                    help="--raw: then read the topic once with rawload's fetch load")
    ap.add_argument("--fetch-bytes", type=int, default=1 << 20,
                    help="--consume: max bytes per Fetch answer")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=180.0)
    ap.add_argument("--data-parent", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = ap.parse_args()
    runs: list[dict[str, Any]] = []
    for r in range(args.repeat):
        for n in args.processes:
            res = run_once(n, args, args.data_parent or Path(tempfile.gettempdir()))
            res["round"] = r
            runs.append(res)
            print(json.dumps(res), flush=True)
    print(f"\nmedians over {args.repeat} round(s); {args.records} x {args.size} B, "
          f"RF={args.rf}, acks={args.acks}, {args.partitions} partitions, "
          f"{args.producers} producers; {os.cpu_count()} cores")
    print(f"{'processes':>9} {'records/s':>10} {'MB/s':>6} {'broker cores':>12} "
          f"{'us/record':>9} {'clients':>7} {'other':>6} {'idle% before':>12} "
          f"{'idle cores':>10} {'idle RSS MB':>11}")
    summary = {}
    for n in args.processes:
        mine = [x for x in runs if x["processes"] == n]
        med = {k: statistics.median(x[k] for x in mine) for k in (
            "records_per_s", "mb_per_s", "broker_cpu_cores", "broker_cpu_us_per_record",
            "client_cpu_cores", "other_cpu_cores", "machine_idle_pct_before",
            "idle_broker_cpu_cores", "idle_rss_mb")}
        summary[n] = med
        print(f"{n:>9} {med['records_per_s']:>10.0f} {med['mb_per_s']:>6.1f} "
              f"{med['broker_cpu_cores']:>12.2f} {med['broker_cpu_us_per_record']:>9.1f} "
              f"{med['client_cpu_cores']:>7.2f} {med['other_cpu_cores']:>6.2f} "
              f"{med['machine_idle_pct_before']:>12.1f} "
              f"{med['idle_broker_cpu_cores']:>10.3f} {med['idle_rss_mb']:>11.0f}")
    if args.consume:
        print(f"\nconsume (rawload fetch, one connection per partition, medians)\n"
              f"{'processes':>9} {'records/s':>10} {'MB/s':>6} {'broker cores':>12} "
              f"{'us/record':>9} {'client us/rec':>13}")
        for n in args.processes:
            mine = [x["consume"] for x in runs if x["processes"] == n and "consume" in x]
            med = {k: statistics.median(x[k] or 0 for x in mine) for k in (
                "records_per_s", "mb_per_s", "broker_cpu_cores", "broker_cpu_us_per_record",
                "client_cpu_us_per_record")}
            summary[n]["consume"] = med
            print(f"{n:>9} {med['records_per_s']:>10.0f} {med['mb_per_s']:>6.1f} "
                  f"{med['broker_cpu_cores']:>12.2f} {med['broker_cpu_us_per_record']:>9.2f} "
                  f"{med['client_cpu_us_per_record']:>13.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"host-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({
        "args": {k: str(v) for k, v in vars(args).items()}, "machine": {
            "cores": os.cpu_count(), "platform": platform.platform(),
            "loadavg": os.getloadavg()}, "runs": runs, "medians": summary}, indent=1))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
