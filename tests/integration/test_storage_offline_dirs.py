"""Log dirs that fail (KIP-858). One unusable when the broker starts: its
partitions stay offline instead of being recreated empty in another dir, the
other dirs serve, and a restart with the dir back brings every record back.
One that fails while a broker of a cluster runs: the broker reports it in its
heartbeat and the controller moves leadership off it at once."""

from __future__ import annotations

import io
import os
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.clients import (
    Out,
    Wire,
    assert_broker_serves,
    ck_consume,
    ck_produce,
    create_topic,
    fetch_v12,
    parse_response,
    produce_request_v9,
    record_batch,
    wait_until,
)
from tests.integration.cluster_proc import FAST_TIMEOUTS, ClusterProcesses
from tests.integration.test_storage_recovery import _describe_log_dirs

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

KAFKA_STORAGE_ERROR = 56
RECORDS_PER_PARTITION = 20


def _call(bootstrap: str, api_key: int, version: int, request: Any, response_cls: Any) -> Any:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    with Wire(bootstrap) as w:
        w.send_request(api_key, version, 11, buf.getvalue())
        frame = w.read_frame()
    assert frame is not None, f"the broker closed the connection on API {api_key}"
    return parse_response(frame, response_cls)[1]


def _produce_error(bootstrap: str, topic: str, partition: int) -> int:
    from kio.schema.produce.v9.response import ProduceResponse

    body = produce_request_v9(topic, partition, record_batch([(None, b"late")], 0), acks=1)
    with Wire(bootstrap) as w:
        w.send_request(0, 9, 12, body)
        frame = w.read_frame()
    assert frame is not None
    [t] = parse_response(frame, ProduceResponse)[1].responses
    return int(t.partition_responses[0].error_code)


def _list_offsets_error(bootstrap: str, topic: str, partition: int) -> int:
    from kio.schema.list_offsets.v7.request import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )
    from kio.schema.list_offsets.v7.response import ListOffsetsResponse
    from kio.static.primitive import i8, i32, i64

    req = ListOffsetsRequest(
        replica_id=i32(-1),
        isolation_level=i8(0),
        topics=(
            ListOffsetsTopic(
                name=topic,
                partitions=(
                    ListOffsetsPartition(
                        partition_index=i32(partition),
                        current_leader_epoch=i32(-1),
                        timestamp=i64(-1),
                    ),
                ),
            ),
        ),
    )
    resp = _call(bootstrap, 2, 7, req, ListOffsetsResponse)
    return int(resp.topics[0].partitions[0].error_code)


def _metadata(bootstrap: str, topic: str) -> dict[int, Any]:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v12.response import MetadataResponse

    req = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    resp = _call(bootstrap, 3, 12, req, MetadataResponse)
    [t] = resp.topics
    return {int(p.partition_index): p for p in t.partitions}


def _make_unusable(dir: Path) -> Path:
    """Move the dir away and put a regular file where it was (root ignores
    chmod, so permissions would not stop the broker)."""
    aside = dir.with_name(dir.name + ".aside")
    os.rename(dir, aside)
    dir.write_text("not a directory\n")
    return aside


def _restore(dir: Path, aside: Path) -> None:
    dir.unlink()
    os.rename(aside, dir)


