"""Coordinator writes are acknowledged only once the ISR has them.

Three brokers, `__consumer_offsets` and `__transaction_state` with one
partition each at RF=3, min.insync.replicas=2. The coordinator's broker is
killed with SIGKILL right after acknowledgements: whatever it acknowledged
(an OffsetCommit, a transaction's commit) is still there once a new leader
of its partition has taken over. With the ISR below min.insync.replicas an
OffsetCommit is refused with a retriable error, never acknowledged.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster_proc import ClusterProcesses, _wait
from tests.integration.test_groups_helpers import offset_commit_v8
from tests.integration.txn_helpers import call, read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
COORDINATOR_NOT_AVAILABLE = 15
RETRIABLE = {7, 14, 15, 16}  # REQUEST_TIMED_OUT, LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
ROUNDS = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(
        tmp_path,
        brokers=3,
        overrides={
            "offsets.topic.num.partitions": 1,
            "offsets.topic.replication.factor": 3,
            "transaction.state.log.num.partitions": 1,
            "transaction.state.log.replication.factor": 3,
            "min.insync.replicas": 2,
            "group.initial.rebalance.delay.ms": 0,
        },
    ).start()
    try:
        yield c
    finally:
        c.close()


def _coordinator(cluster: ClusterProcesses, key: str, key_type: int = 0) -> int:
    def find() -> int | None:
        for b in cluster.brokers.values():
            if not b.is_running():
                continue
            c = call(
                b.bootstrap, FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}
            ).coordinators[0]
            if c.error_code.value == 0 and cluster.brokers[c.node_id].is_running():
                return int(c.node_id)
        return None

    return int(_wait(find, 30, f"a live coordinator for {key!r}"))


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> int:
    r = call(bootstrap, OFFSET_COMMIT, 8, offset_commit_v8(group, topic, {0: offset}, ""))
    return int(r.topics[0].partitions[0].error_code.value)


def _committed(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """(error code, committed offset) from OffsetFetch v8."""
    r = call(
        bootstrap,
        OFFSET_FETCH,
        8,
        {
            "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
            "require_stable": False,
        },
    )
    g = r.groups[0]
    if g.error_code.value:
        return int(g.error_code.value), -1
    return 0, int(g.topics[0].partitions[0].committed_offset)


def _committed_after_failover(cluster: ClusterProcesses, group: str, topic: str) -> int:
    def fetch() -> int | None:
        node = _coordinator(cluster, group)
        code, offset = _committed(cluster.brokers[node].bootstrap, group, topic)
        return offset if code == 0 else None

    return int(_wait(fetch, 30, "the committed offset from the new coordinator"))


class Committer(threading.Thread):
    """Commits 1, 2, 3, ... one at a time to whichever broker coordinates the group."""

    def __init__(self, cluster: ClusterProcesses, group: str, topic: str, start: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.group, self.topic = cluster, group, topic
        self.next_offset = start
        self.acked: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        node = _coordinator(self.cluster, self.group)
        while not self.stopping.is_set():
            offset, self.next_offset = self.next_offset, self.next_offset + 1
            try:
                code = _commit(self.cluster.brokers[node].bootstrap, self.group, self.topic, offset)
            except (OSError, AssertionError):  # the broker died under the request
                code = COORDINATOR_NOT_AVAILABLE
            if code == 0:
                self.acked.append(offset)
                continue
            assert code in RETRIABLE, f"commit of {offset}: error {code}"
            if self.stopping.wait(0.05):  # retry backoff
                return
            try:
                node = _coordinator(self.cluster, self.group)
            except AssertionError:
                continue


def test_acknowledged_commits_survive_kill_9_of_the_coordinators_broker(
    cluster: ClusterProcesses, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 1, 3)
    group = f"g-{topic_name}"
    rng = random.Random(7)
    next_offset = 1
    for round_no in range(ROUNDS):
        committer = Committer(cluster, group, topic_name, next_offset)
        committer.start()
        wanted = rng.randint(5, 60)  # a random moment: after so many acknowledged commits
        _wait(lambda c=committer, n=wanted: len(c.acked) >= n, 30, f"{wanted} acknowledged commits")
        victim = _coordinator(cluster, group)
        cluster.brokers[victim].kill9()
        committer.stopping.set()
        committer.join(60)
        assert not committer.is_alive()
        last_acked = committer.acked[-1]
        last_tried = committer.next_offset - 1
        committed = _committed_after_failover(cluster, group, topic_name)
        assert last_acked <= committed <= last_tried, (round_no, last_acked, committed)
        cluster.brokers[victim].restart()
        cluster.wait_for_partition(
            OFFSETS, 0, lambda v: len(v.isr) == 3, "the offsets partition whole again"
        )
        next_offset = last_tried + 1


def test_offset_commit_with_the_isr_below_min_insync_replicas_is_not_acknowledged(
    cluster: ClusterProcesses, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 1, 3)
    group = f"g-{topic_name}"
    node = _coordinator(cluster, group)
    coordinator = cluster.brokers[node].bootstrap
    assert _commit(coordinator, group, topic_name, 10) == 0
    followers = [b for b in cluster.brokers if b != node]
    for f in followers:
        cluster.brokers[f].kill9()
    try:
        cluster.wait_for_partition(
            OFFSETS, 0, lambda v: v.isr == (node,), "the coordinator alone in the ISR", timeout_s=20
        )
        assert _commit(coordinator, group, topic_name, 11) == COORDINATOR_NOT_AVAILABLE
        assert _committed(coordinator, group, topic_name) == (0, 10)
    finally:
        for f in followers:
            cluster.brokers[f].restart()
    cluster.wait_for_partition(OFFSETS, 0, lambda v: len(v.isr) == 3, "the ISR whole again")
    _wait(lambda: _commit(coordinator, group, topic_name, 12) == 0, 15, "an acknowledged commit")
    assert _committed(coordinator, group, topic_name) == (0, 12)


def test_a_stalled_isr_holds_the_acknowledgement_back(
    cluster: ClusterProcesses, topic_name: str
) -> None:
    """Both followers stopped (SIGSTOP, still in the ISR): the commit is written on
    the leader but not acknowledged; once the ISR shrinks below min.insync.replicas
    the answer is a retriable error."""
    import os
    import signal

    cluster.create_topic(topic_name, 1, 3)
    group = f"g-{topic_name}"
    node = _coordinator(cluster, group)
    coordinator = cluster.brokers[node].bootstrap
    assert _commit(coordinator, group, topic_name, 1) == 0
    stopped = [cluster.brokers[b] for b in cluster.brokers if b != node]
    for b in stopped:
        assert b.pid is not None
        os.kill(b.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        # COORDINATOR_NOT_AVAILABLE once the ISR shrank, REQUEST_TIMED_OUT if it had not
        # within offsets.commit.timeout.ms: never acknowledged.
        assert _commit(coordinator, group, topic_name, 2) in (7, COORDINATOR_NOT_AVAILABLE)
        # Not before replica.lag.time.max.ms (2 s) took the followers out of the ISR.
        assert time.monotonic() - started >= 1.5
    finally:
        for b in stopped:
            if b.pid is not None:
                os.kill(b.pid, signal.SIGCONT)
    cluster.wait_for_partition(OFFSETS, 0, lambda v: len(v.isr) == 3, "the ISR whole again")
    # The coordinator learns the ISR grew a moment later: retried as a client would.
    _wait(lambda: _commit(coordinator, group, topic_name, 3) == 0, 15, "an acknowledged commit")


def _txn_coordinator(cluster: ClusterProcesses, tid: str) -> int:
    return _coordinator(cluster, tid, key_type=1)


def test_a_committed_transaction_survives_kill_9_of_its_coordinators_broker(
    cluster: ClusterProcesses, topic_name: str
) -> None:
    cluster.create_topic(topic_name, 3, 3)
    expected: list[bytes] = []
    for round_no in range(2):
        tid = f"tx-{topic_name}-{round_no}"
        p = txn_producer(cluster.live_bootstrap(), tid)
        victim = _txn_coordinator(cluster, tid)
        p.begin_transaction()
        values = [b"r%d-%d" % (round_no, i) for i in range(30)]
        for i, v in enumerate(values):
            p.produce(topic_name, value=v, partition=i % 3)
        p.commit_transaction(30)
        cluster.brokers[victim].kill9()  # right after the acknowledgement
        expected += values
        got = _read_all(cluster, topic_name, len(expected))
        assert sorted(got) == sorted(expected), round_no
        del p
        cluster.brokers[victim].restart()
        cluster.wait_for_partition(
            TXN_STATE, 0, lambda v: len(v.isr) == 3, "the transaction state partition whole again"
        )


def _read_all(cluster: ClusterProcesses, topic: str, expect: int) -> list[Any]:
    def read() -> list[bytes] | None:
        got = read_values(
            cluster.live_bootstrap(), topic, 3, "read_committed", expect=expect, timeout_s=10
        )
        return got if len(got) >= expect else None

    return list(_wait(read, 60, f"{expect} committed records"))
