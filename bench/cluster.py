"""What replication costs, and how fast a partition fails over.

    python bench/cluster.py                  # 200k records of 1 KiB, 3 failover rounds
    python bench/cluster.py --records 50000 --rounds 5
    python bench/cluster.py --records 300000 --rounds 0 --repeat 5 --throughput-acks all

Throughput: one confluent-kafka producer (produce_batch, linger.ms=5,
acks=all, no compression) sends `--records` records of `--size` bytes to a
topic with 6 partitions, in the same run to:

  single   one odradek node (process.roles=broker,controller), RF=1
  cluster  one controller + three brokers on this box, RF=3, min.insync.replicas=2

and reports records/s, MB/s, and the CPU seconds of the broker processes
(all of them: on a two-core box the cluster's three brokers share the cores,
so CPU per record is the fairer number) and of the client. The brokers' CPU
is read once every replica holds every byte: at acks=1 the followers are
still copying when the producer's last record is acknowledged (the JSON's
`replicated_s` says when they were done). The brokers' idle
CPU is sampled for IDLE_S before each run (the cluster's heartbeats every
250 ms and follower long-polls of 200 ms cost ~0.05 cores in all, the single
node ~0.003) and the CPU per record is also given less that rate over the
run's wall time: on a loaded box the wall time, and with it the idle share,
varies from run to run.

`--broker-cores X` puts every broker process (RF=1's node, RF=3's three brokers
and controller) in its own cgroup with a CPU quota of X cores (bench/cpu_quota.py,
needs root): the brokers then do not share cores in the sense of issue 18 item 3,
each getting X of a core whatever the others do, as on a host with a core of its
own per broker. Keep 3*X plus the producer's cores (~0.55) under the box's; the
JSON gives each broker's cores used, its throttled 10 ms periods and the box's
cores used. `--broker-cores 0.4` on this 2-core box: RF=3 acks=all ran at 0.79-1.05x
RF=1's records/s (docs/benchmarks.md, "The sixth look").

`--rf1-nodes 3` also runs three single-node brokers at once, one producer each
(RF=1 with three broker processes sharing the cores as the cluster's do), and
gives the RF=3 ratio against that too. Each run reports its user and system
CPU per record apart. `--py-spy DIR` samples every broker during the throughput
runs; the sampler slows the brokers, so do not compare those runs' figures with others.

Failover: on the cluster, a topic with one partition, RF=3. A producer sends
one acks=all record at a time (each waits for its acknowledgement); the
partition leader is killed with SIGKILL; the clock runs from the kill to the
acknowledgement of the first record sent after it. Timeouts are lowered as
Kafka's own tests lower them (broker.session.timeout.ms=2000,
broker.heartbeat.interval.ms=250): fencing the dead leader dominates.

Latency (`--latency`): on each setup, a topic with one partition (RF=1 on
the single node; RF=3, min.insync.replicas=2 on the cluster), one producer
(acks=all, linger.ms=5 as bench/run.py; `--acks 1 all` and `--linger-ms 0 5` run each
combination) paced at `--rate` records/s for `--seconds` and one consumer
(fetch.wait.max.ms=100, assigned, no group) reading from the start: p50/p99/p99.9/max of the
produce latency (send -> acknowledgement) and of the end-to-end latency
(send -> the consumer has it; the high watermark gates it, so at RF=3 it
includes replication). linger.ms=5 is librdkafka's default since 1.5 (and the Java
client's since Kafka 4.0): a record waits up to 5 ms in the producer before it is sent,
so at a few thousand records/s it sets the floor of both latencies; linger.ms=0 shows
what the brokers add.

    python bench/cluster.py --latency --rate 5000 --seconds 10
    python bench/cluster.py --latency --acks 1 all --linger-ms 0 5
    python bench/cluster.py --latency --acks 1 all --linger-ms 5 --probe 1000

`--probe N` adds, per acks, N records through bench/rawload.py's probe: one pre-encoded
record at a time, a Fetch parked before it, no client library, so what is left is the
brokers' (and the kernel's) share of the trip.

Results are printed and written to bench/results/cluster-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.cpu_quota import CpuQuota, available
from bench.pages import recycle_free_pages
from bench.rawload import percentiles, run_probe
from bench.run import warm_group
from tests.integration.broker_proc import BrokerProcess
from tests.integration.cluster_proc import ClusterProcesses

PARTITIONS = 6
CHUNK = 1000
BATCH_BYTES = 1_000_000  # the producer's batch.size (--batch-bytes)
IDLE_S = 3.0  # the brokers' idle CPU is sampled this long before a throughput run


def cpu_seconds(pids: list[int]) -> float:
    return sum(user_sys_seconds(pids))


def _processes(pids: list[int]) -> list[Any]:
    """The processes still running (a broker may have exited)."""
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            pass
    return out


def _summed(pids: list[int], figures: Any) -> tuple[float, ...]:
    """`figures(process)` (a tuple) summed over the processes still running."""
    totals: list[float] = []
    for proc in _processes(pids):
        try:
            values = figures(proc)
        except psutil.Error:
            continue
        totals = [a + b for a, b in zip(totals, values)] if totals else list(values)
    return tuple(totals) if totals else (0.0, 0.0)


def user_sys_seconds(pids: list[int]) -> tuple[float, float]:
    user, system = _summed(pids, lambda p: p.cpu_times()[:2])
    return user, system


def runqueue_wait_s(pid: int) -> float:
    """Seconds the process's threads have waited for a core while runnable
    (/proc/<pid>/task/*/schedstat, second field): how much a broker shared the
    cores with other runnable work."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def rss_bytes(pids: list[int]) -> int:
    return int(_summed(pids, lambda p: (p.memory_info().rss, 0))[0])


def minor_faults(pids: list[int]) -> int:
    """Minor page faults of the processes so far (/proc/<pid>/stat, field 10)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                total += int(f.read().rpartition(")")[2].split()[7])
        except (OSError, ValueError, IndexError):
            pass
    return total


def ctx_switches(pids: list[int]) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of the processes so far."""
    vol, invol = _summed(pids, lambda p: tuple(p.num_ctx_switches()))
    return int(vol), int(invol)


def cpu_sleeps() -> int | None:
    """How often this machine's CPUs have entered a sleeping idle state (every
    cpuidle state but POLL, all CPUs). In a VM each is a halt the hypervisor sees:
    the vCPU may lose its physical core and come back to cold caches. None where
    the kernel has no cpuidle."""
    total, found = 0, False
    for state in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpuidle/state[0-9]*"):
        try:
            if (state / "name").read_text().strip() == "POLL":
                continue
            total += int((state / "usage").read_text())
            found = True
        except (OSError, ValueError):
            continue
    return total if found else None


def topic_log_bytes(data_dirs: list[Path], topic: str) -> list[int]:
    """Each data dir's bytes of `topic`'s segment files (all its partitions)."""
    return [sum(f.stat().st_size for f in d.glob(f"{topic}-*/*.log")
                if f.parent.name.rsplit("-", 1)[0] == topic) for d in data_dirs]


