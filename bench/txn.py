"""The cost of transactions: a transactional producer committing every 100 ms vs
the same producer without transactions, 1 KiB records, in one run.

Three modes: plain (free-running), plain-flush (flush() every 100 ms: the
pipeline drain a commit implies, without a transaction) and transactional.
The order rotates round by round and each transactional round is compared
with the plain round of the same turn; the median of those paired ratios is
the figure. transactional / plain-flush isolates what the transaction itself
costs (AddPartitionsToTxn, EndTxn, markers) from the cost of draining the
producer's pipeline at every commit.

    python bench/txn.py                    # 10 rounds of 3 s per mode
    python bench/txn.py --seconds 5 --rounds 2 --partitions 4

One odradek broker (data in a temporary directory), a topic of `--partitions`
partitions, one confluent-kafka (librdkafka) producer per round, acks=all and
idempotence on in both modes (a transactional producer is idempotent), lz4
off (1 KiB random values). Throughput counts records acknowledged (plain) or
committed (transactional) per second of wall time, including the final
flush/commit. Kafka's own figure for this setup is a ~3% drop; the target
here is >= 95% of the plain throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_proc import BrokerProcess

RECORD_BYTES = 1024
MODES = ("plain", "plain-flush", "transactional")
COMMIT_INTERVAL_S = 0.1


def _producer(bootstrap: str, transactional_id: str | None) -> Producer:
    conf: dict[str, Any] = {
        # librdkafka's defaults otherwise (linger.ms 5, batch.size 1 MB, a queue of
        # at most 100000 messages), for both modes
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "delivery.report.only.error": True,
    }
    if transactional_id:
        conf["transactional.id"] = transactional_id
    p = Producer(conf)
    if transactional_id:
        p.init_transactions(30)
    return p


def _run(bootstrap: str, topic: str, seconds: float, transactional_id: str | None,
         flush_every_window: bool = False) -> dict[str, Any]:
    p = _producer(bootstrap, transactional_id)
    value = os.urandom(RECORD_BYTES)
    failed = [0]

    def on_delivery(err: Any, _msg: Any) -> None:  # errors only (delivery.report.only.error)
        failed[0] += 1

    commits = 0
    sent = 0
    started = time.monotonic()
    end = started + seconds
    while time.monotonic() < end:
        if transactional_id:
            p.begin_transaction()
        window_end = min(end, time.monotonic() + COMMIT_INTERVAL_S)
        while time.monotonic() < window_end:
            try:
                p.produce(topic, value=value, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                p.poll(0.005)
            if sent % 1000 == 0:
                p.poll(0)
        if transactional_id:
            p.commit_transaction(60)
            commits += 1
        elif flush_every_window:
            p.flush(60)  # what a commit costs the pipeline, without a transaction
    left = p.flush(60)
    elapsed = time.monotonic() - started
    delivered = sent - failed[0] - left
    return {"records": delivered, "seconds": elapsed, "records_per_s": delivered / elapsed,
            "mb_per_s": delivered * RECORD_BYTES / elapsed / 1e6, "commits": commits}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="odradek-bench-txn-"))
    broker = BrokerProcess("odradek", data_dir=base / "data", log_path=base / "broker.log",
                           overrides={"transaction.state.log.num.partitions": 4})
    broker.start()
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "bench-txn"
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        _run(broker.bootstrap, topic, 2.0, None)  # warm up
        for r in range(args.rounds):
            # the order rotates: drift in the machine's load hits every mode alike
            modes = MODES[r % 3:] + MODES[: r % 3]
            for mode in modes:
                tid = f"bench-txn-{r}" if mode == "transactional" else None
                res = _run(broker.bootstrap, topic, args.seconds, tid, mode == "plain-flush")
                results[mode].append(res)
                print(f"round {r + 1} {mode:>13}: {res['records_per_s']:9.0f} records/s "
                      f"({res['mb_per_s']:.1f} MB/s, {res['commits']} commits)", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(base, ignore_errors=True)  # gigabytes of records per run
    plain = statistics.median(x["records_per_s"] for x in results["plain"])
    txn = statistics.median(x["records_per_s"] for x in results["transactional"])
    # each transactional round against the plain round just before it (same conditions)
    flushed = statistics.median(x["records_per_s"] for x in results["plain-flush"])
    paired = [t["records_per_s"] / p["records_per_s"]
              for p, t in zip(results["plain"], results["transactional"], strict=True)]
    paired_flush = [t["records_per_s"] / p["records_per_s"]
                    for p, t in zip(results["plain-flush"], results["transactional"], strict=True)]
    summary = {"plain_records_per_s": round(plain), "transactional_records_per_s": round(txn),
               "plain_flush_records_per_s": round(flushed),
               "ratio": round(txn / plain, 3),
               "paired_ratio_median": round(statistics.median(paired), 3),
               "paired_ratio_vs_plain_flush_median": round(statistics.median(paired_flush), 3),
               "paired_ratios": [round(r, 3) for r in paired], "record_bytes": RECORD_BYTES,
               "commit_interval_ms": int(COMMIT_INTERVAL_S * 1000),
               "partitions": args.partitions, "seconds_per_round": args.seconds,
               "rounds": args.rounds,
               "load_average_1m_at_end": round(os.getloadavg()[0], 2),
               "cpus": os.cpu_count()}
    print(json.dumps(summary, indent=2))
    print(f"transactional / plain = {txn / plain:.1%} of medians, "
          f"{statistics.median(paired):.1%} median of paired rounds (target >= 95%); "
          f"transactional / plain flushed every 100 ms = "
          f"{statistics.median(paired_flush):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
