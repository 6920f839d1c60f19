"""Share groups (KIP-932): how fast one librdkafka ShareConsumer reads a topic,
beside a classic consumer of the same topic.

    python bench/share.py                    # 100,000 records, 3 rounds
    python bench/share.py --records 20000 --rounds 1

One odradek broker, a one-partition topic of `--records` 100-byte records
(produced first, linger.ms=20). Per round: a fresh share group
(`share.auto.offset.reset=earliest`, implicit acknowledgement) and a fresh
classic group (`auto.offset.reset=earliest`) each read every record; the clock
runs from the first record to the last, so group joining is left out. Each
share poll's records are acknowledged with the next ShareFetch, which writes
the share partition's state to the share coordinator (an append to
`__share_group_state`, on this one broker) before it is answered.
Prints records/s per round and the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.integration.broker_proc import BrokerProcess

TOPIC = "bench-share"
READ_TIMEOUT_S = 300.0


def _earliest_share_group(admin: AdminClient, group: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)


def _read(consumer: Any, records: int, share: bool) -> float:
    consumer.subscribe([TOPIC])
    got, first_at, first = 0, 0.0, 0
    deadline = time.monotonic() + READ_TIMEOUT_S
    while got < records and time.monotonic() < deadline:
        batch = consumer.poll(1.0) if share else consumer.consume(1000, 1.0)
        n = sum(1 for m in batch if m.error() is None)
        if n and not got:
            first_at, first = time.monotonic(), n  # the clock starts at the first batch
        got += n
    assert got >= records, f"read {got} of {records}"
    rate = (got - first) / (time.monotonic() - first_at)
    consumer.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-share-"))
    broker = BrokerProcess(overrides={"group.initial.rebalance.delay.ms": 0},
                           data_dir=base / "data", log_path=base / "broker.log").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(args.records):
            while True:
                try:
                    producer.produce(TOPIC, value=b"x" * 100)
                    break
                except BufferError:  # more than the client queues: let it send
                    producer.poll(0.1)
            if i % 10_000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
        rates: dict[str, list[float]] = {"share": [], "classic": []}
        for r in range(args.rounds):
            group = f"bench-{uuid.uuid4().hex[:8]}"
            _earliest_share_group(admin, group)
            rates["share"].append(_read(ShareConsumer(
                {"bootstrap.servers": broker.bootstrap, "group.id": group}), args.records, True))
            rates["classic"].append(_read(Consumer(
                {"bootstrap.servers": broker.bootstrap, "group.id": group + "-classic",
                 "auto.offset.reset": "earliest"}), args.records, False))
            print(f"round {r + 1}: share {rates['share'][-1]:,.0f} records/s, "
                  f"classic {rates['classic'][-1]:,.0f} records/s", flush=True)
        for kind, values in rates.items():
            print(f"{kind}: median {statistics.median(values):,.0f} records/s "
                  f"over {len(values)} rounds")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