def wait_replicated(data_dirs: list[Path], topic: str, timeout: float = 120.0) -> None:
    """Until every replica holds every byte of `topic` (each dir the same size, not
    growing). At acks=1 the producer's last acknowledgement comes before the
    followers have copied the run's tail: their copying is the run's cost too."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        sizes = topic_log_bytes(data_dirs, topic)
        if sizes[0] > 0 and len(set(sizes)) == 1 and sizes == last:
            return
        last = sizes
        time.sleep(0.005)
    raise TimeoutError(f"replicas of {topic} not caught up after {timeout} s: {last}")


def create(bootstrap: str, topic: str, partitions: int, rf: int,
           config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})]).values():
        f.result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics[topic]
        if md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} not ready")


def _producer(bootstrap: str, errors: list[str], acks: str = "all",
              batches: list[int] | None = None) -> Any:
    """`batches`: librdkafka's statistics add the number of batches it produced
    (the `batchcnt` histogram's count, per statistics window) to batches[0]."""
    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    def on_stats(stats_json: str) -> None:
        if batches is not None:
            for topic in json.loads(stats_json).get("topics", {}).values():
                batches[0] += int(topic.get("batchcnt", {}).get("cnt", 0))

    return Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
        "compression.type": "none", "batch.size": BATCH_BYTES,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True, "on_delivery": on_delivery,
        "message.timeout.ms": 300_000,
        "statistics.interval.ms": 100, "stats_cb": on_stats,
    })


