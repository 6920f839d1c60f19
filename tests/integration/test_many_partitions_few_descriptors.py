"""Many more partitions than descriptors (issue 15.3 at 50,000 partitions): no
index holds a descriptor and every segment's ``.log``, the active one's
included, is in the bounded LRU of open files, so a broker under an
open-files limit of 1024 accepts a 3,000-partition topic (it used to need
9,000 descriptors and was refused), serves a produce and a fetch on every
partition with its descriptors bounded by the LRU, and after kill -9 (every
partition's tail recovered: nothing was flushed) serves every acknowledged
record again. (The flush path, index entries written before the fsync and
found by the next load: tests/unit/test_open_segment_files.py.)"""

from __future__ import annotations

import pytest

from tests.integration.broker_proc import BrokerProcess, free_port
from tests.integration.clients import Out, ck_admin, ck_consume, ck_produce, wait_for_topic
from tests.integration.test_segment_open_files_lru import (
    _fd_kinds,
    _metric,
    _open_fds,
    assert_bounded_and_clean,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

PARTITIONS = 3000
RECORDS_PER_PARTITION = 2
LIMIT = 1024
# The derived LRU bound: (1024 - odradek.open.files.reserve 128) // 2.
LRU_BOUND = 448
# The LRU plus the metadata log, sockets, pipes and the like (about 25 measured).
MAX_FDS = LRU_BOUND + 60
REQUEST_TIMED_OUT = 7


def _create(bootstrap: str, topic: str) -> None:
    """Create the topic; on a loaded machine the answer may be REQUEST_TIMED_OUT
    (the creation goes on, as in Kafka): then wait for every partition's leader."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap, **{"socket.timeout.ms": 200_000})
    [f] = admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=150,
                              request_timeout=180).values()
    try:
        f.result(timeout=200)
    except KafkaException as e:
        assert e.args[0].code() == REQUEST_TIMED_OUT, e
    wait_for_topic(bootstrap, topic, PARTITIONS, timeout=240)


def _read_all(proc: BrokerProcess, topic: str, acked: dict[tuple[int, int], bytes]) -> None:
    got = ck_consume(proc.bootstrap, topic, len(acked), partitions=range(PARTITIONS),
                     timeout=120)
    assert {(r.partition, r.offset): r.value for r in got} == acked


def test_thousands_of_partitions_are_served_under_a_low_open_files_limit(tmp_path, topic_name):
    metrics_port = free_port()
    proc = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                         wrapper=["prlimit", f"--nofile={LIMIT}:{LIMIT}"],
                         overrides={"odradek.metrics.port": metrics_port,
                                    "offsets.topic.num.partitions": 1},
                         ready_timeout_s=180)  # 3,000 tails recovered on a loaded machine
    try:
        proc.start()
        assert f"segments' .log files kept open: at most {LRU_BOUND}" in proc.log_tail()
        _create(proc.bootstrap, topic_name)
        deliveries = ck_produce(
            proc.bootstrap, topic_name,
            [Out(value=b"%d-%d" % (p, i), partition=p)
             for i in range(RECORDS_PER_PARTITION) for p in range(PARTITIONS)],
            acks="all", timeout=180, **{"message.timeout.ms": 150_000})
        acked = {(d.partition, d.offset): b"%d-%d" % (d.partition, i // PARTITIONS)
                 for i, d in enumerate(deliveries)}
        assert len(acked) == PARTITIONS * RECORDS_PER_PARTITION
        assert {offset for _, offset in acked} == set(range(RECORDS_PER_PARTITION))
        _read_all(proc, topic_name, acked)
        assert proc.pid is not None
        assert _open_fds(proc.pid) <= MAX_FDS, str(sorted(_fd_kinds(proc.pid).items()))
        assert _metric(metrics_port, "odradek_log_segment_open_files") <= LRU_BOUND
        assert _metric(metrics_port, "odradek_log_segment_files_evicted_total") > 0

        proc.restart(hard=True)  # kill -9
        _read_all(proc, topic_name, acked)
        assert_bounded_and_clean(proc, MAX_FDS)
    finally:
        proc.close()
