"""Metadata snapshots with real processes (issue 7): three controllers and two
brokers with small snapshot thresholds. While broker 2 and a standby
controller are down, topics are created until the active controller has
written snapshots and deleted the log segments they needed; both come back
below its log start, catch up through FetchSnapshot (the broker as an
observer, the controller through the Raft core) and see every topic.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.integration.broker_proc import odradek_server_available
from tests.integration.cluster_proc import ClusterProcesses, _wait
from tests.integration.test_controller_quorum import (
    ELECTION_BOUND_S,
    METADATA_PARTITION_DIR,
    active_controller,
    metadata_log_end,
    metadata_log_end_of,
)

pytestmark = pytest.mark.skipif(not odradek_server_available(), reason="odradek server missing")

SMALL_SNAPSHOTS: dict[str, object] = {
    "metadata.log.max.record.bytes.between.snapshots": 4096,
    "metadata.log.segment.bytes": 4096,
}
TOPICS_PER_REQUEST = 10
REQUESTS = 5
CATCH_UP_BOUND_S = 30.0


def _checkpoints(data_dir: Path) -> list[str]:
    return sorted(p.name for p in (data_dir / METADATA_PARTITION_DIR).glob("*.checkpoint"))


def _segments(data_dir: Path) -> list[int]:
    return sorted(int(p.stem) for p in (data_dir / METADATA_PARTITION_DIR).glob("*.log"))


def _create_topics(cluster: ClusterProcesses, names: list[str]) -> None:
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    fs = admin.create_topics([NewTopic(n, 1, 1) for n in names], operation_timeout=10)
    for f in fs.values():
        f.result(timeout=15)


def _topics_seen_by(cluster: ClusterProcesses, broker_id: int) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})
    return set(admin.list_topics(timeout=5).topics)


def test_broker_and_controller_down_past_the_log_start_catch_up_by_fetch_snapshot(
    tmp_path: Path,
) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=2, controllers=3, overrides=SMALL_SNAPSHOTS)
    try:
        cluster.start()
        leader, _ = _wait(lambda: active_controller(cluster), ELECTION_BOUND_S, "a leader")
        standby = next(n for n in cluster.controllers if n != leader)
        cluster.brokers[2].kill9()
        cluster.controllers[standby].kill9()
        broker_end = metadata_log_end_of(cluster.brokers[2].data_dir)
        standby_end = metadata_log_end(cluster, standby)

        names = [f"t{r}-{i}" for r in range(REQUESTS) for i in range(TOPICS_PER_REQUEST)]
        for r in range(REQUESTS):
            _create_topics(cluster, names[r * TOPICS_PER_REQUEST : (r + 1) * TOPICS_PER_REQUEST])
        leader_dir = cluster.controllers[leader].data_dir
        # the older snapshots and segments go right after a new snapshot is
        # written, not in the same step: wait for it (a fresh-clone CI run once
        # looked between the two and saw 3 snapshots)
        _wait(lambda: len(_checkpoints(leader_dir)) == 2
              and _segments(leader_dir)[0] > max(broker_end, standby_end),
              CATCH_UP_BOUND_S, "the two newest snapshots kept, older segments gone")
        checkpoints = _checkpoints(leader_dir)
        first_segment = _segments(leader_dir)[0]
        print(f"leader {leader}: snapshots {checkpoints}, first segment {first_segment}")
        assert len(checkpoints) == 2  # the two newest kept
        assert first_segment > max(broker_end, standby_end)  # their offsets are gone

        started = time.monotonic()
        cluster.brokers[2].start()
        cluster.controllers[standby].start()
        _wait(
            lambda: set(names) <= _topics_seen_by(cluster, 2),
            CATCH_UP_BOUND_S,
            "broker 2 sees every topic",
        )
        print(f"broker 2 caught up in {time.monotonic() - started:.1f} s")
        assert "fetched from controller" in cluster.brokers[2].log_tail(1 << 20)
        # The log line comes a little after the files it describes (the log
        # is emptied at the snapshot's end offset, then the image is rebuilt
        # and logged): wait for both, not one then assert the other.
        _wait(
            lambda: "installed" in cluster.controllers[standby].log_tail(1 << 20),
            CATCH_UP_BOUND_S,
            f"controller {standby} installs a snapshot",
        )
        # A log installed at the leader's log end holds no batch until the
        # next commit: its end offset is its segment's base offset.
        _wait(
            lambda: metadata_log_end(cluster, standby) >= metadata_log_end(cluster, leader) > 0,
            CATCH_UP_BOUND_S,
            f"controller {standby} catches up",
        )
        assert _checkpoints(cluster.controllers[standby].data_dir)
        assert _checkpoints(cluster.brokers[2].data_dir)
    finally:
        cluster.close()