def _send_all(p: Any, topic: str, records: int, size: int) -> int:
    """Send `records` records round the partitions; the records not delivered."""
    template = [{"value": os.urandom(size)} for _ in range(CHUNK)]
    sent = 0
    calls = 0
    while sent < records:
        batch = [dict(m) for m in template[: min(CHUNK, records - sent)]]
        n = len(batch)
        while batch:
            queued = p.produce_batch(topic, batch, partition=calls % PARTITIONS)
            if queued == len(batch):
                break
            batch = [{"value": m["value"]} for m in batch if "_error" in m]
            p.poll(0.005)
        calls += 1
        sent += n
        p.poll(0)
    return int(p.flush(300))


def throughput(bootstrap: str | list[str], topic: str, records: int, size: int,
               broker_pids: list[int], spy_dir: Path | None = None,
               spy_name: str = "", acks: str = "all",
               recycle: tuple[Path, int] | None = None,
               replica_dirs: list[Path] | None = None,
               quotas: list[CpuQuota] | None = None) -> dict[str, Any]:
    """One producer; or, given several bootstraps, one producer per bootstrap
    at once, each sending its share of `records` (several RF=1 nodes loading
    the box as the RF=3 cluster's three brokers do). With `replica_dirs` (every
    replica's data dir) the brokers' CPU is read once every replica holds every
    byte, not at the producer's last acknowledgement. With `quotas` (one per
    broker pid, in order; --broker-cores) each broker's cores in use and how often
    its quota held it back are reported."""
    errors: list[str] = []
    bootstraps = [bootstrap] if isinstance(bootstrap, str) else bootstrap
    batches = [0]
    producers = [_producer(b, errors, acks, batches) for b in bootstraps]
    for p in producers:
        p.list_topics(topic, timeout=15)
    # Every run starts with no dirty page cache: the kernel's background writeback
    # of an earlier run's bytes (it starts at 10% of memory dirty) would otherwise
    # run during this one, and a longer run (acks=all) would share more of it.
    os.sync()
    # what the brokers burn with no records (heartbeats, metadata and follower
    # long-polls at the test cluster's short intervals): counted separately
    idle0, t_idle = cpu_seconds(broker_pids), time.monotonic()
    time.sleep(IDLE_S)
    idle_cores = (cpu_seconds(broker_pids) - idle0) / (time.monotonic() - t_idle)
    me = psutil.Process()
    if recycle is not None:  # last: pages left free for seconds go cold again
        recycle_free_pages(*recycle)
    spies = start_py_spy(spy_dir, spy_name, broker_pids)
    (user0, sys0), client0 = user_sys_seconds(broker_pids), sum(me.cpu_times()[:2])
    vol0, invol0 = ctx_switches(broker_pids)
    faults0 = minor_faults(broker_pids)
    rss0 = rss_bytes(broker_pids)
    sleeps0 = cpu_sleeps()
    broker0 = user0 + sys0
    each0 = [cpu_seconds([pid]) for pid in broker_pids]
    waits0 = [runqueue_wait_s(pid) for pid in broker_pids]
    stats0 = [q.stat() for q in quotas or []]
    for p in producers:  # statistics windows before the clock are not counted
        p.poll(0)
    batches[0] = 0
    t0 = time.monotonic()
    shares = [records // len(producers) + (i < records % len(producers))
              for i in range(len(producers))]
    if len(producers) == 1:
        left = _send_all(producers[0], topic, records, size)
    else:
        lefts = [0] * len(producers)

        def send(i: int) -> None:
            lefts[i] = _send_all(producers[i], topic, shares[i], size)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(producers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        left = sum(lefts)
    wall = time.monotonic() - t0
    if replica_dirs:
        wait_replicated(replica_dirs, topic)
    replicated = time.monotonic() - t0
    user1, sys1 = user_sys_seconds(broker_pids)
    vol1, invol1 = ctx_switches(broker_pids)
    faults1 = minor_faults(broker_pids)
    rss1 = rss_bytes(broker_pids)
    sleeps1 = cpu_sleeps()
    each1 = [cpu_seconds([pid]) for pid in broker_pids]
    waits1 = [runqueue_wait_s(pid) for pid in broker_pids]
    stats1 = [q.stat() for q in quotas or []]
    broker_cpu = user1 + sys1 - broker0
    client_cpu = sum(me.cpu_times()[:2]) - client0
    stop_py_spy(spies)
    for p in producers:  # the last statistics window
        p.poll(0.3)
    assert left == 0 and not errors, (left, errors[:3])
    quota_figures: dict[str, Any] = {}
    if quotas:
        quota_figures = {
            "broker_quota_cores": [q.cores for q in quotas],
            # each broker process's cores in use over the CPU window
            "broker_cores_used": [round((b - a) / replicated, 2) for a, b in zip(each0, each1)],
            # each broker's time runnable but not running, per second of its own CPU. The
            # kernel counts time held back by the quota here too: a broker that uses all
            # of a quota of X cores waits (1 - X) / X from that alone (1.5 at 0.4), and
            # what it waits beyond that is time it shared a core with other work
            "broker_runqueue_wait_per_cpu_s": [
                round((w1 - w0) / (b - a), 3) if b > a else None
                for w0, w1, a, b in zip(waits0, waits1, each0, each1)],
            # CFS periods (10 ms) in which the quota stopped the broker
            "broker_throttled_periods": [b["throttled_periods"] - a["throttled_periods"]
                                         for a, b in zip(stats0, stats1)],
            # the whole box: brokers plus the producer, against os.cpu_count()
            "box_cores_used": round((broker_cpu + client_cpu) / replicated, 2),
        }
    return {
        **quota_figures,
        # librdkafka's batches: odradek's broker CPU is largely per batch
        "client_batches": batches[0],
        "client_records_per_batch": round(records / batches[0]) if batches[0] else None,
        "records": records, "size": size, "wall_s": round(wall, 2),
        # time.monotonic() at the start: lines a run up with `perf record -k CLOCK_MONOTONIC`
        "monotonic_start_s": round(t0, 3),
        "records_per_s": round(records / wall), "mb_per_s": round(records * size / wall / 1e6, 1),
        # from the first send until every replica holds every byte (the CPU window)
        "replicated_s": round(replicated, 2),
        "broker_cpu_s": round(broker_cpu, 2), "client_cpu_s": round(client_cpu, 2),
        "broker_cpu_us_per_record": round(broker_cpu / records * 1e6, 1),
        # the kernel's share (socket copies, page-cache writes) and the process's own
        "broker_user_us_per_record": round((user1 - user0) / records * 1e6, 2),
        "broker_sys_us_per_record": round((sys1 - sys0) / records * 1e6, 2),
        "broker_idle_cores": round(idle_cores, 4),
        # how often the brokers slept and woke (voluntary) or were preempted, per 1,000 records
        "broker_ctx_switches_per_1k_records": [round((vol1 - vol0) / records * 1000, 1),
                                               round((invol1 - invol0) / records * 1000, 1)],
        # fresh anonymous pages the brokers touched (each costs a fault and a zeroed page)
        "broker_minor_faults_per_1k_records": round((faults1 - faults0) / records * 1000, 1),
        # how often a CPU of the machine went to sleep idle (see cpu_sleeps), per 1,000 records
        "cpu_sleeps_per_1k_records": (round((sleeps1 - sleeps0) / records * 1000, 1)
                                      if sleeps0 is not None and sleeps1 is not None else None),
        # the brokers' resident memory before and after the run (all processes, MiB)
        "broker_rss_mib": [round(rss0 / 2**20), round(rss1 / 2**20)],
        # the same less the idle rate over the run's wall time
        "broker_cpu_us_per_record_less_idle": round(
            max(broker_cpu - idle_cores * replicated, 0.0) / records * 1e6, 2),
    }


def start_py_spy(spy_dir: Path | None, name: str, pids: list[int]) -> list[Any]:
    """--py-spy DIR: sample each broker process for the length of a throughput run
    (collapsed stacks with thread names, DIR/<name>-<pid>.txt). The samplers cost CPU
    of their own, so the CPU figures of a sampled run are not comparable to others."""
    if spy_dir is None:
        return []
    import subprocess

    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    spy_dir.mkdir(parents=True, exist_ok=True)
    spies = [subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "200", "--threads",
                               "--format", "raw", "--output", str(spy_dir / f"{name}-{pid}.txt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for pid in pids]
    time.sleep(1.0)  # attached before the producer starts
    return spies


def stop_py_spy(spies: list[Any]) -> None:
    import signal
    import subprocess

    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        try:
            spy.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


def latency(bootstrap: str, topic: str, rate: int, seconds: float,
            size: int = 100, linger_ms: float = 5, acks: str = "all",
            dump: Path | None = None) -> dict[str, Any]:
    """Paced produce (acks=all by default); produce and end-to-end latency percentiles.
    `dump`: also a CSV of every record (when it was sent, its two latencies), to see
    whether a tail is a few stalls or spread over the run."""
    total = int(rate * seconds)
    sent_at: list[float] = [0.0] * total
    produce_by_i: list[float] = [-1.0] * total
    e2e_by_i: list[float] = [-1.0] * total
    acked_ms: list[float] = []
    e2e_ms: list[float] = []
    errors: list[str] = []
    done = threading.Event()

    def consume() -> None:
        seen = 0
        deadline = time.monotonic() + seconds + 60
        while seen < total and time.monotonic() < deadline:
            m = consumer.poll(0.1)  # at once when a record is there (consume(n) waits for n)
            if m is not None and m.error() is None:
                now = time.perf_counter()
                (i,) = struct.unpack_from(">i", m.value())
                if i >= 0:  # not a warm-up record
                    e2e_ms.append((now - sent_at[i]) * 1000)
                    e2e_by_i[i] = e2e_ms[-1]
                    seen += 1
        done.set()

    def on_delivery(err: Any, msg: Any) -> None:
        now = time.perf_counter()
        if err is not None:
            errors.append(str(err))
            return
        (i,) = struct.unpack_from(">i", msg.value())
        acked_ms.append((now - sent_at[i]) * 1000)
        produce_by_i[i] = acked_ms[-1]

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
                  "on_delivery": on_delivery, "message.timeout.ms": 60_000})
    for _ in range(50):  # warm: connections and metadata, not measured
        p.produce(topic, b"\xff\xff\xff\xff", partition=0,
                  on_delivery=lambda err, msg: None)
    p.flush(30)
    # the consumer reads the partition from offset 0 (no group: no rebalance in
    # the measurement) and is ready once it has seen a warm-up record
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"lat-{topic}",
        "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    ready = time.monotonic() + 30
    while not consumer.consume(1, 0.5) and time.monotonic() < ready:
        pass
    reader = threading.Thread(target=consume, daemon=True)
    pad = b"x" * max(0, size - 4)
    t0 = time.perf_counter()
    reader.start()
    for i in range(total):
        due = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= due:
                break
            p.poll(min(due - now, 0.001))
        sent_at[i] = time.perf_counter()
        p.produce(topic, struct.pack(">i", i) + pad, partition=0)
        p.poll(0)
    p.flush(60)
    done.wait(seconds + 60)
    consumer.close()
    e2e = [v for v in e2e_ms if v >= 0]
    if dump is not None:
        dump.parent.mkdir(parents=True, exist_ok=True)
        with dump.open("w") as f:
            f.write("record,sent_s,produce_ms,e2e_ms\n")
            for i in range(total):
                f.write(f"{i},{sent_at[i] - t0:.6f},{produce_by_i[i]:.3f},{e2e_by_i[i]:.3f}\n")
    return {"rate": rate, "seconds": seconds, "size": size, "linger_ms": linger_ms,
            "acks": acks, "load_1m_at_end": round(os.getloadavg()[0], 2),
            "errors": len(errors), "first_error": errors[0] if errors else None,
            "achieved_rate": round(total / (time.perf_counter() - t0)),
            "produce": percentiles(acked_ms), "e2e": percentiles(e2e)}


def failover_round(cluster: ClusterProcesses, topic: str) -> float:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0, "message.timeout.ms": 60_000,
                  "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
                  "topic.metadata.refresh.interval.ms": 1000})
    for i in range(20):  # warm: connections and metadata
        p.produce(topic, b"warm", partition=0)
    p.flush(30)
    leader = cluster.partitions(topic)[0].leader
    acked_at: list[float] = []
    stop = threading.Event()

    def sender() -> None:
        while not stop.is_set():
            sent = time.monotonic()
            done = threading.Event()

            def on_delivery(err: Any, _msg: Any, sent: float = sent,
                            done: threading.Event = done) -> None:
                if err is None:
                    acked_at.append(sent)
                done.set()

            p.produce(topic, b"x", partition=0, on_delivery=on_delivery)
            while not done.is_set() and not stop.is_set():
                p.poll(0.01)
            if acked_at and acked_at[-1] > killed_at[0]:
                return

    killed_at = [float("inf")]
    t = threading.Thread(target=sender, daemon=True)
    t.start()
    time.sleep(1.0)
    killed_at[0] = time.monotonic()
    cluster.brokers[leader].kill9()
    t.join(60)
    stop.set()
    first = next((a for a in acked_at if a > killed_at[0]), None)
    assert first is not None, "no acknowledged produce after the kill within 60 s"
    # the acknowledgement time of that record: now minus nothing we know better than
    # its delivery; take the time the sender saw it
    elapsed = time.monotonic() - killed_at[0]
    cluster.brokers[leader].restart()
    cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "ISR whole", timeout_s=60)
    p.flush(10)
    return elapsed


