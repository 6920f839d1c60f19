"""`odradek groups` against a real broker: list, describe with lag, reset-offsets, delete."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition

from tests.integration.broker_proc import BrokerProcess
from tests.integration.clients import TIMEOUT, Out, ck_produce, create_topic
from tests.integration.test_groups_helpers import Members, ck_member, start_group_broker

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


@pytest.fixture(scope="module")
def gbroker(broker_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_group_broker(tmp_path_factory.mktemp("groups-cli"), broker_kind)
    try:
        yield proc
    finally:
        proc.close()


def odradek(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "groups", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
        check=False,
    )


def rows(output: str) -> list[list[str]]:
    lines = [ln.split() for ln in output.splitlines() if ln.strip()]
    return [ln for ln in lines if ln and ln[0] != "GROUP" and not ln[0].startswith(("(", "Cons"))]


def test_groups_describe_shows_lag_and_reset_offsets_and_delete(gbroker, topic_name):
    group = f"cli-{uuid.uuid4().hex[:8]}"
    create_topic(gbroker.bootstrap, topic_name, 2)
    ck_produce(
        gbroker.bootstrap, topic_name, [Out(b"v%d" % i, partition=i % 2) for i in range(20)]
    )  # 10 per partition
    m = Members()
    try:
        c = m.add(
            "c", ck_member(gbroker.bootstrap, group, **{"client.id": "cli-client"}), [topic_name]
        )
        m.poll_until(lambda: len(m.records["c"]) == 20, desc="all records")
        c.commit(
            offsets=[TopicPartition(topic_name, 0, 7), TopicPartition(topic_name, 1, 10)],
            asynchronous=False,
        )
        listed = odradek(gbroker.bootstrap, "list")
        assert listed.returncode == 0, listed.stderr
        assert [group, "Stable", "classic"] in rows(listed.stdout)
        described = odradek(gbroker.bootstrap, "describe", group)
        assert described.returncode == 0, described.stderr
        table = {int(r[2]): r for r in rows(described.stdout)}
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        assert table[0][3:6] == ["7", "10", "3"] and table[1][3:6] == ["10", "10", "0"]
        assert table[0][8] == "cli-client"
        members = odradek(gbroker.bootstrap, "describe", group, "--members")
        assert f"{topic_name}(0,1)" in members.stdout
        busy = odradek(
            gbroker.bootstrap, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"
        )
        assert busy.returncode == 1 and "inactive" in busy.stderr
    finally:
        m.close()
    dry = odradek(
        gbroker.bootstrap, "reset-offsets", group, "--topic", f"{topic_name}:0", "--shift-by", "-5"
    )
    assert dry.returncode == 0, dry.stderr
    assert rows(dry.stdout) == [[group, topic_name, "0", "2"]]
    assert "dry run" in dry.stdout
    described = odradek(gbroker.bootstrap, "describe", group)
    assert {int(r[2]): r[3] for r in rows(described.stdout)} == {0: "7", 1: "10"}
    done = odradek(
        gbroker.bootstrap,
        "reset-offsets",
        group,
        "--topic",
        topic_name,
        "--to-earliest",
        "--execute",
    )
    assert done.returncode == 0, done.stderr
    described = odradek(gbroker.bootstrap, "describe", group)
    assert {int(r[2]): (r[3], r[5]) for r in rows(described.stdout)} == {
        0: ("0", "10"),
        1: ("0", "10"),
    }
    later = odradek(
        gbroker.bootstrap,
        "reset-offsets",
        group,
        "--topic",
        topic_name,
        "--to-offset",
        "99",
        "--execute",
    )
    assert rows(later.stdout) == [[group, topic_name, "0", "10"], [group, topic_name, "1", "10"]]
    deleted = odradek(gbroker.bootstrap, "delete", group)
    assert deleted.returncode == 0, deleted.stderr
    assert group not in odradek(gbroker.bootstrap, "list").stdout
    missing = odradek(gbroker.bootstrap, "describe", group)
    assert missing.returncode == 1
