"""Throughput and latency of odradek and tansu, side by side, in one run.

    python bench/run.py                 # both brokers, full size (a few minutes)
    python bench/run.py --quick         # 10x fewer records, 3 s latency run
    python bench/run.py --only tansu    # one broker
    python bench/run.py --producers 3 --partitions 6
    python bench/run.py --single        # one producer, one consumer: 100 B acks=1 only

For each broker in turn (never both at once: the machine has 2 cores) it
starts the broker on a free 127.0.0.1 port (odradek: `python -m odradek server`
with a temporary data dir; tansu: in-memory storage), then runs:

  produce   confluent-kafka producers in separate processes (--producers),
            compression.type=none, linger.ms=5, big batches and queues, explicit
            partitions, delivery reports for errors only. 1,000,000 x 100 B and
            200,000 x 1 KiB, each with acks=1 and acks=all (into separate topics).
  consume   consumer processes (--consumers), each assign()ed its share of the
            partitions from the beginning (no groups), consume(num_messages=...)
            batches, until all records of the acks=1 topic are read.
  latency   one producer at a fixed rate (5,000 msg/s for 10 s after a 1 s
            warm-up; acks=1, linger.ms=5) and one consumer in another process;
            the send time is in the payload; p50/p99/p99.9/max of receive - send,
            and whether latency grows during the run (the rate is not sustained).

It measures records/s and MB/s (payload bytes / wall time), the broker's CPU
(psutil, user+system of the broker process tree / wall, in cores) and the
clients' CPU (getrusage in each client process), and says what was
saturated: the broker when it used >= 90% of a core (odradek is one Python
process, so one core is its ceiling), the clients when any client process
did, the machine when broker + clients used >= 90% of all cores.

Every run stops by itself: each workload has a deadline (--workload-timeout-s);
a workload that misses it is reported with timed_out=true and what it did
until then. Before each produce run, on both brokers, the run's bytes (and a
quarter more) are written to a file in the data dir's filesystem and deleted
(bench/pages.py; `--no-recycle-pages` skips it): on this VM a page of memory
the guest has not used lately costs ~10 us to fill the first time, 2.5 us per
1 KiB record, so without it a figure depends on what the machine did before.

Results go to stdout as a table with odradek/tansu ratios, and as
JSON to bench/results/<time>.json (gitignored).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import struct
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.pages import recycle_free_pages
from tests.integration.broker_proc import BrokerProcess

RESULTS_DIR = REPO_ROOT / "bench" / "results"
BROKERS = ("odradek", "tansu")
SATURATED_FRACTION = 0.9          # of one core: a process is saturated
MACHINE_SATURATED_FRACTION = 0.85  # of all cores: the machine is
NOISY_OTHER_CORES = 0.25           # other processes' CPU that makes a run noisy
SAMPLE_HZ = 20
LATENCY_WARMUP_S = 1.0
CLIENT_JOIN_GRACE_S = 30.0
# A latency record: magic byte (1 = measured, 0 = warm-up), send time in ns.
LATENCY_HEADER = struct.Struct(">bq")


# ---------------------------------------------------------------------------
# client processes (spawned: librdkafka objects are created only in children)
# ---------------------------------------------------------------------------
def _rusage_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def producer_proc(bootstrap: str, topic: str, count: int, size: int, acks: str,
                  partitions: int, first_partition: int, deadline: float,
                  go: Any, out: Any) -> None:
    from confluent_kafka import Producer

    errors = [0]
    first_error: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1
            if not first_error:
                first_error.append(str(err))

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "compression.type": "none",
        "batch.size": 1_000_000,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": False,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "message.timeout.ms": max(1000, int((deadline - time.time()) * 1000)),
    })
    # Connect and fetch metadata before the clock starts.
    producer.list_topics(topic, timeout=15)
    payload = os.urandom(size)
    # produce_batch() hands librdkafka a list per call: far less Python per record than
    # produce(), so two producer processes can outrun one broker core. Each call goes to
    # one partition; the partition moves on every call.
    chunk = 1000
    template = [{"value": payload} for _ in range(chunk)]
    go.wait(timeout=60)
    cpu0, t0 = _rusage_s(), time.time()
    sent = 0
    calls = 0
    timed_out = False
    while sent < count and not timed_out:
        n = min(chunk, count - sent)
        batch = template if n == chunk else template[:n]
        partition = (first_partition + calls) % partitions
        calls += 1
        while batch:
            queued = producer.produce_batch(topic, batch, partition=partition)
            if queued == len(batch):
                break
            # Queue full: the refused records carry '_error'; retry just those.
            refused = [m for m in batch if "_error" in m]
            for m in refused:
                del m["_error"]
            batch = refused
            producer.poll(0.005)
            if time.time() > deadline:
                timed_out = True
                n -= len(refused)
                break
        sent += n
        producer.poll(0)
    left = producer.flush(max(0.0, deadline - time.time()))
    t1, cpu1 = time.time(), _rusage_s()
    out.put({"role": "producer", "start": t0, "end": t1, "cpu_s": cpu1 - cpu0,
             "sent": sent, "unacked": left, "errors": errors[0],
             "first_error": first_error[0] if first_error else None,
             "timed_out": timed_out or left > 0})


def consumer_proc(bootstrap: str, topic: str, partitions: list[int], total: int,
                  shared_count: Any, deadline: float, go: Any, out: Any,
                  partition_fetch_bytes: int = 1_048_576, gc_threshold: int = 0) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    if gc_threshold:
        # consume() makes 10,000 Message objects per call, all tracked by the cyclic GC:
        # with Python's default threshold (700) its collections are ~35% of the consumer's
        # main thread, on any broker (--client-gc-threshold).
        import gc

        gc.set_threshold(gc_threshold, 50, 100)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "odradek-bench",  # required by the client; no group is joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": 100,
        "fetch.max.bytes": 52_428_800,
        # The clients' default (1 MiB). tansu answers at most 5 MiB whatever is asked
        # (DEFAULT_MAX_BYTES in its fetch.rs), so a larger value bound only odradek,
        # which answers what is asked as Kafka does: 4 x 10 MiB = 40 MB answers, which
        # librdkafka receives into fresh mmap()ed buffers (a page fault per 4 KiB, ~35%
        # of its receiving thread) and cannot hand out before the whole answer is in
        # (first record 0.1-0.8 s later). docs/benchmarks.md, "One consumer".
        "max.partition.fetch.bytes": partition_fetch_bytes,
        "queued.min.messages": 200_000,
        # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s by default) once
        # its local queue passes queued.min.messages; a broker that answers with full
        # max.partition.fetch.bytes (as Kafka does) trips that with 100 B records and
        # the run measures the client's pause, not the broker.
        "fetch.queue.backoff.ms": 10,
        "enable.partition.eof": False,
    })
    consumer.list_topics(topic, timeout=15)
    go.wait(timeout=60)
    cpu0, t0 = _rusage_s(), time.time()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got = errors = 0
    first_error = None
    t_last = cpu_last = 0.0
    t_first = -1.0
    while time.time() < deadline:
        msgs = consumer.consume(num_messages=10_000, timeout=0.1)
        bad = 0
        for m in msgs:
            if m.error() is not None:
                bad += 1
                if first_error is None:
                    first_error = str(m.error())
        errors += bad
        n = len(msgs) - bad
        got += n
        if n and t_first < 0:
            t_first = time.time() - t0
        if n:
            # The end is the last record's arrival: consume() waits out its timeout
            # when fewer than num_messages are left, and that wait is not the broker's.
            t_last, cpu_last = time.time(), _rusage_s()
            with shared_count.get_lock():
                shared_count.value += n
        if shared_count.value >= total:
            break
    t1, cpu1 = (t_last, cpu_last) if got else (time.time(), _rusage_s())
    consumer.close()
    out.put({"role": "consumer", "start": t0, "end": t1, "cpu_s": cpu1 - cpu0,
             "received": got, "errors": errors, "first_error": first_error,
             "first_record_s": t_first, "timed_out": shared_count.value < total})


def latency_producer_proc(bootstrap: str, topic: str, rate: int, duration_s: float,
                          size: int, linger_ms: float, go: Any, out: Any) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": linger_ms,
                         "compression.type": "none", "enable.idempotence": False,
                         "message.timeout.ms": 30_000})
    producer.list_topics(topic, timeout=15)
    pad = b"\0" * max(0, size - LATENCY_HEADER.size)
    go.wait(timeout=60)
    cpu0 = _rusage_s()
    t0 = time.perf_counter()
    total_s = LATENCY_WARMUP_S + duration_s
    sent = measured = 0
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed >= total_s:
            break
        due = int(elapsed * rate) + 1
        while sent < due:
            flag = 1 if elapsed >= LATENCY_WARMUP_S else 0
            producer.produce(topic, LATENCY_HEADER.pack(flag, time.time_ns()) + pad, partition=0)
            sent += 1
            measured += flag
        producer.poll(0)
        time.sleep(0.0002)
    left = producer.flush(30)
    out.put({"role": "latency-producer", "sent": sent, "measured_sent": measured,
             "unacked": left, "cpu_s": _rusage_s() - cpu0,
             "achieved_rate": sent / (time.perf_counter() - t0)})


def latency_consumer_proc(bootstrap: str, topic: str, expected: int, deadline: float,
                          ready: Any, out: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-bench-lat",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.poll(1.0)  # connected and fetching
    ready.set()
    cpu0 = _rusage_s()
    samples_ns: list[int] = []
    seen = 0
    # poll() returns as soon as one record is there; consume(n, timeout) would wait
    # for n records or the timeout and add that wait to every sample.
    poll = consumer.poll
    while time.time() < deadline and len(samples_ns) < expected:
        m = poll(0.1)
        if m is None:
            continue
        now = time.time_ns()
        if m.error() is not None:
            continue
        seen += 1
        flag, sent_ns = LATENCY_HEADER.unpack_from(m.value())
        if flag:
            samples_ns.append(now - sent_ns)
    consumer.close()
    out.put({"role": "latency-consumer", "received": seen, "samples_ns": samples_ns,
             "cpu_s": _rusage_s() - cpu0})


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------
@dataclass
class Result:
    broker: str
    workload: str
    records: int = 0
    record_bytes: int = 0
    wall_s: float = 0.0
    records_per_s: float = 0.0
    mb_per_s: float = 0.0
    broker_cpu_cores: float = 0.0
    client_cpu_cores: float = 0.0
    other_cpu_cores: float = 0.0  # everything else on the machine: noise if large
    bound: str = ""
    timed_out: bool = False
    errors: int = 0
    first_error: str | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class BrokerCpu:
    """CPU seconds of the broker process and its children."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)

    def seconds(self) -> float:
        import psutil

        total = 0.0
        procs = [self.proc]
        try:
            procs += self.proc.children(recursive=True)
        except psutil.Error:
            pass
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total


