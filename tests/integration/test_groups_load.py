"""A large `__consumer_offsets` partition loaded after a broker restart.

While the partition loads, its groups answer COORDINATOR_LOAD_IN_PROGRESS
(never an empty or partial set of offsets), FindCoordinator still answers, and
a client that connects right away retries until it gets the committed offsets.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from odradek.coordinator import errors as CE
from odradek.protocol import api
from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import TIMEOUT, Wire, create_topic
from tests.integration.test_groups_helpers import (
    ck_member,
    kio_call,
    offset_commit_v8,
    start_group_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

GROUPS = 2000
PARTITIONS = 50  # 100,000 committed offsets in one __consumer_offsets partition
SAMPLE = ["load-0", "load-777", f"load-{GROUPS - 1}"]


def expected_offset(group_index: int, partition: int) -> int:
    return group_index * 1000 + partition


@pytest.fixture
def loaded_broker(broker_kind, tmp_path) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path, broker_kind, **{"offsets.topic.num.partitions": 1})
    try:
        yield proc
    finally:
        proc.close()


def _commit(w: Wire, topic: str, g: int) -> int:
    body = offset_commit_v8(f"load-{g}", topic,
                            {p: expected_offset(g, p) for p in range(PARTITIONS)})
    resp = kio_call(w, api.ApiKey.OFFSET_COMMIT, 8, body)
    codes = {p.error_code for t in resp.topics for p in t.partitions}
    return max(codes, key=lambda c: c != 0)


def _fetch(w: Wire, groups: list[str]) -> dict[str, tuple[int, dict[int, int]]]:
    body = {
        "groups": [{"group_id": g, "topics": None} for g in groups],
        "require_stable": False,
    }
    resp = kio_call(w, api.ApiKey.OFFSET_FETCH, 8, body)
    return {
        g.group_id: (
            g.error_code,
            {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions},
        )
        for g in resp.groups
    }


def test_client_connecting_during_load_gets_load_in_progress_then_the_offsets(
    loaded_broker, topic_name
):
    proc = loaded_broker
    create_topic(proc.bootstrap, topic_name, PARTITIONS)
    with Wire(proc.bootstrap, timeout=TIMEOUT) as w:
        while _commit(w, topic_name, 0) in (CE.COORDINATOR_LOAD_IN_PROGRESS, CE.NOT_COORDINATOR):
            pass  # the new partition's (empty) load; the client's retry loop
        for g in range(GROUPS):
            assert _commit(w, topic_name, g) == CE.NONE

    proc.restart(hard=True)

    # A real client, at once: committed() retries through the load.
    got: dict[str, object] = {}
    group = SAMPLE[1]
    c = ck_member(proc.bootstrap, group)

    def committed() -> None:
        try:
            tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
            got["offsets"] = {tp.partition: tp.offset for tp in c.committed(tps, timeout=TIMEOUT)}
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            got["error"] = e

    client = threading.Thread(target=committed)
    client.start()
    # The raw protocol, at once: every answer is LOAD_IN_PROGRESS or every offset.
    answers: list[int] = []
    with Wire(proc.bootstrap, timeout=TIMEOUT) as w:
        while True:
            found = _fetch(w, SAMPLE)
            codes = {code for code, _ in found.values()}
            answers.extend(codes)
            assert codes <= {CE.NONE, CE.COORDINATOR_LOAD_IN_PROGRESS}, found
            if codes == {CE.NONE}:
                break
        coordinator = kio_call(
            w, api.ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [SAMPLE[0]]}
        ).coordinators[0]
        assert coordinator.error_code == CE.NONE
    for name, (_, offsets) in found.items():
        g = int(name.split("-")[1])
        assert offsets == {p: expected_offset(g, p) for p in range(PARTITIONS)}, name
    client.join(TIMEOUT)
    c.close()
    assert "error" not in got, got
    g = int(group.split("-")[1])
    assert got["offsets"] == {p: expected_offset(g, p) for p in range(PARTITIONS)}
    loaded = re.findall(r"loaded __consumer_offsets-0: (\d+) records in (\d+) ms", proc.log_tail())
    assert loaded and int(loaded[-1][0]) >= GROUPS * PARTITIONS, proc.log_tail()
    # 100,000 records take far longer to replay than the client takes to connect
    # (it connects as soon as the port accepts): it was answered during the load.
    assert CE.COORDINATOR_LOAD_IN_PROGRESS in answers, (answers, loaded[-1])
