"""A group coordinator paused (SIGSTOP) past broker.session.timeout.ms is a zombie
when it continues: it was fenced and replaced, and a newer commit went to the new
coordinator. An OffsetFetch it read before learning that must not be answered
from its stale state (the 30-minute chaos run of 2026-11-26 saw a committed
offset read back 670 lower from such a broker): it answers NOT_COORDINATOR (its
leadership lease, broker/lifecycle.py, ran out) or the new offset, never the old.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from odradek.protocol import api
from tests.integration.clients import Wire, wait_until
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_groups_helpers import kio_call, offset_commit_v8

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

K = api.ApiKey
NOT_COORDINATOR = 16
GROUP, TOPIC = "zombie-group", "zombie"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, brokers=3, overrides={
        "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 3}).start()
    try:
        yield c
    finally:
        for b in c.brokers.values():
            if b.pid is not None:
                try:
                    os.kill(b.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        c.close()


def _commit(bootstrap: str, offset: int) -> int:
    try:
        with Wire(bootstrap) as w:
            resp = kio_call(w, K.OFFSET_COMMIT, 8, offset_commit_v8(GROUP, TOPIC, {0: offset}))
    except OSError:
        return -1
    return int(resp.topics[0].partitions[0].error_code.value)


FETCH_BODY: dict[str, Any] = {
    "groups": [{"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
    "require_stable": False}


def _fetch(w: Wire) -> tuple[int, int]:
    """(error code, committed offset) of an OffsetFetch v8 over `w`."""
    resp = kio_call(w, K.OFFSET_FETCH, 8, FETCH_BODY)
    g = resp.groups[0]
    if g.error_code.value:
        return int(g.error_code.value), -1
    p = g.topics[0].partitions[0]
    return int(p.error_code.value), int(p.committed_offset)


def test_a_paused_coordinator_never_answers_offsets_from_its_stale_state(
        cluster: ClusterProcesses) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    # a client's commit makes __consumer_offsets (FindCoordinator creates it)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
    finally:
        c.close()
    # the coordinator: the leader of __consumer_offsets-0, with the ISR whole
    view = cluster.wait_for_partition("__consumer_offsets", 0, lambda v: len(v.isr) == 3,
                                      "__consumer_offsets-0 with 3 in sync", timeout_s=60)
    old = view.leader
    zombie = cluster.brokers[old]
    wait_until(lambda: _commit(zombie.bootstrap, 10) == 0, timeout=30, interval=0.2,
               desc="offset 10 committed on the coordinator")
    with Wire(zombie.bootstrap, timeout=60) as w:
        assert _fetch(w) == (0, 10)
        assert zombie.pid is not None
        os.kill(zombie.pid, signal.SIGSTOP)
        try:
            new = cluster.wait_for_partition(
                "__consumer_offsets", 0, lambda v: v.leader not in (-1, old),
                "a new coordinator", timeout_s=30)
            wait_until(lambda: _commit(cluster.brokers[new.leader].bootstrap, 20) == 0,
                       timeout=30, interval=0.2, desc="offset 20 committed on the new one")
            # the zombie reads this request before it learns anything
            answer: list[tuple[int, int]] = []
            reader = threading.Thread(target=lambda: answer.append(_fetch(w)), daemon=True)
            reader.start()
            time.sleep(0.5)
        finally:
            os.kill(zombie.pid, signal.SIGCONT)
        reader.join(60)
        assert answer, "no answer from the continued coordinator"
    code, offset = answer[0]
    assert (code, offset) in ((NOT_COORDINATOR, -1), (0, 20)), answer
    # once it knows, the cluster answers the new offset wherever asked
    wait_until(lambda: _fetch_any(cluster) == (0, 20), timeout=60, interval=0.5,
               desc="offset 20 from the coordinator")


def _fetch_any(cluster: ClusterProcesses) -> tuple[int, int] | None:
    leader = cluster.partitions("__consumer_offsets").get(0)
    if leader is None or leader.leader < 0:
        return None
    try:
        with Wire(cluster.brokers[leader.leader].bootstrap) as w:
            return _fetch(w)
    except OSError:
        return None