class CpuSampler:
    """Samples (time, machine busy CPU s, broker CPU s) at SAMPLE_HZ in a thread, so
    CPU can be read over exactly the window the clients were active."""

    def __init__(self, broker: BrokerCpu) -> None:
        import threading

        self.broker = broker
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _busy_s() -> float:
        import psutil

        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0)

    def _sample(self) -> None:
        self.samples.append((time.time(), self._busy_s(), self.broker.seconds()))

    def _run(self) -> None:
        while not self._stop.wait(1.0 / SAMPLE_HZ):
            self._sample()

    def __enter__(self) -> Self:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()

    def at(self, t: float) -> tuple[float, float]:
        """(machine busy s, broker s) at time t, interpolated between samples."""
        xs = self.samples
        if t <= xs[0][0]:
            return xs[0][1], xs[0][2]
        for (t0, m0, b0), (t1, m1, b1) in itertools.pairwise(xs):
            if t0 <= t <= t1:
                f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
                return m0 + f * (m1 - m0), b0 + f * (b1 - b0)
        return xs[-1][1], xs[-1][2]

    def over(self, start: float, end: float) -> tuple[float, float]:
        """(machine busy s, broker s) spent between start and end."""
        m0, b0 = self.at(start)
        m1, b1 = self.at(end)
        return m1 - m0, b1 - b0


