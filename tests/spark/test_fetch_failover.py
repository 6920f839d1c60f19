"""The Fetch read path follows a leader change: a task reading a replicated
partition of a 3-broker cluster loses its leader (kill -9) half-way; its client
finds the new leader through Metadata and the task returns every record once,
in order (no Spark session: the executor's loop runs in this process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.spark import broker_read, fetch_client
from tests.integration.broker_proc import odradek_server_available
from tests.integration.cluster_proc import ClusterProcesses

RECORDS = 20_000


@pytest.mark.timeout(300)
def test_fetch_follows_the_new_leader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not odradek_server_available():
        pytest.skip("odradek server not available")
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    from confluent_kafka import Producer
    from pyspark.sql.pandas.types import to_arrow_schema

    from odradek.spark.source import source_schema

    cluster = ClusterProcesses(tmp_path, brokers=3).start()
    try:
        topic = "failover"
        cluster.create_topic(topic, 1, 3, config={"min.insync.replicas": "2"})
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4",
                      "batch.num.messages": 100})
        for i in range(RECORDS):
            p.produce(topic, f"value {i}".encode(), f"k{i}".encode(), partition=0)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        old = cluster.wait_for_partition(topic, 0, lambda v: len(v.isr) == 3, "3 in sync")

        # Small fetches, so the read is many round trips and the kill lands inside it.
        monkeypatch.setattr(fetch_client, "PARTITION_MAX_BYTES", 8 * 1024)
        monkeypatch.setattr(broker_read, "PARTITION_MAX_BYTES", 8 * 1024)
        stats: dict[str, int] = {}
        batches = broker_read.read_fetch(
            cluster.bootstrap, topic, 0, 0, RECORDS,
            arrow_schema=to_arrow_schema(source_schema(False), timezone="UTC"),
            isolation_level="read_committed", fail_on_data_loss=True,
            poll_timeout_ms=60_000, rows_per_batch=500, stats=stats)
        got: list[Any] = [next(batches)]
        cluster.brokers[old.leader].kill9()
        got.extend(batches)
        new = cluster.partitions(topic)[0]
        assert new.leader not in (-1, old.leader), new
        table = pa.Table.from_batches(got)
        assert table.column("offset").to_pylist() == list(range(RECORDS))
        assert table.column("value").to_pylist() == [f"value {i}".encode() for i in range(RECORDS)]
        assert stats["fetches"] > 5 and stats["leader_lookups"] >= 2, stats
    finally:
        cluster.close()
