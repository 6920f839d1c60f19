"""Tiered storage (KIP-405) with the local-directory remote tier (file://, the
default: `remote-tier` beside the broker's log dir) and real clients: copy, local
deletion, reads from offset 0 across the tier boundary (confluent-kafka and kcat),
ListOffsets -2/-4/-5/-6, remote retention, topic deletion, kill -9 mid-copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition

from odradek.tiered.metadata_records import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    b64_to_uuid,
    decode_value,
    metadata_partition,
    uuid_to_b64,
)
from tests.integration.broker_proc import free_port
from tests.integration.clients import (
    Out,
    ck_admin,
    ck_consume,
    ck_produce,
    create_topic,
    wait_until,
)
from tests.integration.tiered_helpers import (
    TIERED_BROKER,
    list_offsets,
    local_segment_bytes,
    remote_objects,
    remote_partition_dir,
    tiered_topic,
    wait_copies_settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

N = 600


def _records(n: int = N) -> list[Out]:
    return [Out(key=b"k%05d" % i, value=(b"v%05d-" % i) * (20 + i % 17), partition=0)
            for i in range(n)]


def _remote_root(proc) -> Path:
    return Path(proc.data_dir).resolve().parent / "remote-tier"


def _produce(proc, topic: str, outs: list[Out]) -> None:
    ck_produce(proc.bootstrap, topic, outs, **{"linger.ms": 0, "batch.num.messages": 5,
                                                "compression.type": "none", "acks": "all"})


def _metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the metrics")


def test_copy_local_deletion_and_reads_from_offset_zero(broker_factory, topic_name):
    metrics_port = free_port()
    proc = broker_factory({**TIERED_BROKER, "odradek.metrics.port": str(metrics_port)})
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    outs = _records()
    _produce(proc, topic_name, outs)
    root = _remote_root(proc)
    # copied and deleted locally: the local log start moves past 0
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=30,
               desc="local log start offset past 0")
    assert list_offsets(proc.port, topic_name, -2, 8) == (0, 0)
    local_start = list_offsets(proc.port, topic_name, -4, 8)[1]
    code, tiered = list_offsets(proc.port, topic_name, -5, 9)
    assert code == 0 and tiered >= local_start - 1
    code, pending = list_offsets(proc.port, topic_name, -6, 11)
    assert code == 0 and pending >= tiered + 1
    # once the copies settle: the first offset pending upload follows the last tiered
    # one, which is the end of the last closed segment
    tiered = wait_copies_settled(proc.port, topic_name)
    assert list_offsets(proc.port, topic_name, -6, 11) == (0, tiered + 1)
    closed = sorted(int(p.name[:20]) for p in (Path(proc.data_dir) / f"{topic_name}-0")
                    .glob("*.log"))
    assert tiered + 1 == closed[-1]  # the active segment's base: all before it copied
    assert list_offsets(proc.port, topic_name, -5, 8)[0] == 35  # UNSUPPORTED_VERSION
    assert list_offsets(proc.port, topic_name, -1, 9) == (0, N)

    # odradek topics describe shows the tiers' offsets
    described = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", proc.bootstrap,
         "describe", topic_name], capture_output=True, text=True, timeout=60,
        check=True).stdout
    assert "LogStartOffset: 0\tLocalLogStartOffset: " in described, described
    assert f"EndOffset: {N}" in described, described
    # ... and the remote size, from __remote_log_metadata (retention.bytes=-1: settled)
    logs = remote_objects(root, topic_name, "log")
    assert (f"RemoteSizeBytes: {sum(p.stat().st_size for p in logs)}\t"
            f"RemoteSegments: {len(logs)}") in described, described
    assert _metric(metrics_port, "odradek_remote_log_segments") == len(logs)

    # DescribeLogDirs reports the local size only, as Kafka does (KIP-405, KIP-1005)
    from odradek.protocol import api
    from tests.integration.clients import Wire
    from tests.integration.test_groups_helpers import kio_call

    def local_bytes() -> int:
        return sum(p.stat().st_size for p in (Path(proc.data_dir) / f"{topic_name}-0")
                   .glob("*.log"))

    before = local_bytes()  # nothing is produced any more: the local tier only shrinks
    with Wire(proc.bootstrap) as w:
        dirs = kio_call(w, api.ApiKey.DESCRIBE_LOG_DIRS, 4,
                        {"topics": [{"topic": topic_name, "partitions": [0]}]})
    sizes = [q.partition_size for d in dirs.results for t in d.topics
             if t.name == topic_name for q in t.partitions]
    # (with the remote tier's bytes it would be above `before`: logs is not empty)
    assert len(sizes) == 1 and local_bytes() <= sizes[0] <= before, (sizes, before)

    # every remote .log is byte-identical to the local segment it came from
    d = Path(proc.data_dir) / f"{topic_name}-0"
    logs = remote_objects(root, topic_name, "log")
    assert logs and len(remote_objects(root, topic_name, "metadata")) == len(logs)
    for obj in logs:
        base = obj.name.split("-", 1)[0]
        assert obj.read_bytes() == local_segment_bytes(d, base), obj.name

    got = ck_consume(proc.bootstrap, topic_name, N, timeout=60)
    assert [(r.key, r.value, r.offset) for r in got] == [
        (o.key, o.value, i) for i, o in enumerate(outs)]

    assert _metric(metrics_port, "odradek_remote_segments_copied_total") >= len(logs)
    assert _metric(metrics_port, "odradek_remote_bytes_fetched_total") > 0
    assert _metric(metrics_port, "odradek_remote_reads_total") > 0
    assert _metric(metrics_port, "odradek_remote_log_size_bytes") > 0

    # __remote_log_metadata holds STARTED then FINISHED for every copied segment,
    # decodable with metadata_records.decode_value (what a Spark driver does)
    topic_id = b64_to_uuid(remote_partition_dir(root, topic_name).parent.name[-22:])
    meta_partition = metadata_partition(topic_id, 0, 50)
    copied = {obj.name.split("-", 1)[1].split(".")[0] for obj in logs}
    events = [decode_value(r.value) for r in ck_consume(
        proc.bootstrap, "__remote_log_metadata", 2 * len(copied),
        partitions=(meta_partition,), timeout=60)]
    started = {uuid_to_b64(e.segment_id.id): e for e in events
               if isinstance(e, RemoteLogSegmentMetadata)}
    finished = {uuid_to_b64(e.segment_id.id) for e in events
                if isinstance(e, RemoteLogSegmentMetadataUpdate)
                and e.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED}
    assert copied <= set(started) and copied <= finished
    assert all(e.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED and e.end_offset >=
               e.start_offset and e.segment_id.topic_id_partition.name == topic_name
               for e in started.values())

    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", proc.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o",
             "beginning", "-c", str(N), "-e", "-f", "%o %k %s\n", "-m", "30"],
            capture_output=True, timeout=90, check=True).stdout
        assert out.splitlines() == [b"%d %s %s" % (i, o.key, o.value)
                                    for i, o in enumerate(outs)]


def test_remote_retention_and_topic_deletion(broker_factory, topic_name):
    proc = broker_factory(TIERED_BROKER)
    create_topic(proc.bootstrap, topic_name, 1,
                 config=tiered_topic(retention_bytes="30000", local_retention_bytes="4096"))
    outs = _records()
    _produce(proc, topic_name, outs)
    root = _remote_root(proc)
    wait_until(lambda: list_offsets(proc.port, topic_name, -2, 8)[1] > 0, timeout=30,
               desc="remote retention moving the log start offset")
    # copies done (-6 follows -5), then retention passes until the start settles (the
    # same for three looks half a second apart: several 200 ms passes)
    wait_copies_settled(proc.port, topic_name)
    looks: list[int] = []

    def start_settled() -> bool:
        looks.append(list_offsets(proc.port, topic_name, -2, 8)[1])
        return len(looks) >= 3 and len(set(looks[-3:])) == 1

    wait_until(start_settled, timeout=30, interval=0.5, desc="the log start settled")
    start = looks[-1]
    local_start = list_offsets(proc.port, topic_name, -4, 8)[1]
    assert 0 < start < local_start
    # what is left reads from the new start, across the tiers
    got = ck_consume(proc.bootstrap, topic_name, N - start, offset=start, timeout=60)
    assert [r.value for r in got] == [o.value for o in outs[start:]]

    # DeleteRecords inside the remote tier: the log start moves at once, the remote
    # segments wholly below it go
    admin = ck_admin(proc.bootstrap)
    cut = (start + local_start) // 2
    fs = admin.delete_records([TopicPartition(topic_name, 0, cut)], request_timeout=20)
    assert next(iter(fs.values())).result(timeout=30).low_watermark == cut
    assert list_offsets(proc.port, topic_name, -2, 8)[1] == cut
    got = ck_consume(proc.bootstrap, topic_name, N - cut, offset=cut, timeout=60)
    assert [r.value for r in got] == [o.value for o in outs[cut:]]

    def below_cut_gone() -> bool:
        starts = sorted(int(p.name.split("-", 1)[0])
                        for p in remote_objects(root, topic_name, "metadata"))
        return bool(starts) and starts[0] <= cut and (len(starts) == 1 or starts[1] > cut)

    wait_until(below_cut_gone, timeout=20, desc="remote segments below the cut deleted")

    prefix = remote_partition_dir(root, topic_name).parent
    assert prefix.exists()
    admin.delete_topics([topic_name])[topic_name].result(timeout=30)
    wait_until(lambda: not prefix.exists(), timeout=30, desc="remote prefix removed")


def test_delete_records_in_the_remote_tier_survives_kill9(broker_factory, topic_name):
    proc = broker_factory(TIERED_BROKER)
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    outs = _records()
    _produce(proc, topic_name, outs)
    root = _remote_root(proc)
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=30,
               desc="copied and deleted locally")
    wait_copies_settled(proc.port, topic_name)
    local_start = list_offsets(proc.port, topic_name, -4, 8)[1]
    # a cut inside the first remote segment: that segment stays in the store
    first = decode_value(remote_objects(root, topic_name, "metadata")[0].read_bytes())
    assert isinstance(first, RemoteLogSegmentMetadata) and first.start_offset == 0
    cut = first.end_offset // 2 + 1
    assert 0 < cut <= first.end_offset < local_start
    admin = ck_admin(proc.bootstrap)
    fs = admin.delete_records([TopicPartition(topic_name, 0, cut)], request_timeout=20)
    assert next(iter(fs.values())).result(timeout=30).low_watermark == cut
    # no checkpoint interval passes: kill -9 at once
    proc.kill9()
    stored = remote_partition_dir(root, topic_name) / "log-start-offset"
    assert stored.read_text() == str(cut)
    assert remote_objects(root, topic_name, "metadata")[0].name.startswith("0" * 20)
    proc.start()
    # once the remote view is loaded the log start is the cut again, not 0
    wait_until(lambda: list_offsets(proc.port, topic_name, -2, 8)[1] < local_start,
               timeout=60, desc="the remote view loaded after the restart")
    assert list_offsets(proc.port, topic_name, -2, 8) == (0, cut)
    got = ck_consume(proc.bootstrap, topic_name, N - cut, offset=0, timeout=60)
    assert [(r.offset, r.value) for r in got] == [
        (i, o.value) for i, o in enumerate(outs) if i >= cut]
    assert stored.exists()  # the orphan sweep of the new leader epoch keeps it


def test_kill_during_copy_leaves_nothing_half_visible(broker_factory, topic_name):
    # 40 kB/s: each 4 kB segment takes ~0.1 s and a kill lands mid-copy soon enough;
    # remote reads at 40 kB/s too, so a kill lands mid-read as well
    proc = broker_factory({**TIERED_BROKER,
                           "remote.log.manager.copy.max.bytes.per.second": "40000",
                           "remote.log.manager.fetch.max.bytes.per.second": "40000"})
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    outs = _records()
    _produce(proc, topic_name, outs)
    root = _remote_root(proc)

    def orphan() -> bool:
        d = remote_partition_dir(root, topic_name)
        if d is None:
            return False
        stems = {p.name.split(".", 1)[0] for p in d.iterdir()}
        marked = {p.name.split(".", 1)[0] for p in d.glob("*.metadata")}
        return bool(stems - marked)

    wait_until(orphan, timeout=30, interval=0.005, desc="a copy in progress")
    proc.kill9()
    d = remote_partition_dir(root, topic_name)
    # a copy cut short has no marker: no reader sees it
    markers = {p.name.split(".", 1)[0] for p in d.glob("*.metadata")}
    for p in d.iterdir():
        stem = p.name.split(".", 1)[0]
        if stem not in markers:
            assert not (d / f"{stem}.metadata").exists()
    proc.start()
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=60,
               desc="copies resumed and local deletion")
    time.sleep(1)
    got = ck_consume(proc.bootstrap, topic_name, N, timeout=60)
    assert [(r.key, r.value) for r in got] == [(o.key, o.value) for o in outs]
    d = remote_partition_dir(root, topic_name)
    stems = {p.name.split(".", 1)[0] for p in d.iterdir()}
    marked = {p.name.split(".", 1)[0] for p in d.glob("*.metadata")}
    wait_until(lambda: not orphan(), timeout=30, desc="orphans removed")
    assert marked <= stems

    # kill -9 during a remote read: the consumer goes on after the restart (the fetches
    # below the local start wait for the remote view instead of answering out of range)
    # and gets every record once, in order
    def crash() -> None:
        time.sleep(1.0)
        proc.kill9()
        proc.start()

    crasher = threading.Thread(target=crash)
    crasher.start()
    got = ck_consume(proc.bootstrap, topic_name, N, timeout=90)
    crasher.join()
    assert [(r.offset, r.value) for r in got] == [(i, o.value) for i, o in enumerate(outs)]


def test_disabling_with_delete_on_disable_empties_the_remote_tier(broker_factory, topic_name):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    proc = broker_factory(TIERED_BROKER)
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    _produce(proc, topic_name, _records(300))
    root = _remote_root(proc)
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=30,
               desc="copied and deleted locally")
    admin = ck_admin(proc.bootstrap)
    # KIP-950: off without deleting the remote data is refused
    refused = ConfigResource("TOPIC", topic_name, incremental_configs=[
        ConfigEntry("remote.storage.enable", "false",
                    incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="remote.log.delete.on.disable=true"):
        for f in admin.incremental_alter_configs([refused]).values():
            f.result(timeout=30)
    resource = ConfigResource("TOPIC", topic_name, incremental_configs=[
        ConfigEntry("remote.log.delete.on.disable", "true",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("remote.storage.enable", "false",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(timeout=30)
    wait_until(lambda: not remote_objects(root, topic_name, "log"), timeout=30,
               desc="remote segments deleted")
    local_start = list_offsets(proc.port, topic_name, -4, 8)[1]
    assert list_offsets(proc.port, topic_name, -2, 8)[1] == local_start
    assert list_offsets(proc.port, topic_name, -5, 9) == (0, -1)


def test_read_committed_across_the_tiers_skips_aborted(broker_factory, topic_name):
    from tests.integration.txn_helpers import read_values, txn_producer

    proc = broker_factory({**TIERED_BROKER, "transaction.state.log.replication.factor": "1",
                           "transaction.state.log.min.isr": "1"})
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    producer = txn_producer(proc.bootstrap, f"tx-{topic_name}")
    committed: list[bytes] = []
    everything: list[bytes] = []
    for t in range(12):
        producer.begin_transaction()
        values = [b"t%02d-%03d-" % (t, i) + b"x" * 150 for i in range(20)]
        for v in values:
            producer.produce(topic_name, value=v, partition=0)
        producer.flush(30)  # written before the abort (an abort purges unsent records)
        everything += values
        if t % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    root = _remote_root(proc)
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=30,
               desc="copied and deleted locally")
    wait_copies_settled(proc.port, topic_name)
    # aborted transactions travel in the remote .txnindex (Kafka's format)
    assert any(p.stat().st_size for p in remote_objects(root, topic_name, "txnindex"))
    got = read_values(proc.bootstrap, topic_name, 1, "read_committed", expect=len(committed),
                      timeout_s=60)
    assert got == committed
    got = read_values(proc.bootstrap, topic_name, 1, "read_uncommitted",
                      expect=len(everything), timeout_s=60)
    assert got == everything


def test_java_client_reads_across_the_tiers(broker_factory, topic_name, tmp_path):
    from tests.integration.test_java_client import COMPILE_TIMEOUT_S, _missing, kafka_jars

    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            _missing(f"{tool} not on PATH (apt-get install default-jdk-headless)")
    jars = os.pathsep.join(str(j) for j in kafka_jars())
    source = Path(__file__).parent / "java" / "OdradekJavaTiered.java"
    compiled = subprocess.run(["javac", "-Xlint:none", "-cp", jars, "-d", str(tmp_path),
                               str(source)], capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, check=False)
    assert compiled.returncode == 0, compiled.stderr
    proc = broker_factory(TIERED_BROKER)
    create_topic(proc.bootstrap, topic_name, 1, config=tiered_topic())
    outs = _records(300)
    _produce(proc, topic_name, outs)
    wait_until(lambda: list_offsets(proc.port, topic_name, -4, 8)[1] > 0, timeout=30,
               desc="copied and deleted locally")
    run = subprocess.run(["java", "-Xmx256m", "-cp", f"{tmp_path}{os.pathsep}{jars}",
                          "OdradekJavaTiered", proc.bootstrap, topic_name, str(len(outs))],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("REC ")] == [
        f"REC {i} {o.key.decode()} {o.value.decode()}" for i, o in enumerate(outs)]
    offsets = dict(ln.split()[1:] for ln in lines if ln.startswith("OFFSET "))
    assert offsets["earliest"] == "0"
    assert int(offsets["earliest-local"]) > 0
    assert int(offsets["latest-tiered"]) >= int(offsets["earliest-local"]) - 1
