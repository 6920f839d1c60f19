"""How long a three-member consumer group takes to stabilise after a member leaves:
classic protocol vs KIP-848, with confluent-kafka (librdkafka) members.

    python bench/groups.py                # 5 rounds per setting
    python bench/groups.py --rounds 10 --broker tansu

One odradek broker (`group.initial.rebalance.delay.ms=0`), a 6-partition topic,
then per round: three members of a fresh group subscribe and settle (2+2+2);
one member closes (a clean leave: LeaveGroup / heartbeat with epoch -1); the
clock runs from the start of close() until the two others own 3+3 partitions
between them, every partition exactly once, as their own assignment() reports.
The members are polled in turn from one thread every 10 ms.

Settings measured:

  classic-default   eager `range,roundrobin`, heartbeat.interval.ms=3000 (client defaults)
  classic-coop      cooperative-sticky, heartbeat.interval.ms=3000
  classic-fast      eager, heartbeat.interval.ms=500
  kip848-default    group.protocol=consumer, broker group.consumer.heartbeat.interval.ms=5000
  kip848-fast       group.protocol=consumer, broker heartbeat interval 500 ms

The heartbeat interval matters because the remaining members learn of the
departure on their next heartbeat in both protocols.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.broker_proc import BrokerProcess

PARTITIONS = 6
SETTLE_TIMEOUT_S = 60.0
POLL_S = 0.01

SETTINGS: dict[str, tuple[str, dict[str, Any]]] = {
    # name: (broker variant, consumer config)
    "classic-default": ("default", {}),
    "classic-coop": ("default", {"partition.assignment.strategy": "cooperative-sticky"}),
    "classic-fast": ("fast", {"heartbeat.interval.ms": 500}),
    "kip848-default": ("default", {"group.protocol": "consumer"}),
    "kip848-fast": ("fast", {"group.protocol": "consumer"}),
}
BROKERS = {
    "default": {"group.initial.rebalance.delay.ms": 0},
    "fast": {"group.initial.rebalance.delay.ms": 0, "group.consumer.heartbeat.interval.ms": 500},
}


def member(bootstrap: str, group: str, conf: dict[str, Any]) -> Consumer:
    base = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if conf.get("group.protocol") != "consumer":
        base["session.timeout.ms"] = 10000
    return Consumer({**base, **conf})


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def settled(consumers: list[Consumer]) -> bool:
    parts = [owned(c) for c in consumers]
    flat = [p for ps in parts for p in ps]
    sizes = [len(ps) for ps in parts]
    return sorted(flat) == list(range(PARTITIONS)) and max(sizes) - min(sizes) <= 1


def poll_until_settled(consumers: list[Consumer]) -> float:
    started = time.monotonic()
    while not settled(consumers):
        if time.monotonic() - started > SETTLE_TIMEOUT_S:
            raise TimeoutError(f"not settled: {[sorted(owned(c)) for c in consumers]}")
        for c in consumers:
            c.poll(POLL_S)
    return time.monotonic() - started


def one_round(bootstrap: str, topic: str, conf: dict[str, Any]) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    consumers = [member(bootstrap, group, conf) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic])
        poll_until_settled(consumers)
        leaver = consumers.pop()
        started = time.monotonic()
        leaver.close()
        poll_until_settled(consumers)
        return time.monotonic() - started
    finally:
        for c in consumers:
            c.close()


def run(kind: str, rounds: int, only: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for variant, overrides in BROKERS.items():
        names = [n for n, (v, _) in SETTINGS.items() if v == variant and (not only or n in only)]
        if not names:
            continue
        base = Path(tempfile.mkdtemp(prefix="odradek-bench-groups-"))
        proc = BrokerProcess(
            kind, overrides=overrides, data_dir=base / "data", log_path=base / "broker.log"
        )
        proc.start()
        try:
            admin = AdminClient({"bootstrap.servers": proc.bootstrap})
            topic = f"bench-groups-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            for name in names:
                times = []
                for _ in range(rounds):
                    times.append(one_round(proc.bootstrap, topic, SETTINGS[name][1]))
                results[name] = {
                    "median_s": round(statistics.median(times), 3),
                    "min_s": round(min(times), 3),
                    "max_s": round(max(times), 3),
                    "rounds": [round(t, 3) for t in times],
                }
                print(
                    f"{name:16} median {results[name]['median_s']:.3f} s  "
                    f"min {results[name]['min_s']:.3f}  max {results[name]['max_s']:.3f}",
                    flush=True,
                )
        finally:
            proc.close()
            shutil.rmtree(base, ignore_errors=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--broker", default="odradek", choices=("odradek", "tansu"))
    parser.add_argument("--only", action="append", default=[], choices=sorted(SETTINGS))
    args = parser.parse_args()
    results = run(args.broker, args.rounds, args.only)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"groups-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"broker": args.broker, "results": results}, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