def main() -> int:
    global BATCH_BYTES
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3, help="failover rounds")
    ap.add_argument("--latency", action="store_true",
                    help="only the paced latency runs (RF=1 and RF=3, acks=all)")
    ap.add_argument("--rate", type=int, default=5000, help="records/s of the latency runs")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of a latency run")
    ap.add_argument("--linger-ms", type=float, nargs="*", default=[5.0],
                    help="producer linger.ms of the latency runs, one run each (default 5)")
    ap.add_argument("--acks", nargs="+", default=["all"], choices=["1", "all"],
                    help="producer acks of the latency runs, one run each (default all)")
    ap.add_argument("--probe", type=int, default=0, metavar="N",
                    help="also N records through bench/rawload.py's latency probe per acks "
                         "(one at a time, a Fetch parked before each; no client library)")
    ap.add_argument("--setups", nargs="+", default=["single", "cluster"],
                    choices=["single", "cluster"], help="which setups the latency runs use")
    ap.add_argument("--batch-bytes", type=int, default=1_000_000,
                    help="throughput: the producer's batch.size (odradek's broker CPU is "
                         "largely per batch; librdkafka's batches at acks=all on RF=3 are "
                         "about half those at acks=1)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="throughput: N rounds of RF=1 then RF=3 on the same two setups; "
                         "the ratios are the medians of the rounds' (each round's too)")
    ap.add_argument("--dump-latencies", type=Path, metavar="DIR",
                    help="latency runs: also write DIR/<run>.csv with every record's send "
                         "time and latencies (a tail of a few stalls or spread over the run)")
    ap.add_argument("--no-recycle-pages", dest="recycle_pages", action="store_false",
                    help="do not write and delete the run's bytes in the data dir's filesystem "
                         "before each throughput run (see recycle_free_pages: on a VM a page "
                         "left free for seconds costs 2-3x more to fill the first time)")
    ap.add_argument("--throughput-acks", default="all", choices=["1", "all"],
                    help="producer acks of the throughput runs (default all; 1 keeps the "
                         "followers' copying and drops the produce's wait for them)")
    ap.add_argument("--rf1-nodes", type=int, default=1, metavar="N",
                    help="also N single-node brokers at once, one producer each, RF=1: "
                         "the RF=1 cost per record when N broker processes share the cores "
                         "as the RF=3 cluster's brokers do (default 1: not run)")
    ap.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                    help="sample every broker with py-spy during the throughput runs "
                         "(raw collapsed stacks in DIR; CPU figures then include no sampler "
                         "but the brokers are slowed by it)")
    ap.add_argument("--broker-cores", type=float, default=None, metavar="X",
                    help="throughput: give every broker process (and the controller) its own "
                         "cgroup CPU quota of X cores, so that brokers do not share cores "
                         "(bench/cpu_quota.py; needs root). The producer is not limited: "
                         "3*X plus its cores should stay under the box's")
    args = ap.parse_args()
    BATCH_BYTES = args.batch_bytes
    if args.broker_cores is not None:
        if not 0 < args.broker_cores <= (os.cpu_count() or 1):  # also NaN
            ap.error(f"--broker-cores must be above 0 and at most this box's "
                     f"{os.cpu_count()} cores, not {args.broker_cores}")
        why = available()
        if why:
            ap.error(f"--broker-cores: {why}")
    if args.latency:
        return latency_main(args)
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-cluster-"))

    def recycle(rf: int) -> tuple[Path, int] | None:
        # a quarter more than the run writes (every replica's copy)
        return (base, args.records * args.size * rf * 5 // 4) if args.recycle_pages else None

    result: dict[str, Any] = {"box_cpus": os.cpu_count(), "load_1m": os.getloadavg()[0],
                              "acks": args.throughput_acks,
                              "recycled_free_pages": args.recycle_pages,
                              "batch_bytes": args.batch_bytes}

    def ratio(a: float, b: float) -> float | None:
        # None when RF=1 measured no CPU at all (a run shorter than a clock tick)
        return round(a / b, 2) if b > 0 else None

    def ratios(s: dict[str, Any], c: dict[str, Any]) -> dict[str, float | None]:
        return {
            "throughput_ratio_rf3_vs_rf1": ratio(c["records_per_s"], s["records_per_s"]),
            "cpu_ratio_per_record": ratio(c["broker_cpu_us_per_record"],
                                          s["broker_cpu_us_per_record"]),
            "cpu_ratio_per_record_less_idle": ratio(c["broker_cpu_us_per_record_less_idle"],
                                                    s["broker_cpu_us_per_record_less_idle"]),
        }

    if args.rf1_nodes > 1:
        nodes = [BrokerProcess(data_dir=base / f"single-{i}").start()
                 for i in range(args.rf1_nodes)]
        try:
            for node in nodes:
                create(node.bootstrap, "bench", PARTITIONS, 1)
            result["parallel_rf1"] = throughput(
                [n.bootstrap for n in nodes], "bench", args.records, args.size,
                [n.pid or 0 for n in nodes], args.py_spy, "rf1-parallel",
                args.throughput_acks, recycle(1))
            print(f"{args.rf1_nodes} single nodes at once, RF=1, acks={args.throughput_acks}:",
                  result["parallel_rf1"], flush=True)
        finally:
            for node in nodes:
                node.close()

    # Both setups stay up; each round runs RF=1 then RF=3 on new topics, so that a
    # ratio compares two runs a few seconds apart (the box's state drifts over minutes).
    single = BrokerProcess(data_dir=base / "single").start()
    cluster = ClusterProcesses(base / "cluster", brokers=3)
    rounds: list[dict[str, Any]] = []
    single_quotas: list[CpuQuota] = []
    cluster_quotas: list[CpuQuota] = []
    try:
        cluster.start()
        pids = [b.pid or 0 for b in cluster.brokers.values()] + [cluster.controller.pid or 0]
        if args.broker_cores is not None:
            result["broker_cores"] = args.broker_cores
            single_quotas = [CpuQuota("rf1", args.broker_cores)]
            single_quotas[0].add(single.pid or 0)
            for i, pid in enumerate(pids):
                cluster_quotas.append(CpuQuota(f"rf3-{i}", args.broker_cores))
                cluster_quotas[-1].add(pid)
        for r in range(args.repeat):
            topic = "bench" if r == 0 else f"bench-{r}"
            create(single.bootstrap, topic, PARTITIONS, 1)
            rf1 = throughput(single.bootstrap, topic, args.records, args.size,
                             [single.pid or 0], args.py_spy, "rf1", args.throughput_acks,
                             recycle(1), quotas=single_quotas)
            print(f"round {r + 1}: single node, RF=1, acks={args.throughput_acks}:", rf1,
                  flush=True)
            create(cluster.bootstrap, topic, PARTITIONS, 3, {"min.insync.replicas": "2"})
            rf3 = throughput(cluster.bootstrap, topic, args.records, args.size,
                             pids, args.py_spy, "rf3", args.throughput_acks, recycle(3),
                             [b.data_dir for b in cluster.brokers.values()], cluster_quotas)
            print(f"round {r + 1}: 3 brokers, RF=3, acks={args.throughput_acks}:", rf3,
                  flush=True)
            rounds.append({"single_rf1": rf1, "cluster_rf3": rf3, **ratios(rf1, rf3)})
            print(f"round {r + 1}:", ratios(rf1, rf3), flush=True)
        if args.rounds > 0:  # --rounds 0: throughput only
            create(cluster.bootstrap, "failover", 1, 3, {"min.insync.replicas": "2"})
            times = [failover_round(cluster, "failover") for _ in range(args.rounds)]
            result["failover_s"] = [round(t, 2) for t in times]
            result["failover_median_s"] = round(statistics.median(times), 2)
            print("failover (kill -9 of the leader -> first acks=all ack):",
                  result["failover_s"], flush=True)
    finally:
        single.close()
        cluster.close()
        for quota in single_quotas + cluster_quotas:
            quota.close()
        shutil.rmtree(base, ignore_errors=True)
    result["single_rf1"], result["cluster_rf3"] = rounds[-1]["single_rf1"], rounds[-1]["cluster_rf3"]
    for key in ratios(rounds[0]["single_rf1"], rounds[0]["cluster_rf3"]):
        # one round: its ratio; several: the median, each round's beside it
        measured = [r[key] for r in rounds if r[key] is not None]
        result[key] = statistics.median(measured) if measured else None
        if len(rounds) > 1:
            result[key + "_rounds"] = [r[key] for r in rounds]
    if len(rounds) > 1:
        result["rounds"] = rounds
    if "parallel_rf1" in result:
        # against RF=1 nodes that share the cores as the cluster's brokers do
        result["cpu_ratio_per_record_less_idle_vs_parallel_rf1"] = round(
            result["cluster_rf3"]["broker_cpu_us_per_record_less_idle"]
            / result["parallel_rf1"]["broker_cpu_us_per_record_less_idle"], 2)
    return write_result("cluster", result)


def write_result(kind: str, result: dict[str, Any]) -> int:
    out = Path(__file__).parent / "results" / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {out}")
    return 0


def _latency_runs(bootstrap: str, rf: int, label: str, args: argparse.Namespace,
                  result: dict[str, Any]) -> None:
    """One run per (linger.ms, acks), each on a new topic: the consumer reads its topic
    from offset 0, and records of an earlier run would count as samples."""
    configs = {"min.insync.replicas": "2"} if rf > 1 else None
    # The consumer names a group.id, so librdkafka looks up its coordinator: the
    # first run would otherwise include odradek creating __consumer_offsets (50
    # partitions, at RF=3 150 replicas; 0.3-0.45 s in which every produce waited:
    # the "RF=3 acks=1 linger 0 p99 150-250 ms" of earlier runs, all of it in the
    # run's first half second, --dump-latencies).
    create(bootstrap, "lat-warm", 1, rf, configs)
    warm_group(bootstrap, "lat-warm")
    for linger in args.linger_ms:
        for acks in args.acks:
            name = f"{label}_acks{acks}_linger{linger:g}"
            topic = f"lat-acks{acks}-linger{linger:g}".replace(".", "_")
            create(bootstrap, topic, 1, rf, configs)
            dump = args.dump_latencies / f"{name}.csv" if args.dump_latencies else None
            result[name] = latency(bootstrap, topic, args.rate, args.seconds,
                                   linger_ms=linger, acks=acks, dump=dump)
            print(f"{label}, RF={rf}, acks={acks}, linger.ms={linger:g}:", result[name],
                  flush=True)
    for acks in args.acks if args.probe else ():
        # the brokers' share alone: bench/rawload.py's probe, no client library
        topic = f"probe-acks{acks}"
        create(bootstrap, topic, 1, rf, configs)
        name = f"{label}_probe_acks{acks}"
        result[name] = run_probe(bootstrap, topic, count=args.probe, size=100,
                                 acks=-1 if acks == "all" else 1, park_ms=2.0)
        print(f"{label}, RF={rf}, acks={acks}, rawload probe:", result[name], flush=True)


def latency_main(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-latency-"))
    result: dict[str, Any] = {"box_cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]}
    if "single" in args.setups:
        single = BrokerProcess(data_dir=base / "single").start()
        try:
            _latency_runs(single.bootstrap, 1, "single_rf1", args, result)
        finally:
            single.close()
    if "cluster" in args.setups:
        cluster = ClusterProcesses(base / "cluster", brokers=3).start()
        try:
            _latency_runs(cluster.bootstrap, 3, "cluster_rf3", args, result)
        finally:
            cluster.close()
    shutil.rmtree(base, ignore_errors=True)
    return write_result("latency", result)


if __name__ == "__main__":
    raise SystemExit(main())
