"""`-o json` on the CLI's listings, against a real broker: one JSON document on stdout
whose keys are the text table's columns in snake case (cli/output.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _json(broker: Any, *args: str) -> Any:
    r = subprocess.run([sys.executable, "-m", "odradek", *args, "-b", broker.bootstrap,
                        "-o", "json"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_topics_groups_transactions_and_quotas_as_json(broker: Any, topic_name: str) -> None:
    r = subprocess.run([sys.executable, "-m", "odradek", "topics", "create", topic_name,
                        "--partitions", "2", "--config", "retention.ms=60000",
                        "-b", broker.bootstrap], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert topic_name in _json(broker, "topics", "list")
    [described] = _json(broker, "topics", "describe", topic_name)
    assert described["topic"] == topic_name and described["partition_count"] == 2
    assert described["configs"] == {"retention.ms": "60000"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert all(p["leader"] == 1 and p["isr"] == [1] for p in described["partitions"])

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic_name, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
    consumer.close()
    groups = _json(broker, "groups", "list")
    assert {"group": group, "state": "Empty", "type": "classic"} in groups
    rows = _json(broker, "groups", "describe", group)
    [row] = [r for r in rows if r["partition"] == 0]
    assert row["current_offset"] == 4 and row["log_end_offset"] == 10 and row["lag"] == 6
    assert row["consumer_id"] is None

    assert _json(broker, "transactions", "list") == []

    r = subprocess.run([sys.executable, "-m", "odradek", "quotas", "alter", "--user", "alice",
                        "--add-config",
                        "producer_byte_rate=1024", "-b", broker.bootstrap],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert {"entity": {"user": "alice"}, "quotas": {"producer_byte_rate": 1024.0}} in _json(
        broker, "quotas", "describe")