def test_dir_unusable_at_startup_keeps_its_partitions_offline_until_it_is_back(
    broker_factory, tmp_path, topic_name
):
    bad, good = tmp_path / "bad", tmp_path / "good"
    proc = broker_factory(overrides={"log.dirs": f"{bad},{good}", "metadata.log.dir": str(good)})
    # Placement by partition count: 0 -> bad (first on ties), 1 -> good, 2 -> bad, 3 -> good.
    create_topic(proc.bootstrap, topic_name, 4)
    in_bad, in_good = [0, 2], [1, 3]
    for p in in_bad:
        assert (bad / f"{topic_name}-{p}").is_dir()
    for p in in_good:
        assert (good / f"{topic_name}-{p}").is_dir()
    sent = {p: [b"p%d-%03d" % (p, i) for i in range(RECORDS_PER_PARTITION)] for p in range(4)}
    ck_produce(
        proc.bootstrap,
        topic_name,
        [Out(value=v, partition=p) for p, vs in sent.items() for v in vs],
        acks="all",
    )
    proc.stop()

    aside = _make_unusable(bad)
    proc.restart()
    log_text = proc.log_path.read_text()
    assert f"Log dir {bad} is unusable at start-up" in log_text
    [named] = re.findall(r"Partitions (.*) are assigned to a log dir that is not online", log_text)
    assert named.split(", ") == [f"{topic_name}-{p}" for p in in_bad]
    assert_broker_serves(proc.bootstrap)

    # The good dir serves its partitions, with their data.
    for p in in_good:
        got = ck_consume(proc.bootstrap, topic_name, RECORDS_PER_PARTITION, partitions=[p])
        assert [r.value for r in got] == sent[p]
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"more", partition=1)], acks="all")

    # The bad dir's partitions are offline: storage errors, no leader, an offline replica.
    metadata = _metadata(proc.bootstrap, topic_name)
    for p in in_bad:
        assert _produce_error(proc.bootstrap, topic_name, p) == KAFKA_STORAGE_ERROR
        _, answer = fetch_v12(proc.bootstrap, topic_name, p, 0, max_wait_ms=0, min_bytes=1)
        assert int(answer.error_code) == KAFKA_STORAGE_ERROR
        assert _list_offsets_error(proc.bootstrap, topic_name, p) == KAFKA_STORAGE_ERROR
        assert int(metadata[p].leader_id) == -1
        assert [int(r) for r in metadata[p].offline_replicas] == [1]
    for p in in_good:
        assert int(metadata[p].leader_id) == 1 and list(metadata[p].offline_replicas) == []
    dirs = _describe_log_dirs(proc.bootstrap)
    assert dirs[str(bad)] == KAFKA_STORAGE_ERROR and dirs[str(good)] == 0
    # Nothing was recreated in the good dir.
    for p in in_bad:
        assert not (good / f"{topic_name}-{p}").exists()
    assert sorted(e.name for e in good.iterdir() if e.name.startswith(topic_name)) == [
        f"{topic_name}-{p}" for p in in_good
    ]
    proc.stop()

    _restore(bad, aside)
    proc.restart()
    for p in range(4):
        expected = sent[p] + ([b"more"] if p == 1 else [])
        got = ck_consume(proc.bootstrap, topic_name, len(expected), partitions=[p])
        assert [r.value for r in got] == expected, p
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"after", partition=0)], acks="all")
    assert int(_metadata(proc.bootstrap, topic_name)[0].leader_id) == 1
    assert not any((good / f"{topic_name}-{p}").exists() for p in in_bad)


def _log_time(log_path: Path, needle: str) -> datetime | None:
    """When a node first logged a line holding ``needle`` (its asctime)."""
    for line in log_path.read_text(errors="replace").splitlines():
        if needle in line:
            return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return None


