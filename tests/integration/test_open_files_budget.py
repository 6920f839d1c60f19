"""File descriptors as a budget (issue 15.3). A broker started with a low
open-files limit (``prlimit``): it raises its soft limit to the hard one and
logs both; with the LRU of segment files unbounded
(``odradek.log.segment.open.files.max=0``: every active segment's ``.log``
stays open) a CreateTopics or CreatePartitions that would need more
descriptors than are left is refused with POLICY_VIOLATION and a message
saying so, smaller ones are served (with the LRU bounded, the default, a
partition holds no descriptor of its own:
test_many_partitions_few_descriptors.py); when the limit is hit anyway (here by a
flood of connections) the broker logs it without a traceback storm and serves
again once the descriptors are released."""

from __future__ import annotations

import socket

import pytest

from tests.integration.broker_proc import HOST, BrokerProcess
from tests.integration.clients import Out, ck_admin, ck_consume, ck_produce, create_topic

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

POLICY_VIOLATION = 44


def _create_error(bootstrap: str, name: str, partitions: int) -> tuple[int, str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)  # kept alive until the future is done
    [f] = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values()
    try:
        f.result(timeout=60)
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    return 0, ""


def test_low_open_files_limit_refuses_big_creations_and_survives_exhaustion(
    tmp_path, topic_name
):
    proc = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                         wrapper=["prlimit", "--nofile=200:256"],
                         overrides={"odradek.log.segment.open.files.max": 0})
    try:
        proc.start()
        assert "open-files limit: soft 256 (was 200), hard 256" in proc.log_tail()

        code, message = _create_error(proc.bootstrap, topic_name + "-big", 400)
        assert code == POLICY_VIOLATION, (code, message)
        assert "open-files limit is 256" in message and "more fit" in message
        create_topic(proc.bootstrap, topic_name, 20)
        ck_produce(proc.bootstrap, topic_name,
                   [Out(value=b"v%d" % p, partition=p) for p in range(20)], acks="all")

        from confluent_kafka.admin import NewPartitions

        admin = ck_admin(proc.bootstrap)
        [f] = admin.create_partitions([NewPartitions(topic_name, 400)]).values()
        with pytest.raises(Exception) as refused:
            f.result(timeout=30)
        assert refused.value.args[0].code() == POLICY_VIOLATION

        # Exhaust the descriptors with connections, then let them go.
        held: list[socket.socket] = []
        try:
            for _ in range(300):
                s = socket.create_connection((HOST, proc.port), timeout=5)
                held.append(s)
        except OSError:
            pass
        assert len(held) >= 100
        for s in held:
            s.close()
        got = ck_consume(proc.bootstrap, topic_name, 2, partitions=[0, 19], timeout=60)
        assert sorted(r.value for r in got) == [b"v0", b"v19"]
        ck_produce(proc.bootstrap, topic_name, [Out(value=b"after", partition=1)], acks="all")
        assert proc.is_running()
        text = proc.log_path.read_text(errors="replace")
        assert text.count("Traceback") <= 3, proc.log_tail()
    finally:
        proc.close()
