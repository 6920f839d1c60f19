"""Leader failover after kill -9, with Kafka's default session timeouts and tuned ones.

    python bench/failover.py                 # 3 rounds with each timeout set
    python bench/failover.py --rounds 5 --sets tuned

A cluster of one controller and three brokers on this box (tests/integration/
cluster_proc.py), a topic with one partition, RF=3, min.insync.replicas=2.
One producer (acks=all, idempotent, one record in flight at a time, each
waits for its acknowledgement) and one consumer (assigned, no group,
fetch.wait.max.ms=100) run; the partition leader is killed with SIGKILL, and
the clock runs from the kill to:

  fence     the controller's log line "fencing broker(s) [N]: no heartbeat for
            S ms": the session check that saw the dead broker (S, the silence
            the controller saw, is printed too)
  commit    "fenced broker(s) [N]: committed": the fence and the new leader
            (one batch of metadata records) are in the quorum's log
  metadata  a Metadata request to a surviving broker names the new leader
            (polled every 10 ms): the metadata has propagated
  produce   the acknowledgement of the first record sent after the kill
  fetch     the consumer has the first record sent after the kill

The controller side is commit - fence (elect and commit) plus metadata - commit
(propagation), and the detection's own overshoot is S - broker.session.timeout.ms
(the session check runs every SESSION_CHECK_INTERVAL_MS). Beyond the session
timeout the controller adds (S - session) + (metadata - fence). The rest of
produce/fetch is the clients finding the new leader (librdkafka's metadata
refresh and retry backoff).

Timeout sets:

  default   Kafka's defaults: broker.session.timeout.ms=9000,
            broker.heartbeat.interval.ms=2000, replica.lag.time.max.ms=30000
  tuned     broker.session.timeout.ms=2000, broker.heartbeat.interval.ms=250,
            replica.lag.time.max.ms=2000 (as Kafka's own tests lower them), and
            clients with retry.backoff.ms=50, retry.backoff.max.ms=200

Results are printed and written to bench/results/failover-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
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

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.cluster_proc import ClusterProcesses

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TIMEOUT_SETS: dict[str, dict[str, object]] = {
    "default": {"broker.session.timeout.ms": 9000, "broker.heartbeat.interval.ms": 2000,
                "replica.lag.time.max.ms": 30000},
    "tuned": {"broker.session.timeout.ms": 2000, "broker.heartbeat.interval.ms": 250,
              "replica.lag.time.max.ms": 2000},
}
# The clients: librdkafka's defaults with Kafka's defaults; shorter retry backoffs with
# the tuned timeouts (its backoff grows to retry.backoff.max.ms=1000 while the old
# leader is still named, which is most of the client-side part).
CLIENT_SETS: dict[str, dict[str, object]] = {
    "default": {},
    "tuned": {"retry.backoff.ms": 50, "retry.backoff.max.ms": 200},
}
ROUND_DEADLINE_S = 60.0
SEQ = struct.Struct(">qd")  # sequence number, send time (time.time())
FENCING = re.compile(r"^(\S+ \S+) WARNING .*fencing broker\(s\) \[(\d+)\]: no heartbeat for "
                     r"\[(\d+)\] ms")
COMMITTED = re.compile(r"^(\S+ \S+) INFO .*fenced broker\(s\) \[(\d+)\]: committed (\d+) ms")


def _log_time(stamp: str) -> float:
    """A logging asctime ('2026-11-26 01:35:50,123', local time) as time.time()."""
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def controller_times(log_path: Path, broker: int, after: float) -> dict[str, float | None]:
    out: dict[str, float | None] = {"fence": None, "silence_ms": None, "commit": None}
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        m = FENCING.match(line)
        if m and int(m.group(2)) == broker and out["fence"] is None:
            t = _log_time(m.group(1))
            if t >= after - 0.01:
                out["fence"], out["silence_ms"] = t, float(m.group(3))
            continue
        m = COMMITTED.match(line)
        if m and int(m.group(2)) == broker and out["fence"] is not None and out["commit"] is None:
            out["commit"] = _log_time(m.group(1))
    return out


def failover_round(cluster: ClusterProcesses, topic: str, client: dict[str, object]
                   ) -> dict[str, Any]:
    leader = cluster.partitions(topic)[0].leader
    survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != leader)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 0, "message.timeout.ms": 60_000,
                  **client})
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "failover-bench",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "enable.partition.eof": False, **client})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    for _ in range(20):  # warm: connections and metadata
        p.produce(topic, SEQ.pack(-1, time.time()), partition=0)
    p.flush(30)
    stop = threading.Event()
    killed_at = [float("inf")]
    acked: list[float] = []      # ack time of records sent after the kill
    fetched: list[float] = []    # receive time of records sent after the kill
    new_leader: list[tuple[float, int]] = []

    def produce_loop() -> None:
        seq = 0
        while not stop.is_set():
            sent = time.time()
            done = threading.Event()

            def on_delivery(err: Any, _m: Any, sent: float = sent, done: threading.Event = done
                            ) -> None:
                if err is None and sent > killed_at[0]:
                    acked.append(time.time())
                done.set()

            p.produce(topic, SEQ.pack(seq, sent), partition=0, on_delivery=on_delivery)
            seq += 1
            while not done.is_set() and not stop.is_set():
                p.poll(0.005)

    def consume_loop() -> None:
        while not stop.is_set():
            for m in c.consume(num_messages=100, timeout=0.05):
                if m.error() is None and len(m.value() or b"") == SEQ.size:
                    _, sent = SEQ.unpack(m.value())
                    if sent > killed_at[0] and not fetched:
                        fetched.append(time.time())

    def metadata_loop() -> None:
        admin = AdminClient({"bootstrap.servers": survivors})
        while not stop.is_set() and not new_leader:
            try:
                t = admin.list_topics(topic, timeout=2).topics[topic].partitions[0]
                if t.leader not in (leader, -1) and time.time() > killed_at[0]:
                    new_leader.append((time.time(), t.leader))
            except Exception:  # noqa: BLE001, S110 - a survivor busy or between leaders: poll again
                pass
            time.sleep(0.01)

    threads = [threading.Thread(target=f, daemon=True)
               for f in (produce_loop, consume_loop, metadata_loop)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    killed_at[0] = time.time()
    cluster.brokers[leader].kill9()
    deadline = time.monotonic() + ROUND_DEADLINE_S
    while time.monotonic() < deadline and not (acked and fetched and new_leader):
        time.sleep(0.02)
    stop.set()
    for t in threads:
        t.join(10)
    c.close()
    k = killed_at[0]
    ctl = controller_times(cluster.controller.log_path, leader, k)

    def since(t: float | None) -> float | None:
        return round((t - k) * 1000) if t is not None else None

    row = {"killed": leader, "new_leader": new_leader[0][1] if new_leader else None,
           "fence_ms": since(ctl["fence"]), "silence_ms": ctl["silence_ms"],
           "commit_ms": since(ctl["commit"]),
           "metadata_ms": since(new_leader[0][0] if new_leader else None),
           "produce_ms": since(acked[0] if acked else None),
           "fetch_ms": since(fetched[0] if fetched else None)}
    cluster.brokers[leader].restart()
    cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "ISR whole", timeout_s=90)
    p.flush(10)
    return row


def summarize(rows: list[dict[str, Any]], session_ms: int) -> dict[str, Any]:
    def med(key: str) -> float | None:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return round(statistics.median(vals)) if vals else None

    controller = [r["silence_ms"] - session_ms + (r["metadata_ms"] - r["fence_ms"])
                  for r in rows if None not in (r["silence_ms"], r["metadata_ms"], r["fence_ms"])]
    return {k: med(k) for k in ("fence_ms", "silence_ms", "commit_ms", "metadata_ms",
                                "produce_ms", "fetch_ms")} | {
        "controller_beyond_session_ms": [round(x) for x in controller],
        "controller_beyond_session_median_ms":
            round(statistics.median(controller)) if controller else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="kills per timeout set (default 3)")
    ap.add_argument("--sets", nargs="+", choices=sorted(TIMEOUT_SETS),
                    default=["tuned", "default"])
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "sets": {}}
    for name in args.sets:
        timeouts = TIMEOUT_SETS[name]
        base = Path(tempfile.mkdtemp(prefix=f"odradek-failover-{name}-"))
        cluster = ClusterProcesses(base, overrides=timeouts)
        rows: list[dict[str, Any]] = []
        try:
            cluster.start()
            cluster.create_topic("failover", 1, 3, {"min.insync.replicas": "2"})
            for i in range(args.rounds):
                row = failover_round(cluster, "failover", CLIENT_SETS[name])
                row["loadavg"] = os.getloadavg()[0]
                rows.append(row)
                print(f"[{name}] round {i + 1}: {row}", flush=True)
        finally:
            cluster.close()
            shutil.rmtree(base, ignore_errors=True)
        summary = summarize(rows, int(str(timeouts["broker.session.timeout.ms"])))
        doc["sets"][name] = {"timeouts": timeouts, "client": CLIENT_SETS[name], "rounds": rows,
                             "median": summary}
        print(f"[{name}] median: {summary}", flush=True)
    doc["loadavg_end"] = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"failover-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
