"""Tiered storage (issue 14): a backlog read from the remote tier vs from local disk,
and what a catching-up consumer does to a live producer's latency.

    .venv/bin/python bench/tiered.py                       # 40 MiB backlog, file:// and S3
    .venv/bin/python bench/tiered.py --mb 100 --stores file --repeat 3

For each store (`file`: a local directory as the remote tier; `s3`: a SeaweedFS S3
server started for the run, through s3fs) one broker is started (temporary dirs, free
ports) with two topics of one partition holding the same backlog (`--mb` MiB of
`--value-bytes` records, segment.bytes `--segment-mb`; filled untimed):

* `local`: a plain topic, read from the broker's log dir (the page cache, warm);
* `remote`: remote.storage.enable=true with local.retention.bytes of one segment, so
  once the copies settle everything but the last segments is read from the remote tier.

(a) Backlog read: a confluent-kafka consumer (its own process) reads each topic from
offset 0 to its end, once untimed, then alternating, `--repeat` times: MB/s and
records/s (with small records the Python consumer's per-record cost bounds both:
`--value-bytes 8192` makes the broker the bound).

(b) Live producer latency: a producer (acks=1, linger.ms=0, `--rate` records/s of
`--value-bytes`) sends to a third topic for `--live-seconds` while nothing else runs,
then while a consumer process reads the `local` backlog in a loop, then while it reads
the `remote` one (`--live-repeat` rounds of the three): p50/p99/max of the time from
produce() to the delivery report; the summary gives the median of the rounds' p99.

Every run records the load average and the CPU seconds of the broker and the S3 server:
on the shared 2-core dev machine other work runs beside it. Results: stdout and
bench/results/tiered-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.broker_proc import BrokerProcess
from tests.integration.tiered_helpers import list_offsets

TIERED = {"remote.log.storage.system.enable": "true",
          "remote.log.manager.task.interval.ms": "500",
          "log.retention.check.interval.ms": "500",
          "auto.create.topics.enable": "false"}


def cpu_seconds(pid: int | None) -> float:
    import psutil

    if pid is None:
        return 0.0
    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:  # the broker's worker processes too
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def fill(bootstrap: str, topic: str, records: int, value_bytes: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "compression.type": "none",
                  "acks": "all"})
    rnd = value_bytes // 5
    filler = b"x" * (value_bytes - rnd)
    for i in range(records):
        value = os.urandom(rnd) + filler
        while True:
            try:
                p.produce(topic, value, b"key-%d" % i, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0


def read_backlog(bootstrap: str, topic: str, end: int, loops: int, deadline_s: float,
                 out: Any) -> None:
    """Consumer process: read [0, end) `loops` times (or until deadline_s); puts
    (records, bytes, seconds) of the completed reads on `out`."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tiered",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760, "enable.partition.eof": False})
    stop_at = time.monotonic() + deadline_s
    done = []
    try:
        for _ in range(loops):
            c.assign([TopicPartition(topic, 0, 0)])
            n = size = 0
            t0 = time.perf_counter()
            last = -1
            while last < end - 1 and time.monotonic() < stop_at:
                for m in c.consume(10000, timeout=1.0):
                    if m.error():
                        continue
                    n += 1
                    size += len(m.value() or b"") + len(m.key() or b"")
                    last = m.offset()
            if last < end - 1:
                break
            done.append((n, size, time.perf_counter() - t0))
    finally:
        c.close()
        out.put(done)


def consumer_process(bootstrap: str, topic: str, end: int, loops: int,
                     deadline_s: float) -> tuple[mp.Process, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=read_backlog, args=(bootstrap, topic, end, loops, deadline_s, q))
    p.start()
    return p, q