def test_leader_dir_failing_at_run_time_moves_leadership_and_acks_all_goes_on(tmp_path):
    """Three brokers, each with log dirs a and b; a topic with RF=2 in dir a of
    both replicas. The leader's partition dir is removed under it, so its next
    segment roll fails and takes dir a offline. Its heartbeat reports the dir
    (BrokerHeartbeat offline_log_dirs) and the controller makes the follower
    leader, drops the old leader from the ISR and lists it offline; an acks=all
    producer never stops and a consumer reads every acknowledged record."""
    from confluent_kafka import Producer

    def dirs(n: int) -> dict[str, object]:
        home = tmp_path / f"broker-{n}"
        return {"log.dirs": f"{home / 'a'},{home / 'b'}", "metadata.log.dir": str(home / "b")}

    cluster = ClusterProcesses(tmp_path, brokers=3,
                               broker_overrides={n: dirs(n) for n in (1, 2, 3)}).start()
    try:
        topic = "dir-fails"
        # Small segments: the leader rolls (and touches the removed dir) soon.
        cluster.create_topic(topic, 1, 2, config={"segment.bytes": "16384"})
        view = cluster.partitions(topic)[0]
        leader = view.leader
        [follower] = [r for r in view.replicas if r != leader]
        for r in view.replicas:  # placement: the first dir on ties
            assert (tmp_path / f"broker-{r}" / "a" / f"{topic}-0").is_dir()

        acked: dict[int, bytes] = {}
        errors: list[str] = []

        def done(err, msg):  # type: ignore[no-untyped-def]
            if err is None:
                acked[msg.offset()] = msg.value()
            else:
                errors.append(str(err))

        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})
        sent = 0

        def produce(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                p.produce(topic, b"%06d." % sent + b"x" * 1000, partition=0, on_delivery=done)
                sent += 1
                p.poll(0)

        produce(50)
        assert p.flush(30) == 0 and not errors, errors
        assert len(acked) == 50

        # The dir fails under the leader: its next roll cannot create files.
        shutil.rmtree(tmp_path / f"broker-{leader}" / "a" / f"{topic}-0")
        leader_proc = cluster.brokers[leader]
        # Keep producing until the failure happened and leadership moved.
        moved = None
        for _ in range(200):
            produce(10)
            p.flush(0.2)
            moved = cluster.partitions(topic)[0]
            if moved.leader == follower:
                break
        assert moved is not None and moved.leader == follower, moved
        failed_at = _log_time(leader_proc.log_path, "Stopped serving replicas in dir")
        assert failed_at is not None, leader_proc.log_tail()
        reported_at = _log_time(cluster.controller.log_path,
                                f"broker {leader} reported failed log dirs")
        assert reported_at is not None, cluster.controller.log_tail()
        # Reported by a heartbeat sent at once, not one interval (or a fencing) later.
        delay_s = (reported_at - failed_at).total_seconds()
        interval_s = int(str(FAST_TIMEOUTS["broker.heartbeat.interval.ms"])) / 1000
        assert delay_s < 4 * interval_s, delay_s
        print(f"dir failure to leadership move: {delay_s * 1000:.0f} ms")

        # The old leader is out of the ISR and offline for this partition, not fenced.
        assert moved.isr == (follower,)
        md = _metadata(cluster.brokers[follower].bootstrap, topic)[0]
        assert int(md.leader_id) == follower
        assert [int(r) for r in md.offline_replicas] == [leader]
        assert cluster.brokers_in_metadata() == {1, 2, 3}

        # The producer goes on with the new leader; every record is acknowledged.
        produce(50)
        assert p.flush(60) == 0
        assert not errors, errors[:3]
        assert len(acked) == sent
        got = ck_consume(cluster.live_bootstrap(), topic, len(acked), partitions=[0])
        assert [(r.offset, r.value) for r in got] == sorted(acked.items())
        assert leader_proc.is_running()
    finally:
        cluster.close()


def test_dir_failing_at_run_time_on_a_combined_node_takes_its_partitions_offline(
    broker_factory, tmp_path, topic_name
):
    """A combined node (broker and controller) records its own failed dir: the
    partition there has no other replica, so it is left without a leader and
    its replica is listed offline; the other dir's partition keeps leading."""
    from confluent_kafka import Producer

    bad, good = tmp_path / "bad", tmp_path / "good"
    proc = broker_factory(overrides={"log.dirs": f"{bad},{good}", "metadata.log.dir": str(good),
                                     "log.segment.bytes": "16384"})
    create_topic(proc.bootstrap, topic_name, 2)
    assert (bad / f"{topic_name}-0").is_dir() and (good / f"{topic_name}-1").is_dir()
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"x", partition=0)], acks="all")
    shutil.rmtree(bad / f"{topic_name}-0")
    p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "retries": 0,
                  "linger.ms": 5, "message.timeout.ms": 10000})
    for i in range(40):  # 40 KB into 16 KB segments: a roll in the removed dir
        p.produce(topic_name, value=b"%05d" % i + b"." * 1000, partition=0)
        p.poll(0)
    p.flush(20)
    assert _log_time(proc.log_path, f"Stopped serving replicas in dir {bad}") is not None
    # The controller records it right after the failure, on the node's event loop.
    wait_until(lambda: int(_metadata(proc.bootstrap, topic_name)[0].leader_id) == -1, 10)
    assert _log_time(proc.log_path, "broker 1 reported failed log dirs") is not None
    metadata = _metadata(proc.bootstrap, topic_name)
    assert [int(r) for r in metadata[0].offline_replicas] == [1]
    assert int(metadata[1].leader_id) == 1 and list(metadata[1].offline_replicas) == []
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"fine", partition=1)], acks="all")
    assert proc.is_running()
