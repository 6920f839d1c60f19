"""What a broker costs as it grows: partitions, connected clients, data on disk.

    python bench/growth.py                       # all three, bounded (~15 min)
    python bench/growth.py --only partitions --partitions 1 10 1000 10000
    python bench/growth.py --only clients --clients 1 10 100 1000
    python bench/growth.py --only data --data-gb 1 5 10

One odradek node (process.roles=broker,controller, a temporary data dir) per
section; each section stops by its deadline and removes its data.

partitions  topics are created until the broker holds 1, 10, 1,000 and 10,000
            partitions (RF=1, topics of at most 1,000 partitions). At each size:
            the time to create the added partitions, a Metadata request for every
            topic (raw socket, v1, send -> whole response; median of 5) and its
            size, the broker's RSS and open files, and its CPU while idle (5 s).
            RSS per partition is (RSS - RSS before the first topic) / partitions.
clients     1, 10, 100, 1,000 raw TCP connections, each after an ApiVersions
            handshake: RSS, open files, idle CPU (5 s); then every connection
            sends a Metadata request (no topics) every 500 ms, as a caught-up
            consumer's fetch long-poll would, and the broker's CPU is measured
            over 5 s with the request rate achieved.
data        a topic with 4 partitions (default segment.bytes, 1 GiB) gets 1 KiB
            records (acks=1) until the log holds 1 GB, then 5, then 10 (as far as
            --data-gb and free disk allow: the bench keeps 2x the target free).
            At each size: start-up after a clean stop (SIGTERM) and after kill -9
            right after the last write, each timed to the port accepting and to
            every partition's end offset answered (ListOffsets) as before.

Results are printed as a table and written to bench/results/growth-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import Wire

RESULTS_DIR = Path(__file__).resolve().parent / "results"
IDLE_S = 5.0
MAX_PER_TOPIC = 1000
API_VERSIONS, METADATA = 18, 3


def broker_facts(pid: int) -> dict[str, float]:
    p = psutil.Process(pid)
    return {"rss_mb": round(p.memory_info().rss / 2**20, 1), "open_files": p.num_fds(),
            "threads": p.num_threads()}


def cpu_cores(pid: int, seconds: float) -> float:
    p = psutil.Process(pid)
    t0, c0 = time.monotonic(), sum(p.cpu_times()[:2])
    time.sleep(seconds)
    return round((sum(p.cpu_times()[:2]) - c0) / (time.monotonic() - t0), 3)


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "cpu_idle_pct": round(psutil.cpu_times_percent(interval=1.0).idle, 1)}


NOFILE: list[int] = []  # --nofile: the broker's open-files limit, through prlimit(1)


def start_broker(work: Path, name: str, **overrides: object) -> BrokerProcess:
    wrapper = [shutil.which("prlimit") or "prlimit", f"--nofile={NOFILE[0]}:{NOFILE[0]}",
               "--"] if NOFILE else []
    b = BrokerProcess(data_dir=work / name, log_path=work / f"{name}.log",
                      overrides=overrides, ready_timeout_s=600, wrapper=wrapper)
    b.start()
    return b


def metadata_request(w: Wire, correlation_id: int, all_topics: bool) -> bytes:
    # Metadata v1: topics array, -1 = every topic, 0 = none
    w.send_request(METADATA, 1, correlation_id, struct.pack(">i", -1 if all_topics else 0),
                   header_version=1)
    frame = w.read_frame()
    assert frame is not None, "broker closed the connection"
    return frame


# ---------------------------------------------------------------------------- partitions
def bench_partitions(work: Path, sizes: list[int], deadline: float) -> list[dict[str, Any]]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    b = start_broker(work, "partitions")
    rows: list[dict[str, Any]] = []
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert b.pid is not None
        time.sleep(2.0)
        base = broker_facts(b.pid)
        rows.append({"partitions": 0, **base, "idle_cpu_cores": cpu_cores(b.pid, IDLE_S)})
        print(f"[partitions] 0: {rows[-1]}", flush=True)
        have, k = 0, 0
        for target in sizes:
            if time.monotonic() > deadline:
                rows.append({"partitions": target, "skipped": "section deadline"})
                break
            t0 = time.monotonic()
            timed_out = False
            refused = ""
            while have < target:
                n = min(MAX_PER_TOPIC, target - have)
                fs = admin.create_topics([NewTopic(f"g-{k}", n, 1)], operation_timeout=120)
                try:
                    for f in fs.values():
                        f.result(timeout=300)
                except KafkaException as e:  # a limit the broker enforces: report it
                    refused = str(e.args[0].str() if e.args else e)
                    break
                k += 1
                have += n
                if time.monotonic() > deadline:
                    timed_out = True
                    break
            # every partition has a leader
            while True:
                md = admin.list_topics(timeout=120)
                ready = sum(1 for t in md.topics.values() if t.topic.startswith("g-")
                            for p in t.partitions.values() if p.leader >= 0)
                if ready >= have or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            create_s = time.monotonic() - t0
            times, size = [], 0
            with Wire(b.bootstrap, timeout=120) as w:
                for i in range(5):
                    t = time.perf_counter()
                    size = len(metadata_request(w, i, all_topics=True))
                    times.append((time.perf_counter() - t) * 1000)
            facts = broker_facts(b.pid)
            row = {"partitions": have, "create_s": round(create_s, 2),
                   "metadata_ms": round(statistics.median(times), 2),
                   "metadata_bytes": size, **facts,
                   "rss_kb_per_partition": round((facts["rss_mb"] - base["rss_mb"]) * 1024
                                                 / have, 1),
                   "files_per_partition": round((facts["open_files"] - base["open_files"])
                                                / have, 2),
                   "idle_cpu_cores": cpu_cores(b.pid, IDLE_S), "timed_out": timed_out,
                   "open_files_limit": psutil.Process(b.pid).rlimit(psutil.RLIMIT_NOFILE)[0],
                   "machine": machine()}
            if refused:
                row["refused"] = f"{target}: {refused}"
            rows.append(row)
            print(f"[partitions] {row}", flush=True)
            if timed_out or refused:
                break
    finally:
        b.close()
    return rows


# ---------------------------------------------------------------------------- clients
async def _poll(bootstrap: str, conns: int, seconds: float, interval_s: float) -> int:
    host, port = bootstrap.rsplit(":", 1)
    body = struct.pack(">hhih", METADATA, 1, 0, 1) + b"b" + struct.pack(">i", 0)
    frame = struct.pack(">i", len(body)) + body
    done = [0]
    end = time.monotonic() + seconds

    async def one(i: int) -> None:
        r, w = await asyncio.open_connection(host, int(port))
        await asyncio.sleep(interval_s * i / conns)  # spread over the interval
        while time.monotonic() < end:
            w.write(frame)
            (size,) = struct.unpack(">i", await r.readexactly(4))
            await r.readexactly(size)
            done[0] += 1
            await asyncio.sleep(interval_s)
        w.close()

    await asyncio.gather(*(one(i) for i in range(conns)))
    return done[0]


def bench_clients(work: Path, sizes: list[int], deadline: float) -> list[dict[str, Any]]:
    b = start_broker(work, "clients")
    rows: list[dict[str, Any]] = []
    wires: list[Wire] = []
    try:
        assert b.pid is not None
        time.sleep(2.0)
        base = broker_facts(b.pid)
        rows.append({"clients": 0, **base, "idle_cpu_cores": cpu_cores(b.pid, IDLE_S)})
        print(f"[clients] 0: {rows[-1]}", flush=True)
        for target in sizes:
            if time.monotonic() > deadline:
                rows.append({"clients": target, "skipped": "section deadline"})
                break
            while len(wires) < target:
                w = Wire(b.bootstrap, timeout=60)
                w.send_request(API_VERSIONS, 0, 1, b"", header_version=1)
                assert w.read_frame() is not None
                wires.append(w)
            facts = broker_facts(b.pid)
            idle = cpu_cores(b.pid, IDLE_S)
            p = psutil.Process(b.pid)
            c0, t0 = sum(p.cpu_times()[:2]), time.monotonic()
            served = asyncio.run(_poll(b.bootstrap, target, IDLE_S, 0.5))
            dt = time.monotonic() - t0
            busy = (sum(p.cpu_times()[:2]) - c0) / dt
            row = {"clients": target, **facts,
                   "rss_kb_per_client": round((facts["rss_mb"] - base["rss_mb"]) * 1024
                                              / target, 1),
                   "idle_cpu_cores": idle,
                   "polling_req_per_s": round(served / dt),
                   "polling_cpu_cores": round(busy, 3),
                   "polling_cpu_us_per_req": round(busy * dt / max(served, 1) * 1e6, 1),
                   "machine": machine()}
            rows.append(row)
            print(f"[clients] {row}", flush=True)
    finally:
        for w in wires:
            w.close()
        b.close()
    return rows


# ---------------------------------------------------------------------------- data
def _ends(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> list[int]:
    """Every partition's end offset (ListOffsets; no group, so no __consumer_offsets)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                             for p in range(partitions)}, request_timeout=timeout_s)
    got = {tp.partition: f.result(timeout=timeout_s).offset for tp, f in fs.items()}
    return [got[p] for p in range(partitions)]