def live_latencies(bootstrap: str, topic: str, rate: int, value_bytes: int,
                   seconds: float) -> list[float]:
    """Produce `rate` records/s for `seconds` (acks=1); the produce-to-ack times, ms."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                  "compression.type": "none"})
    lat: list[float] = []
    value = b"v" * value_bytes
    interval = 1.0 / rate
    t_next = time.perf_counter()
    stop = t_next + seconds
    while t_next < stop:
        t = time.perf_counter()

        def report(err: Any, _msg: Any, t: float = t) -> None:
            if err is None:
                lat.append((time.perf_counter() - t) * 1000.0)

        p.produce(topic, value, on_delivery=report)
        t_next += interval
        while True:
            left = t_next - time.perf_counter()
            p.poll(max(0.0, min(left, 0.005)))
            if left <= 0:
                break
    p.flush(60)
    return lat


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def run_store(store: str, args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    s3 = None
    tmp = Path(tempfile.mkdtemp(prefix="bench-tiered-"))
    overrides = dict(TIERED)
    if store == "s3":
        from tests.integration.s3_server import S3Server

        s3 = S3Server().start()
        bucket = s3.bucket()
        overrides.update({"rsm.config.url": f"s3://{bucket}/tier",
                          **{f"rsm.config.fs.{k}": v for k, v in s3.storage_options.items()}})
    else:
        overrides["rsm.config.url"] = (tmp / "remote").as_uri()
    broker = BrokerProcess("odradek", overrides=overrides, data_dir=tmp / "data")
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        seg = str(args.segment_mb << 20)
        topics = {"local": {"segment.bytes": seg},
                  "remote": {"segment.bytes": seg, "remote.storage.enable": "true",
                             "local.retention.bytes": seg},
                  "live": {}}
        names = {k: f"bench-{k}-{uuid.uuid4().hex[:6]}" for k in topics}
        for k, cfg in topics.items():
            admin.create_topics([NewTopic(names[k], 1, 1, config=cfg)])[names[k]].result(30)
        records = (args.mb << 20) // args.value_bytes
        for k in ("local", "remote"):
            fill(broker.bootstrap, names[k], records, args.value_bytes)
        # the remote topic: copies settled, local deletion done
        t0 = time.perf_counter()
        last, stable = None, 0
        while stable < 3:
            now = (list_offsets(broker.port, names["remote"], -5, 9)[1],
                   list_offsets(broker.port, names["remote"], -4, 8)[1])
            stable = stable + 1 if now == last and now[0] >= 0 else 0
            last = now
            time.sleep(1.0)
        copy_s = time.perf_counter() - t0
        local_start = last[1] if last else 0
        print(f"[{store}] {records:,} records; remote topic: local log start {local_start} "
              f"(offsets below read from the remote tier); copies settled after "
              f"{copy_s:.0f} s", flush=True)
        # (a) backlog reads, alternating, after one untimed read of each (warm-up)
        for k in ("local", "remote"):
            proc, q = consumer_process(broker.bootstrap, names[k], records, 1, 600)
            assert q.get(timeout=700), f"warm-up read of {k} incomplete"
            proc.join(30)
        reads: dict[str, list[dict[str, float]]] = {"local": [], "remote": []}
        for _ in range(args.repeat):
            for k in ("local", "remote"):
                cpu0 = cpu_seconds(broker.pid), cpu_seconds(s3.proc.pid if s3 and s3.proc else None)
                load0 = os.getloadavg()[0]
                proc, q = consumer_process(broker.bootstrap, names[k], records, 1, 600)
                done = q.get(timeout=700)
                proc.join(30)
                n, size, secs = done[0]
                assert n == records, (k, n, records)
                cpu1 = cpu_seconds(broker.pid), cpu_seconds(s3.proc.pid if s3 and s3.proc else None)
                r = {"seconds": secs, "mb_per_s": size / secs / 1e6,
                     "records_per_s": n / secs, "broker_cpu_s": cpu1[0] - cpu0[0],
                     "s3_cpu_s": cpu1[1] - cpu0[1], "load_1m": load0}
                reads[k].append(r)
                print(f"[{store}] read {k:>6}: {size / 1e6:.1f} MB in {secs:.2f} s = "
                      f"{r['mb_per_s']:.1f} MB/s, {r['records_per_s']:,.0f} rec/s; broker CPU "
                      f"{r['broker_cpu_s']:.1f} s, S3 CPU {r['s3_cpu_s']:.1f} s; load {load0:.1f}",
                      flush=True)
        # (b) live producer latency: alone, beside a local catch-up, beside a remote one
        live: dict[str, list[dict[str, float]]] = {"idle": [], "local": [], "remote": []}
        for mode in [m for _ in range(args.live_repeat) for m in ("idle", "local", "remote")]:
            proc = None
            if mode != "idle":
                proc, q = consumer_process(broker.bootstrap, names[mode], records, 1000,
                                           args.live_seconds + 5)
                time.sleep(2.0)  # the consumer started and reading
            load0 = os.getloadavg()[0]
            lat = live_latencies(broker.bootstrap, names["live"], args.rate, args.value_bytes,
                                 args.live_seconds)
            caught = []
            if proc is not None:
                caught = q.get(timeout=120)
                proc.join(30)
            one = {"acked": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
                   "max_ms": max(lat) if lat else float("nan"),
                   "mean_ms": statistics.fmean(lat) if lat else float("nan"),
                   "consumer_full_reads": len(caught), "load_1m": load0}
            live[mode].append(one)
            print(f"[{store}] live acks=1 {args.rate}/s beside {mode:>6} reader: p50 "
                  f"{one['p50_ms']:.1f} ms, p99 {one['p99_ms']:.1f} ms, max "
                  f"{one['max_ms']:.1f} ms ({len(lat)} acked, {len(caught)} backlog reads; "
                  f"load {load0:.1f})", flush=True)
        summary = {
            "read_mb_per_s_median": {k: statistics.median(r["mb_per_s"] for r in rs)
                                     for k, rs in reads.items()},
            "live_p99_ms_median": {m: statistics.median(r["p99_ms"] for r in rs)
                                   for m, rs in live.items()},
        }
        print(f"[{store}] summary: {json.dumps(summary, default=float)}", flush=True)
        return {"store": store, "records": records, "copy_settle_seconds": round(copy_s, 1),
                "remote_local_start": local_start, "reads": reads, "live": live,
                "summary": summary}
    finally:
        broker.close()
        if s3 is not None:
            s3.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=40)
    ap.add_argument("--value-bytes", type=int, default=500)
    ap.add_argument("--segment-mb", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--live-seconds", type=float, default=10.0)
    ap.add_argument("--live-repeat", type=int, default=3)
    ap.add_argument("--stores", default="file,s3")
    args = ap.parse_args()
    result = {"bench": "tiered", "args": vars(args), "cpus": os.cpu_count(),
              "load_at_start": os.getloadavg(),
              "stores": [run_store(s, args) for s in args.stores.split(",")],
              "load_at_end": os.getloadavg()}
    print(json.dumps(result, indent=2, default=float))
    out = REPO_ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"tiered-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
        json.dumps(result, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
