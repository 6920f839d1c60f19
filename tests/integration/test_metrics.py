"""The Prometheus endpoint reports requests, bytes, connections and partitions."""

from __future__ import annotations

import urllib.request

import pytest

from tests.integration.broker_proc import free_port
from tests.integration.clients import Out, ck_produce, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_metrics_endpoint_counts_what_the_broker_did(broker_factory, topic_name):
    port = free_port()
    proc = broker_factory(overrides={"odradek.metrics.port": port})
    create_topic(proc.bootstrap, topic_name, 2)
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"x" * 100, partition=1)] * 5)
    m = _scrape(port)
    assert m['odradek_requests_total{api="PRODUCE"}'] >= 1
    assert m['odradek_requests_total{api="CREATE_TOPICS"}'] == 1
    assert m['odradek_request_seconds_count{api="PRODUCE"}'] >= 1
    assert m['odradek_network_bytes_total{direction="in"}'] > 500
    assert m['odradek_network_bytes_total{direction="out"}'] > 0
    assert m["odradek_partitions"] >= 2
    key = f'odradek_partition_log_end_offset{{partition="1",topic="{topic_name}"}}'
    assert m[key] == 5
    assert m[f'odradek_partition_log_end_offset{{partition="0",topic="{topic_name}"}}'] == 0
