"""Share-group offsets on three brokers (KIP-932): AlterShareGroupOffsets,
DeleteShareGroupOffsets and DescribeShareGroupOffsets sent to the group
coordinator for partitions led by the other brokers, whose leaders still hold
the old state in memory, over the wire and with `odradek groups
reset-share-offsets` / `delete-share-offsets` (docs/share_groups.md, Offsets)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from odradek.protocol import api
from tests.integration.clients import Wire, create_topic
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.test_groups_helpers import kio_call
from tests.integration.test_share_groups import _consumer, _new_group, _produce

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

K = api.ApiKey
TOPIC, PARTITIONS, PER_PARTITION = "share-offsets-3", 3, 30
NON_EMPTY_GROUP = 68


def _coordinator(cluster: ClusterProcesses, group: str) -> tuple[int, str]:
    deadline = time.monotonic() + 30
    while True:
        with Wire(cluster.bootstrap.split(",")[0]) as w:
            c = kio_call(w, K.FIND_COORDINATOR, 4, {
                "key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        if c.error_code.value == 0:
            return c.node_id, f"{c.host}:{c.port}"
        assert time.monotonic() < deadline, c
        time.sleep(0.2)


def _describe(bootstrap: str, group: str, every: bool = False) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, start offset, lag); `every`: without naming the topics
    (every partition the group has state for)."""
    topics = None if every else [{"topic_name": TOPIC, "partitions": list(range(PARTITIONS))}]
    with Wire(bootstrap) as w:
        g = kio_call(w, K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{
            "group_id": group, "topics": topics}]}).groups[0]
    assert g.error_code.value == 0, g
    if every and not g.topics:
        return {}
    assert [t.topic_name for t in g.topics] == [TOPIC], g
    return {p.partition_index: (p.error_code.value, p.start_offset, p.lag)
            for p in g.topics[0].partitions}


def _alter(bootstrap: str, group: str, offsets: dict[int, int]) -> Any:
    with Wire(bootstrap) as w:
        return kio_call(w, K.ALTER_SHARE_GROUP_OFFSETS, 0, {
            "group_id": group, "topics": [{"topic_name": TOPIC, "partitions": [
                {"partition_index": p, "start_offset": o} for p, o in offsets.items()]}]})


def _cli(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "groups", *args,
                           "--bootstrap-server", bootstrap, "--timeout", "30"],
                          capture_output=True, text=True, timeout=90, check=False)


def _read(bootstrap: str, group: str, want: int) -> list[tuple[int, int, int]]:
    """(partition, offset, delivery count) of `want` records read and
    acknowledged by a new member, which then leaves."""
    c = _consumer(bootstrap, group, TOPIC, **{"share.acknowledgement.mode": "explicit"})
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 45
        while len(got) < want and time.monotonic() < deadline:
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                got.append(m)
        assert all(err is None for err in c.commit_sync(30).values())
        return sorted((m.partition(), m.offset(), m.delivery_count()) for m in got)
    finally:
        c.close()


def test_alter_and_delete_share_offsets_of_partitions_led_elsewhere(tmp_path: Path) -> None:
    cluster = ClusterProcesses(tmp_path, brokers=3).start()
    try:
        bootstrap = cluster.bootstrap
        create_topic(bootstrap, TOPIC, PARTITIONS)
        leaders = {p: v.leader for p, v in cluster.partitions(TOPIC).items()}
        group = _new_group(bootstrap)  # share.auto.offset.reset=earliest
        node, coordinator = _coordinator(cluster, group)
        elsewhere = [p for p, leader in leaders.items() if leader != node]
        assert len(set(leaders.values())) == 3 and len(elsewhere) == 2, (leaders, node)
        _produce(bootstrap, TOPIC, PARTITIONS * PER_PARTITION, partitions=PARTITIONS)

        # a first member reads and acknowledges everything: each leader holds its
        # share partition in memory, start offset 30
        first = _read(bootstrap, group, PARTITIONS * PER_PARTITION)
        assert first == [(p, o, 1) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
        assert _describe(coordinator, group) == {p: (0, PER_PARTITION, 0)
                                                 for p in range(PARTITIONS)}
        assert _describe(coordinator, group, every=True) == _describe(coordinator, group)
        shown = _cli("describe-share", group, "-o", "json", bootstrap=bootstrap)
        assert shown.returncode == 0, shown.stderr
        assert [(r["partition"], r["start_offset"], r["lag"])
                for r in json.loads(shown.stdout)] == [(p, PER_PARTITION, 0)
                                                       for p in range(PARTITIONS)]

        # not while a member is in the group
        member = _consumer(bootstrap, group, TOPIC)
        deadline = time.monotonic() + 30
        while (busy := _alter(coordinator, group, {0: 0})).error_code.value != NON_EMPTY_GROUP:
            assert time.monotonic() < deadline, busy
            member.poll(0.2)
        member.close()

        # empty again: each partition starts over at its own offset, on every leader
        new_start = {0: 5, 1: 10, 2: 20}
        deadline = time.monotonic() + 30
        while (altered := _alter(coordinator, group, new_start)).error_code.value != 0:
            assert altered.error_code.value == NON_EMPTY_GROUP, altered  # the leave in flight
            assert time.monotonic() < deadline, altered
            time.sleep(0.2)
        assert [(p.partition_index, p.error_code.value)
                for p in altered.responses[0].partitions] == [(0, 0), (1, 0), (2, 0)]
        assert _describe(coordinator, group) == {
            p: (0, o, PER_PARTITION - o) for p, o in new_start.items()}

        # a new member gets exactly the records from the new start offsets, first
        # deliveries, from every leader (the old in-memory state was dropped)
        want = sum(PER_PARTITION - o for o in new_start.values())
        again = _read(bootstrap, group, want)
        assert again == [(p, o, 1) for p, s in new_start.items()
                         for o in range(s, PER_PARTITION)], Counter(p for p, _, _ in again)
        assert _describe(coordinator, group) == {p: (0, PER_PARTITION, 0)
                                                 for p in range(PARTITIONS)}

        # Delete (the CLI, as kafka-share-groups.sh --delete-offsets) forgets the
        # state of every partition: a new member starts over at
        # share.auto.offset.reset (earliest)
        deleted = _cli("delete-share-offsets", group, "--topic", TOPIC, bootstrap=coordinator)
        assert deleted.returncode == 0, deleted.stderr
        assert _describe(coordinator, group) == {p: (0, -1, -1) for p in range(PARTITIONS)}
        assert _describe(coordinator, group, every=True) == {}
        assert _read(bootstrap, group, PARTITIONS * PER_PARTITION) == first
        # the CLI's reset, resolved to each partition's log start
        reset = _cli("reset-share-offsets", group, "--topic", TOPIC, "--to-earliest",
                     "--execute", bootstrap=bootstrap)
        assert reset.returncode == 0, reset.stderr
        assert _describe(coordinator, group) == {p: (0, 0, PER_PARTITION)
                                                 for p in range(PARTITIONS)}
        assert _cli("delete-share-offsets", group, "--topic", TOPIC,
                    bootstrap=bootstrap).returncode == 0
        again_deleted = _cli("delete-share-offsets", group, "--topic", TOPIC,
                             bootstrap=bootstrap)
        assert again_deleted.returncode == 1  # no state left: as Kafka, an error
        assert "error 3 There is no offset information to delete." in again_deleted.stderr
    finally:
        cluster.close()