def finish(res: Result, sampler: CpuSampler, start: float, end: float,
           client_cpu_s: float) -> None:
    """Broker CPU over the clients' window, and other processes' CPU over it: a loaded
    machine makes every number noisy."""
    wall = end - start
    if wall <= 0:
        return
    machine_s, broker_s = sampler.over(start, end)
    res.broker_cpu_cores = broker_s / wall
    res.other_cpu_cores = max(0.0, (machine_s - broker_s - client_cpu_s) / wall)


def note_noise(res: Result) -> None:
    if res.other_cpu_cores >= NOISY_OTHER_CORES:
        res.bound += f"; NOISY: other processes used {res.other_cpu_cores:.2f} cores"


def verdict(broker_cores: float, client_procs: list[dict[str, Any]], wall_s: float,
            other_cores: float = 0.0) -> str:
    cores = os.cpu_count() or 1
    client_cores = sum(r["cpu_s"] for r in client_procs) / wall_s if wall_s else 0.0
    busiest_client = max((r["cpu_s"] / max(1e-9, r["end"] - r["start"]) for r in client_procs),
                         default=0.0)
    parts = []
    if broker_cores >= SATURATED_FRACTION:
        parts.append("broker")
    if busiest_client >= SATURATED_FRACTION:
        parts.append("client")
    if broker_cores + client_cores + other_cores >= MACHINE_SATURATED_FRACTION * cores:
        parts.append(f"machine ({cores} cores)")
    return "+".join(parts) + "-bound" if parts else "neither saturated"


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names],
                                  operation_timeout=30, request_timeout=30)
    for f in futures.values():
        f.result(timeout=60)
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(timeout=10)
        if all(n in md.topics and len(md.topics[n].partitions) == partitions and
               all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topics {names} not ready after 30 s")


def warm_group(bootstrap: str, topic: str) -> None:
    """The consumers name a group.id, so librdkafka looks up its coordinator at start:
    odradek then creates __consumer_offsets (50 partitions, ~1-2 s on this machine),
    which overlapped the first measured consume run. Do it before any run."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-bench",
                         "enable.auto.commit": False})
    try:
        consumer.committed([TopicPartition(topic, 0)], timeout=60)  # OffsetFetch: coordinator up
    finally:
        consumer.close()


def collect(ctx: Any, procs: list[Any], out: Any, n: int, deadline: float) -> list[dict[str, Any]]:
    results = []
    import queue as queue_mod

    while len(results) < n:
        try:
            results.append(out.get(timeout=max(0.1, deadline + CLIENT_JOIN_GRACE_S - time.time())))
        except queue_mod.Empty:
            break
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
    return results


# --client-preload: LD_PRELOAD of the client processes only (the brokers are
# started before it is set, and it is unset again once the clients are spawned)
CLIENT_PRELOAD: str | None = None


def run_clients(ctx: Any, cpu: BrokerCpu, procs: list[Any], go: Any, out: Any,
                deadline: float) -> tuple[list[dict[str, Any]], CpuSampler]:
    before = os.environ.get("LD_PRELOAD")
    if CLIENT_PRELOAD:
        os.environ["LD_PRELOAD"] = CLIENT_PRELOAD  # a spawned child takes this environment
    try:
        for p in procs:
            p.start()
    finally:
        if before is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = before
    time.sleep(1.0)  # let the clients connect and fetch metadata
    with CpuSampler(cpu) as sampler:
        go.set()
        rs = collect(ctx, procs, out, len(procs), deadline)
    return rs, sampler


def summarize(res: Result, rs: list[dict[str, Any]], sampler: CpuSampler, records: int) -> None:
    start, end = min(r["start"] for r in rs), max(r["end"] for r in rs)
    res.wall_s = end - start
    res.records = records
    res.records_per_s = records / res.wall_s if res.wall_s else 0.0
    res.mb_per_s = res.records_per_s * res.record_bytes / 1e6
    client_cpu_s = sum(r["cpu_s"] for r in rs)
    res.client_cpu_cores = client_cpu_s / res.wall_s if res.wall_s else 0.0
    finish(res, sampler, start, end, client_cpu_s)
    res.bound = verdict(res.broker_cpu_cores, rs, res.wall_s, res.other_cpu_cores)
    note_noise(res)
    res.errors = sum(r["errors"] for r in rs)
    res.first_error = next((r["first_error"] for r in rs if r["first_error"]), None)


def run_produce(ctx: Any, broker: BrokerProcess, cpu: BrokerCpu, name: str, topic: str,
                count: int, size: int, acks: str, args: argparse.Namespace) -> Result:
    go, out = ctx.Event(), ctx.Queue()
    deadline = time.time() + args.workload_timeout_s
    n = args.producers
    shares = [count // n + (1 if i < count % n else 0) for i in range(n)]
    procs = [ctx.Process(target=producer_proc, daemon=True,
                         args=(broker.bootstrap, topic, shares[i], size, acks, args.partitions,
                               i * max(1, args.partitions // n), deadline, go, out))
             for i in range(n)]
    rs, sampler = run_clients(ctx, cpu, procs, go, out, deadline)
    res = Result(broker.kind, name, record_bytes=size,
                 extra={"producers": n, "acks": acks, "requested": count})
    if not rs:
        res.timed_out = True
        return res
    acked = sum(r["sent"] - r["unacked"] - r["errors"] for r in rs)
    summarize(res, rs, sampler, acked)
    res.timed_out = len(rs) < n or any(r["timed_out"] for r in rs) or acked < count
    return res


def run_consume(ctx: Any, broker: BrokerProcess, cpu: BrokerCpu, name: str, topic: str,
                count: int, size: int, args: argparse.Namespace) -> Result:
    go, out = ctx.Event(), ctx.Queue()
    shared = ctx.Value("q", 0)
    deadline = time.time() + args.workload_timeout_s
    n = min(args.consumers, args.partitions)
    assignment = [[p for p in range(args.partitions) if p % n == i] for i in range(n)]
    procs = [ctx.Process(target=consumer_proc, daemon=True,
                         args=(broker.bootstrap, topic, assignment[i], count, shared,
                               deadline, go, out, args.partition_fetch_bytes,
                               args.client_gc_threshold))
             for i in range(n)]
    rs, sampler = run_clients(ctx, cpu, procs, go, out, deadline)
    res = Result(broker.kind, name, record_bytes=size, extra={"consumers": n, "expected": count})
    if not rs:
        res.timed_out = True
        return res
    received = sum(r["received"] for r in rs)
    summarize(res, rs, sampler, received)
    res.extra["first_record_s"] = max(r.get("first_record_s", -1.0) for r in rs)
    res.timed_out = len(rs) < n or received < count
    return res


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def run_latency(ctx: Any, broker: BrokerProcess, cpu: BrokerCpu, topic: str,
                args: argparse.Namespace) -> Result:
    ready, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    expected = int(args.latency_rate * args.latency_s)
    deadline = time.time() + LATENCY_WARMUP_S + args.latency_s + 30
    consumer = ctx.Process(target=latency_consumer_proc, daemon=True,
                           args=(broker.bootstrap, topic, expected, deadline, ready, out))
    producer = ctx.Process(target=latency_producer_proc, daemon=True,
                           args=(broker.bootstrap, topic, args.latency_rate, args.latency_s,
                                 args.latency_size, args.latency_linger_ms, go, out))
    consumer.start()
    producer.start()
    ready.wait(timeout=30)
    with CpuSampler(cpu) as sampler:
        t0 = time.time()
        go.set()
        rs = collect(ctx, [producer, consumer], out, 2, deadline)
        wall = time.time() - t0
    res = Result(broker.kind, f"latency {args.latency_rate}/s", record_bytes=args.latency_size)
    by_role = {r["role"]: r for r in rs}
    prod, cons = by_role.get("latency-producer"), by_role.get("latency-consumer")
    res.wall_s = wall
    if prod is None or cons is None:
        res.timed_out = True
        return res
    in_order = [x / 1e6 for x in cons["samples_ns"]]
    samples = sorted(in_order)
    res.records = len(samples)
    res.records_per_s = prod["achieved_rate"]
    res.mb_per_s = res.records_per_s * args.latency_size / 1e6
    res.timed_out = len(samples) < min(expected, prod["measured_sent"])
    res.latency_ms = {
        "p50": percentile(samples, 0.50),
        "p99": percentile(samples, 0.99),
        "p99.9": percentile(samples, 0.999),
        "max": samples[-1] if samples else float("nan"),
        "mean": statistics.fmean(samples) if samples else float("nan"),
    }
    tenth = max(1, len(in_order) // 10)
    first_p50 = statistics.median(in_order[:tenth]) if in_order else float("nan")
    last_p50 = statistics.median(in_order[-tenth:]) if in_order else float("nan")
    res.extra = {"rate": args.latency_rate, "seconds": args.latency_s,
                 "measured_sent": prod["measured_sent"], "received": len(samples),
                 "producer_linger_ms": args.latency_linger_ms, "producer_acks": "1",
                 "consumer_fetch_wait_max_ms": 100,
                 "p50_first_tenth_ms": first_p50, "p50_last_tenth_ms": last_p50}
    # Latency that keeps growing means the pipeline cannot sustain the rate.
    res.bound = ("falls behind (p50 first/last tenth "
                 f"{first_p50:.0f}/{last_p50:.0f} ms)" if last_p50 > 2 * first_p50 + 50
                 else "keeps up")
    res.client_cpu_cores = (prod["cpu_s"] + cons["cpu_s"]) / wall if wall else 0.0
    finish(res, sampler, t0, t0 + wall, prod["cpu_s"] + cons["cpu_s"])
    note_noise(res)
    return res


@contextlib.contextmanager
def py_spy(args: argparse.Namespace, kind: str, broker: BrokerProcess, name: str) -> Any:
    """Sample odradek's broker with py-spy for the length of one workload (--py-spy DIR):
    collapsed stacks in DIR/<name>.txt (flamegraph.pl or speedscope read them)."""
    if not args.py_spy or kind != "odradek":
        yield
        return
    import shutil
    import signal
    import subprocess

    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    args.py_spy.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen([exe, "record", "--pid", str(broker.pid), "--rate", "250",
                            "--format", "raw", "--output", str(args.py_spy / f"{name}.txt")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the clients start
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


def bench_broker(kind: str, args: argparse.Namespace, log: Any) -> list[Result]:
    ctx = mp.get_context("spawn")
    work = Path(tempfile.mkdtemp(prefix=f"odradek-bench-{kind}-", dir=args.data_parent))
    broker = BrokerProcess(kind, data_dir=work / "data", log_path=work / "broker.log",
                           ready_timeout_s=60)
    results: list[Result] = []
    log(f"[{kind}] starting broker (log {broker.log_path})")
    broker.start()
    try:
        cpu = BrokerCpu(broker.pid or 0)
        n_small, n_big = args.records_100b, args.records_1k
        plan = [("100B", 100, n_small), ("1KiB", 1024, n_big)]
        acks_plan = [("1", "acks1"), ("all", "acksall")]
        if args.single:
            plan, acks_plan = plan[:1], acks_plan[:1]
        topics = [f"bench-{label}-{acks}" for label, _, _ in plan for acks in ("acks1", "acksall")]
        create_topics(broker.bootstrap, topics, args.partitions)
        create_topics(broker.bootstrap, ["bench-latency"], 1)
        warm_group(broker.bootstrap, topics[0])
        if args.latency_only:
            plan = []
        for label, size, count in plan:
            written = 0
            for acks, acks_name in acks_plan:
                name = f"produce {label} acks={acks}"
                runs = []
                for i in range(args.repeat):
                    log(f"[{kind}] {name}: {count:,} records (run {i + 1}/{args.repeat})")
                    if args.recycle_pages:
                        recycle_free_pages(work, count * size * 5 // 4)
                    with py_spy(args, kind, broker, f"produce-{label}-acks{acks}-{i}"):
                        runs.append(run_produce(ctx, broker, cpu, name,
                                                f"bench-{label}-{acks_name}", count, size, acks,
                                                args))
                    log(f"[{kind}]   {fmt_result(runs[-1])}")
                    if not broker.is_running():
                        raise RuntimeError(f"{kind} broker died; log tail:\n{broker.log_tail()}")
                if acks == "1":
                    written = sum(r.records for r in runs)
                results.append(median_run(runs))
            name = f"consume {label}"
            # Each consume run reads all the produce runs wrote (--repeat times count):
            # a 1M-record run lasts ~0.6 s, too short to judge.
            to_read = max(count, written) if args.consume_all else count
            runs = []
            for i in range(args.repeat):
                log(f"[{kind}] {name}: {to_read:,} records (run {i + 1}/{args.repeat})")
                with py_spy(args, kind, broker, f"consume-{label}-{i}"):
                    runs.append(run_consume(ctx, broker, cpu, name, f"bench-{label}-acks1",
                                            to_read, size, args))
                log(f"[{kind}]   {fmt_result(runs[-1])}")
            results.append(median_run(runs))
        if not args.single:
            log(f"[{kind}] latency: {args.latency_rate}/s for {args.latency_s} s")
            r = run_latency(ctx, broker, cpu, "bench-latency", args)
            log(f"[{kind}]   {fmt_result(r)}")
            results.append(r)
    except Exception as e:  # noqa: BLE001 - a broker that fails a workload still gets a report
        results.append(Result(kind, "error", first_error=f"{type(e).__name__}: {e}",
                              timed_out=True))
        log(f"[{kind}] FAILED: {e}")
    finally:
        broker.close()
        try:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        except OSError:
            pass
    return results


def median_run(runs: list[Result]) -> Result:
    """The run with the median records/s; the others' rates go in extra."""
    ordered = sorted(runs, key=lambda r: r.records_per_s)
    chosen = ordered[(len(ordered) - 1) // 2]
    chosen.extra["runs_records_per_s"] = [round(r.records_per_s) for r in runs]
    chosen.timed_out = chosen.timed_out or any(r.timed_out for r in runs)
    return chosen


def fmt_result(r: Result) -> str:
    if r.latency_ms:
        lat = r.latency_ms
        return (f"p50 {lat['p50']:.2f} ms  p99 {lat['p99']:.2f} ms  p99.9 {lat['p99.9']:.2f} ms"
                f"  ({r.records:,} samples){'  TIMED OUT' if r.timed_out else ''}")
    return (f"{r.records_per_s:,.0f} rec/s  {r.mb_per_s:.1f} MB/s  broker {r.broker_cpu_cores:.2f}"
            f" cores  clients {r.client_cpu_cores:.2f} cores  {r.bound}"
            f"{'  TIMED OUT' if r.timed_out else ''}"
            f"{f'  errors={r.errors} ({r.first_error})' if r.errors else ''}")


def print_table(results: list[Result]) -> None:
    print()
    head = (f"{'broker':8} {'workload':24} {'records':>10} {'rec/s':>11} {'MB/s':>8} "
            f"{'broker cpu':>10} {'client cpu':>10} {'other cpu':>9}  {'p50 ms':>7} {'p99 ms':>7} {'p99.9 ms':>8}  note")
    print(head)
    print("-" * len(head))
    for r in results:
        lat = r.latency_ms
        lat_cols = (f"{lat['p50']:7.2f} {lat['p99']:7.2f} {lat['p99.9']:8.2f}" if lat
                    else f"{'':7} {'':7} {'':8}")
        note = ("TIMED OUT " if r.timed_out else "") + r.bound
        if r.first_error:
            note += f" err: {r.first_error[:60]}"
        print(f"{r.broker:8} {r.workload:24} {r.records:>10,} {r.records_per_s:>11,.0f} "
              f"{r.mb_per_s:>8.1f} {r.broker_cpu_cores:>10.2f} {r.client_cpu_cores:>10.2f} "
              f"{r.other_cpu_cores:>9.2f}  "
              f"{lat_cols}  {note}")


def ratios(results: list[Result]) -> dict[str, dict[str, float]]:
    by = {(r.broker, r.workload): r for r in results}
    out: dict[str, dict[str, float]] = {}
    for (broker, workload), r in by.items():
        if broker != "odradek" or (("tansu", workload) not in by):
            continue
        t = by[("tansu", workload)]
        row: dict[str, float] = {}
        if t.records_per_s and r.records_per_s and not r.latency_ms:
            row["records_per_s"] = r.records_per_s / t.records_per_s
        if t.broker_cpu_cores and r.broker_cpu_cores and t.records_per_s and r.records_per_s:
            # CPU per record, odradek over tansu: >1 means odradek spends more per record
            row["broker_cpu_per_record"] = ((r.broker_cpu_cores / r.records_per_s)
                                            / (t.broker_cpu_cores / t.records_per_s))
        for q in ("p50", "p99", "p99.9"):
            if r.latency_ms.get(q) and t.latency_ms.get(q):
                row[f"latency_{q}"] = r.latency_ms[q] / t.latency_ms[q]
        out[workload] = row
    return out


def filesystem_of(path: str) -> str:
    """Filesystem type under path (odradek's data dir lives there: ext4 vs tmpfs matters)."""
    import psutil

    best = None
    for part in psutil.disk_partitions(all=True):
        if path.startswith(part.mountpoint) and (
            best is None or len(part.mountpoint) > len(best.mountpoint)
        ):
            best = part
    return f"{best.fstype} at {best.mountpoint}" if best else "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10x fewer records, 3 s latency run")
    ap.add_argument("--only", choices=BROKERS, help="run one broker only")
    ap.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    ap.add_argument("--consumers", type=int, default=2, help="consumer processes (default 2)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions per topic (default 4)")
    ap.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                    help="sample odradek's broker with py-spy during each workload; "
                         "collapsed stacks go to DIR")
    ap.add_argument("--records", type=int, default=None,
                    help="records of the 100 B workloads (default 1,000,000; quick 100,000)")
    ap.add_argument("--single", action="store_true",
                    help="the single-client workload: one producer (linger.ms=5, 100 B, acks=1) "
                         "and one consumer; no 1 KiB, acks=all or latency runs")
    ap.add_argument("--partition-fetch-bytes", type=int, default=1_048_576,
                    help="consumers' max.partition.fetch.bytes (default 1 MiB, the clients' "
                         "default; until 2026-11-26 the bench used 10 MiB)")
    ap.add_argument("--client-gc-threshold", type=int, default=0,
                    help="gc.set_threshold(N) in the consumer processes (default: Python's)")
    ap.add_argument("--client-preload", default=None, metavar="LIB",
                    help="LD_PRELOAD for the client processes only, e.g. "
                         "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 to see how much of a "
                         "client-bound row is glibc malloc's (docs/benchmarks.md)")
    ap.add_argument("--consume-count", dest="consume_all", action="store_false",
                    help="consume runs read only --records records, not all the produce "
                         "runs wrote")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each throughput workload; the median is reported (default 3)")
    ap.add_argument("--latency-rate", type=int, default=5000, help="msg/s (default 5000)")
    ap.add_argument("--latency-size", type=int, default=100, help="bytes (default 100)")
    ap.add_argument("--latency-linger-ms", type=float, default=5,
                    help="producer linger.ms in the latency run (default 5)")
    ap.add_argument("--workload-timeout-s", type=float, default=None,
                    help="deadline of each workload (default 300, quick 60)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory for the JSON")
    ap.add_argument("--data-parent", type=Path, default=None,
                    help="where odradek's data dir goes (default: the temp dir); "
                         "/dev/shm puts it in memory like tansu's memory storage")
    ap.add_argument("--latency-only", action="store_true",
                    help="only the latency workload (with --latency-rate: e2e latency at a "
                         "chosen share of the peak rate; the 2-process latency workload "
                         "keeps up to ~400k records/s here)")
    ap.add_argument("--no-recycle-pages", dest="recycle_pages", action="store_false",
                    help="do not write and delete each produce run's bytes in the data dir's "
                         "filesystem before the run (bench/pages.py: on a VM a page left "
                         "unused costs several times more to fill the first time)")
    args = ap.parse_args(argv)
    if args.client_preload is not None:
        if not Path(args.client_preload).is_file():
            ap.error(f"--client-preload {args.client_preload}: no such file")
        global CLIENT_PRELOAD
        CLIENT_PRELOAD = args.client_preload
    if args.single:
        args.producers = args.consumers = 1
    scale = 10 if args.quick else 1
    args.records_100b = args.records or 1_000_000 // scale
    args.records_1k = 200_000 // scale
    args.latency_s = 3.0 if args.quick else 10.0
    if args.workload_timeout_s is None:
        args.workload_timeout_s = 60.0 if args.quick else 300.0

    def log(msg: str) -> None:
        print(msg, flush=True)

    kinds = [args.only] if args.only else list(BROKERS)
    started = time.time()
    results: list[Result] = []
    for kind in kinds:
        results += bench_broker(kind, args, log)
    print_table(results)
    rat = ratios(results)
    if rat:
        print("\nodradek / tansu (records/s: >1 is odradek faster; latency and CPU/record: <1 is"
              " odradek better)")
        for workload, row in rat.items():
            cols = "  ".join(f"{k} {v:.2f}" for k, v in row.items())
            print(f"  {workload:24} {cols}")

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = args.out / f"bench-{stamp}{'-quick' if args.quick else ''}.json"
    import psutil

    doc = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "duration_s": time.time() - started,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_at_end": os.getloadavg(),
                    "odradek_data_fs": filesystem_of(str(args.data_parent or tempfile.gettempdir())),
                    "platform": platform.platform(),
                    "memory_gb": round(psutil.virtual_memory().total / 2**30, 1)},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "results": [asdict(r) for r in results],
        "ratios_odradek_over_tansu": rat,
    }
    path.write_text(json.dumps(doc, indent=2))
    print(f"\nwrote {path} ({time.time() - started:.0f} s)")
    return 1 if any(r.workload == "error" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