def _timed_start(b: BrokerProcess, topic: str, partitions: int, ends: list[int]
                 ) -> dict[str, float]:
    t0 = time.monotonic()
    fixed = b._fixed_port
    b._fixed_port = True
    try:
        b.start()
    finally:
        b._fixed_port = fixed
    port_s = time.monotonic() - t0
    while True:
        try:
            if _ends(b.bootstrap, topic, partitions, 10) == ends:
                break
        except Exception:  # noqa: BLE001, S110 - still loading: ask again
            pass
        if time.monotonic() - t0 > 900:
            raise TimeoutError("the partitions did not come back within 900 s")
        time.sleep(0.1)
    return {"port_s": round(port_s, 2), "serving_s": round(time.monotonic() - t0, 2)}


def _fill(bootstrap: str, topic: str, partitions: int, nbytes: int, deadline: float) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                  "compression.type": "none"})
    payload = os.urandom(1024)
    batch = [{"value": payload} for _ in range(1000)]
    sent, i = 0, 0
    while sent < nbytes and time.monotonic() < deadline:
        todo = batch
        while todo:
            queued = p.produce_batch(topic, todo, partition=i % partitions)
            if queued == len(todo):
                break
            todo = [m for m in todo if "_error" in m]
            for m in todo:
                del m["_error"]
            p.poll(0.01)
        i += 1
        sent += len(batch) * len(payload)
        p.poll(0)
    p.flush(300)
    return sent


