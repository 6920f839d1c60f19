#!/usr/bin/env python3
"""Screenshots of the web console's main pages, for docs/console.md.

    PYTHONPATH=. /work/main/.venv/bin/python scripts/console_screenshots.py [OUT_DIR]

Starts a broker with tiered storage and its metrics endpoint, and `odradek console`
(the test fixtures' helpers), fills the broker with a few topics (one tiered), JSON
records, a consumer group with lag and an open transaction, keeps a producer and a
consumer busy for ~20 s so the background-sampled metrics charts have a history, then
saves PNGs of the pages through headless Chromium (selenium, Debian's chromium and
chromedriver) into OUT_DIR (default docs/console/). The cluster page is taken of a
three-broker cluster with a controller apart (tests/integration/cluster_proc.py).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer, TopicPartition

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import Out, ck_consumer, ck_produce, create_topic
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.console_proc import ConsoleProcess, chrome
from tests.integration.tiered_helpers import TIERED_BROKER, tiered_topic, wait_copies_settled


def seed(bootstrap: str) -> None:
    create_topic(bootstrap, "orders", 3, {"retention.ms": "604800000"})
    create_topic(bootstrap, "payments", 2)
    create_topic(bootstrap, "audit-log", 1, {"cleanup.policy": "compact"})
    ck_produce(bootstrap, "orders", [
        Out(json.dumps({"order": i, "customer": f"c-{i % 7}", "items": [{"sku": "A-1",
                        "qty": i % 3 + 1}], "total": round(9.99 * (i % 5 + 1), 2)}).encode(),
            f"order-{i}".encode(), [("source", b"web"), ("trace-id", f"{i:08x}".encode())],
            partition=0) for i in range(30)])
    ck_produce(bootstrap, "payments", [Out(f"payment {i}".encode(), partition=i % 2)
                                       for i in range(12)])
    create_topic(bootstrap, "clickstream", 2, tiered_topic())
    ck_produce(bootstrap, "clickstream", [
        Out((b"click %05d /products/" % i) * 20, partition=i % 2) for i in range(600)],
        **{"linger.ms": 0, "batch.num.messages": 5, "compression.type": "none"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "checkout-1"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("payments", b"pending", partition=0)
    producer.flush(15)  # left open: the transactions page shows it Ongoing


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = ck_consumer(bootstrap, **{"group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def busy(bootstrap: str, seconds: float) -> None:
    """A producer and a consumer at work, with a burst in the middle: the charts move."""
    from confluent_kafka import Consumer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dashboards",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["payments"])
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        left = end - time.monotonic()
        burst = 40 if seconds / 3 < left < seconds * 2 / 3 else 8
        for _ in range(burst):
            producer.produce("payments", b"payment %d" % i)
            i += 1
        producer.poll(0)
        consumer.consume(100, timeout=0.2)
    producer.flush(15)
    consumer.close()


def cluster_screenshot(base: Path, out: Path, driver: object) -> None:
    cluster = ClusterProcesses(base / "cluster", brokers=3,
                               racks={1: "rack-a", 2: "rack-b", 3: "rack-c"})
    console = None
    try:
        cluster.start()
        cluster.create_topic("orders", 3, 3)
        console = ConsoleProcess(cluster.bootstrap, base / "cluster-console.log")
        driver.get(console.url + "/")  # type: ignore[attr-defined]
        driver.save_screenshot(str(out / "cluster.png"))  # type: ignore[attr-defined]
        print(f"{out / 'cluster'}.png  / (three brokers, a controller apart)")
    finally:
        if console is not None:
            console.close()
        cluster.close()


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "console"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        metrics = free_port()
        broker = BrokerProcess(data_dir=base / "data", log_path=base / "broker.log",
                               overrides={**TIERED_BROKER,
                                          "odradek.metrics.port": str(metrics)}).start()
        console = None
        driver = None
        try:
            seed(broker.bootstrap)
            console = ConsoleProcess(broker.bootstrap, base / "console.log", "--metrics-url",
                                     f"http://127.0.0.1:{metrics}/metrics",
                                     "--sample-interval", "1")
            driver = chrome(1280, 860)
            for committed in (3, 9, 12, 20, 22):  # the group page's lag chart: a visit each
                commit(broker.bootstrap, "billing", "orders", committed)
                driver.get(console.url + "/groups/billing")
            wait_copies_settled(broker.port, "clickstream")
            busy(broker.bootstrap, 24)
            pages = {
                "topics": "/topics",
                "tiered-topic": "/topics/clickstream",
                "topic": "/topics/orders",
                "messages": "/topics/orders/messages?partition=0&offset=20&limit=3&format=json",
                "group": "/groups/billing",
                "transactions": "/transactions",
                "metrics": "/metrics",
            }
            for name, path in pages.items():
                driver.set_window_size(1280, 1500 if name == "metrics" else 860)
                driver.get(console.url + path)
                driver.save_screenshot(str(out / f"{name}.png"))
                print(f"{out / name}.png  {path}")
            driver.get(console.url + "/topics/payments")
            driver.find_element("id", "delete").click()
            driver.find_element("id", "confirm-what")
            driver.save_screenshot(str(out / "confirm.png"))
            print(f"{out / 'confirm'}.png  delete confirmation")
            cluster_screenshot(base, out, driver)
        finally:
            if driver is not None:
                driver.quit()
            if console is not None:
                console.close()
            broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
