"""A log dir that is unusable when the broker starts (KIP-858): its partitions
stay offline instead of being recreated empty in another dir, the other dirs
serve, and a restart with the dir back brings every record back."""

from __future__ import annotations

import io
import os
import re
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
)
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
