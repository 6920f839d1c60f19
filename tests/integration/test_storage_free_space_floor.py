"""The free-space floor (issue 15.2, beyond Kafka): produce stops before the
disk is full, with a retriable error, while reads go on; retention frees space
and writes resume without a restart. The disk is a real small tmpfs (root
only: without a small filesystem of its own the test cannot steer free space)."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import (
    Wire,
    ck_admin,
    ck_consume,
    create_topic,
    parse_response,
    produce_request_v9,
    record_batch,
    wait_until,
)
from tests.integration.small_fs import SmallFilesystem

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

MIB = 1024 * 1024
NOT_ENOUGH_REPLICAS = 19


def _produce(bootstrap: str, topic: str, n: int) -> tuple[int, str | None]:
    """(error code, message) of one ~100 KB batch of ``n``-tagged records."""
    from kio.schema.produce.v9.response import ProduceResponse

    batch = record_batch([(None, b"%06d." % n + b"z" * 10_000) for _ in range(10)],
                         int(time.time() * 1000))
    with Wire(bootstrap) as w:
        w.send_request(0, 9, 7, produce_request_v9(topic, 0, batch, acks=-1))
        frame = w.read_frame()
    assert frame is not None
    [t] = parse_response(frame, ProduceResponse)[1].responses
    answer = t.partition_responses[0]
    return int(answer.error_code), answer.error_message


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    [value] = re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    return float(value)


def test_produce_stops_at_the_floor_and_resumes_when_retention_frees_space(
    tmp_path, topic_name
):
    with SmallFilesystem(tmp_path / "disk", 32 * MIB) as fs:
        if not fs.real:
            pytest.skip("needs a small filesystem of its own (root and mount)")
        metrics_port = free_port()
        proc = BrokerProcess(data_dir=fs.path / "data", log_path=tmp_path / "broker.log",
                             overrides={"log.dir.free.space.min.bytes": 12 * MIB,
                                        "log.retention.check.interval.ms": 300,
                                        "odradek.metrics.port": metrics_port})
        try:
            proc.start()
            create_topic(proc.bootstrap, topic_name, 1, config={
                "segment.bytes": str(MIB), "file.delete.delay.ms": "100"})
            accepted = 0
            for n in range(400):  # at most 40 MB: more than the disk holds
                code, message = _produce(proc.bootstrap, topic_name, n)
                if code:
                    break
                accepted += 1
            assert code == NOT_ENOUGH_REPLICAS, (code, message)
            assert message and "free-space floor" in message
            assert 100 < accepted < 250, accepted  # stopped near 20 MB, not at 32 MB
            assert "below its floor" in proc.log_tail()
            assert _metric(metrics_port, "odradek_log_dir_below_free_space_floor") == 1
            assert "Stopped serving replicas" not in proc.log_tail()  # never offline
            # Reads go on.
            got = ck_consume(proc.bootstrap, topic_name, 20, partitions=[0])
            assert got[0].value.startswith(b"000000.")

            # Retention frees space: writes resume, no restart.
            admin = ck_admin(proc.bootstrap)
            from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

            resource = ConfigResource("topic", topic_name, incremental_configs=[
                ConfigEntry("retention.bytes", str(2 * MIB),
                            incremental_operation=AlterConfigOpType.SET)])
            for f in admin.incremental_alter_configs([resource]).values():
                f.result(timeout=15)
            wait_until(lambda: _produce(proc.bootstrap, topic_name, 999)[0] == 0, 30)
            assert "accepted again" in proc.log_tail()
            assert _metric(metrics_port, "odradek_log_dir_below_free_space_floor") == 0
            assert proc.is_running()
        finally:
            proc.close()