def bench_data(work: Path, sizes_gb: list[float], deadline: float) -> list[dict[str, Any]]:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, partitions = "data", 4
    b = start_broker(work, "data")
    rows: list[dict[str, Any]] = []
    written = 0
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})  # alive until the futures end
        fs = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
        for f in fs.values():
            f.result(timeout=60)
        del admin
        for gb in sizes_gb:
            target = int(gb * 1e9)
            free = shutil.disk_usage(work).free
            if free < 2 * (target - written) + 5e9:
                rows.append({"data_gb": gb, "skipped": f"free disk {free / 1e9:.1f} GB"})
                break
            if time.monotonic() > deadline:
                rows.append({"data_gb": gb, "skipped": "section deadline"})
                break
            t0 = time.monotonic()
            written += _fill(b.bootstrap, topic, partitions, target - written, deadline)
            fill_s = time.monotonic() - t0
            ends = _ends(b.bootstrap, topic, partitions, 30)
            assert b.pid is not None
            facts = broker_facts(b.pid)
            # blocks, not sizes: the index files are preallocated sparse
            du = sum(f.stat().st_blocks * 512 for f in (work / "data").rglob("*")
                     if f.is_file())
            # kill -9 right after the last write: recovery of what was not flushed
            b.kill9()
            crash = _timed_start(b, topic, partitions, ends)
            # then a clean stop and start
            b.stop(timeout_s=300)
            clean = _timed_start(b, topic, partitions, ends)
            row = {"data_gb": round(written / 1e9, 2), "disk_gb": round(du / 1e9, 2),
                   "fill_mb_per_s": round(written / 1e6 / max(fill_s, 1e-9), 1),
                   "records": sum(ends), **facts,
                   "start_clean": clean, "start_after_kill9": crash, "machine": machine()}
            rows.append(row)
            print(f"[data] {row}", flush=True)
            if written < target:
                break  # the deadline cut the fill short
    finally:
        b.close()
    return rows


def print_table(doc: dict[str, Any]) -> None:
    for section, rows in doc["sections"].items():
        print(f"\n{section}")
        for r in rows:
            print("  " + "  ".join(f"{k}={v}" for k, v in r.items() if k != "machine"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("partitions", "clients", "data"), nargs="+")
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 10, 1000, 10000])
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 10, 100, 1000])
    ap.add_argument("--data-gb", type=float, nargs="+", default=[1, 5, 10])
    ap.add_argument("--section-timeout-s", type=float, default=600,
                    help="each section stops (and cleans up) after this (default 600)")
    ap.add_argument("--data-parent", type=Path, default=None,
                    help="where the data dirs go (default: the temp dir)")
    ap.add_argument("--nofile", type=int, default=None,
                    help="start the brokers with this open-files limit (prlimit; raising the "
                         "hard limit needs root). Default: the inherited limit")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    if args.nofile:
        NOFILE.append(args.nofile)
    sections = args.only or ["partitions", "clients", "data"]
    doc: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine(),
                           "nofile": args.nofile,
                           "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
                           "sections": {}}
    for section in sections:
        work = Path(tempfile.mkdtemp(prefix=f"odradek-growth-{section}-", dir=args.data_parent))
        deadline = time.monotonic() + args.section_timeout_s
        try:
            if section == "partitions":
                rows = bench_partitions(work, args.partitions, deadline)
            elif section == "clients":
                rows = bench_clients(work, args.clients, deadline)
            else:
                rows = bench_data(work, args.data_gb, deadline)
        except Exception as e:  # noqa: BLE001 - a section that fails still leaves a report
            rows = [{"error": f"{type(e).__name__}: {e}"[:2000]}]
            print(f"[{section}] FAILED: {e}", flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        doc["sections"][section] = rows
    doc["machine_end"] = machine()
    print_table(doc)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"growth-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
