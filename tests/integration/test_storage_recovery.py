"""Crash recovery and failing disks with a real broker and real clients: kill -9
under load, torn and corrupt segments, lost indexes, a full or vanished log dir."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer, TopicPartition

from odradek.protocol.records import iter_batch_headers
from tests.integration.clients import (
    Out,
    assert_broker_serves,
    ck_consume,
    ck_consumer,
    ck_produce,
    create_topic,
    wait_until,
    watermarks,
)
from tests.integration.test_storage_retention import (
    ONE_PER_BATCH,
    dump_log_verify,
    index_files,
    partition_dir,
    segment_files,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def test_kill9_under_acks_all_load_keeps_every_acked_record_in_order(broker_factory,
                                                                     topic_name):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 1, config={"segment.bytes": "65536"})
    acked: list[int] = []
    lock = threading.Lock()

    def on_delivery(err, msg):
        if err is None:
            with lock:
                acked.append(struct.unpack(">I", msg.value()[:4])[0])

    p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 1,
                  "message.timeout.ms": 5000, "retries": 0, "max.in.flight": 5})
    i = 0
    started = time.monotonic()
    killed = False
    while time.monotonic() - started < 6:
        try:
            p.produce(topic_name, value=struct.pack(">I", i) + b"." * 60, partition=0,
                      on_delivery=on_delivery)
            i += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
        if not killed and len(acked) > 20_000:
            proc.kill9()
            killed = True
            break
    p.flush(10)
    assert killed, f"only {len(acked)} acks before the deadline"
    proc.start()
    low, high = watermarks(proc.bootstrap, topic_name, 0)
    assert low == 0 and high >= len(acked)
    got = ck_consume(proc.bootstrap, topic_name, high, timeout=60)
    values = [struct.unpack(">I", r.value[:4])[0] for r in got]
    assert [r.offset for r in got] == list(range(high)), "gap in offsets"
    assert len(set(values)) == len(values), "duplicates after restart"
    assert values == sorted(values), "records out of order"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost"
    # The acknowledged records are a prefix of what was sent: nothing skipped.
    assert values[: len(acked)] == list(range(len(acked))) or set(acked) <= set(values)
    d = partition_dir(proc, topic_name)
    proc.stop()
    assert len(segment_files(d)) > 1
    result = dump_log_verify(segment_files(d) + index_files(d))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr


def _batch_positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, last offset) of each batch."""
    data = path.read_bytes()
    return [(h.position, h.size, h.last_offset) for h in iter_batch_headers(data)]


def test_torn_and_corrupt_segments_are_repaired_to_the_last_valid_batch(broker_factory,
                                                                        topic_name):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 1, config={"segment.bytes": "4096"})
    outs = [Out(value=b"%04d" % i + b"." * 100, partition=0) for i in range(150)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    proc.kill9()  # no clean shutdown: the next start must recover
    d = partition_dir(proc, topic_name)
    logs = segment_files(d)
    assert len(logs) >= 4
    # Tear the second segment in the middle of its third batch, and flip a byte
    # inside a record of the third segment.
    torn = logs[1]
    batches = _batch_positions(torn)
    position, size, _ = batches[2]
    os.truncate(torn, position + size // 2)
    expected_end = batches[1][2] + 1
    flipped = logs[2]
    data = bytearray(flipped.read_bytes())
    data[200] ^= 0x5A
    flipped.write_bytes(bytes(data))
    proc.start()
    assert watermarks(proc.bootstrap, topic_name, 0) == (0, expected_end)
    got = ck_consume(proc.bootstrap, topic_name, expected_end)
    assert [r.value for r in got] == [o.value for o in outs[:expected_end]]
    # Everything after the first bad batch is gone; new records continue there.
    assert [p.name for p in segment_files(d)] == [p.name for p in logs[:2]]
    ck_produce(proc.bootstrap, topic_name, [Out(value=b"after", partition=0)], acks="all")
    [after] = ck_consume(proc.bootstrap, topic_name, 1, offset=expected_end)
    assert (after.offset, after.value) == (expected_end, b"after")
    proc.stop()
    result = dump_log_verify(segment_files(d) + index_files(d))
    assert result.returncode == 0, result.stdout + result.stderr


def test_deleted_index_is_rebuilt_and_lookups_agree(broker_factory, topic_name):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 1, config={
        "segment.bytes": "8192", "index.interval.bytes": "256"})
    base_ts = int(time.time() * 1000) - 100_000
    outs = [Out(value=b"%04d" % i + b"." * 80, partition=0, timestamp=base_ts + 10 * i)
            for i in range(200)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    proc.stop()
    d = partition_dir(proc, topic_name)
    before = {p.name: p.read_bytes() for p in index_files(d)}
    first = segment_files(d)[0].name[:20]
    (d / f"{first}.index").unlink()
    (d / f"{first}.timeindex").write_bytes(b"\x00\x01\x02")  # and a corrupt one
    proc.start()
    c = ck_consumer(proc.bootstrap)
    try:
        for i in (0, 7, 55, 123, 199):
            [found] = c.offsets_for_times([TopicPartition(topic_name, 0, base_ts + 10 * i - 5)],
                                          timeout=10)
            assert found.offset == i
    finally:
        c.close()
    for start in (3, 77, 150):
        [r] = ck_consume(proc.bootstrap, topic_name, 1, offset=start)
        assert (r.offset, r.value) == (start, outs[start].value)
    proc.stop()
    after = {p.name: p.read_bytes() for p in index_files(d)}
    assert after == before  # rebuilt byte for byte
    result = dump_log_verify(segment_files(d) + index_files(d))
    assert result.returncode == 0, result.stdout + result.stderr


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                           capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _describe_log_dirs(bootstrap: str) -> dict[str, int]:
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        [per_broker] = a.describe_log_dirs()
        return {ld["log_dir"]: ld["error_code"] for ld in per_broker["log_dirs"]}
    finally:
        a.close()


@pytest.mark.parametrize("failure", ["disk_full", "dir_removed"])
def test_failed_log_dir_goes_offline_and_other_dirs_keep_working(broker_factory, tmp_path,
                                                                 topic_name, failure):
    bad = tmp_path / f"bad-{uuid.uuid4().hex[:6]}"
    good = tmp_path / "good"
    mounted = False
    if failure == "disk_full":
        mounted = _mount_tmpfs(bad, "256k")
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        proc = broker_factory(overrides={
            "log.dirs": f"{bad},{good}", "metadata.log.dir": str(good),
            "log.segment.bytes": "16384"})
        # Placement by partition count: partition 0 -> bad (first on ties), 1 -> good.
        create_topic(proc.bootstrap, topic_name, 2)
        assert (bad / f"{topic_name}-0").is_dir() and (good / f"{topic_name}-1").is_dir()
        ck_produce(proc.bootstrap, topic_name, [Out(value=b"x", partition=0)], acks="all")
        if failure == "dir_removed":
            shutil.rmtree(bad / f"{topic_name}-0")
        p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "retries": 0,
                      "linger.ms": 5, "message.timeout.ms": 10000})
        errors: list[KafkaError] = []
        for i in range(400):  # ~400 KB: more than the tmpfs, several segment rolls
            p.produce(topic_name, value=b"%05d" % i + b"." * 1000, partition=0,
                      on_delivery=lambda err, msg: err and errors.append(err))
            p.poll(0)
        p.flush(20)
        assert errors, "writes into the failed dir did not fail"
        assert any(e.code() == KafkaError.KAFKA_STORAGE_ERROR for e in errors), errors[:3]
        # The broker is alive, says which dir failed, and serves the other dir.
        assert proc.is_running()
        assert_broker_serves(proc.bootstrap)
        dirs = _describe_log_dirs(proc.bootstrap)
        assert dirs[str(bad)] == 56 and dirs[str(good)] == 0
        ck_produce(proc.bootstrap, topic_name, [Out(value=b"fine", partition=1)], acks="all")
        [r] = ck_consume(proc.bootstrap, topic_name, 1, partitions=[1])
        assert r.value == b"fine"
        c = ck_consumer(proc.bootstrap)
        try:  # reads from the failed dir answer KAFKA_STORAGE_ERROR, not a crash
            c.assign([TopicPartition(topic_name, 0, 0)])
            wait_until(lambda: any(m.error() for m in c.consume(1, timeout=1)) or True, 5)
        finally:
            c.close()
        log_text = proc.log_path.read_text()
        assert f"Stopped serving replicas in dir {bad}" in log_text
        assert proc.is_running()
        proc.stop()
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(bad)], capture_output=True, timeout=10,
                           check=False)


def _offset_for_leader_epoch(bootstrap: str, topic: str, epoch: int) -> tuple[int, int, int]:
    """(error, leader epoch, end offset) from a raw OffsetForLeaderEpoch v4."""
    import io

    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )
    from kio.schema.offset_for_leader_epoch.v4.response import OffsetForLeaderEpochResponse
    from kio.serial import entity_writer
    from kio.static.primitive import i32

    from tests.integration.clients import Wire, parse_response

    req = OffsetForLeaderEpochRequest(
        replica_id=i32(-1),
        topics=(OffsetForLeaderTopic(topic=topic, partitions=(OffsetForLeaderPartition(
            partition=i32(0), current_leader_epoch=i32(-1), leader_epoch=i32(epoch)),)),),
    )
    buf = io.BytesIO()
    entity_writer(OffsetForLeaderEpochRequest)(buf, req)
    with Wire(bootstrap) as w:
        w.send_request(23, 4, 7, buf.getvalue())
        frame = w.read_frame()
    assert frame is not None
    _, resp = parse_response(frame, OffsetForLeaderEpochResponse)
    [p] = resp.topics[0].partitions
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)


def test_checkpoints_are_written_periodically_and_at_clean_shutdown(broker_factory,
                                                                    topic_name):
    proc = broker_factory(overrides={
        "log.flush.offset.checkpoint.interval.ms": 200,
        "log.flush.start.offset.checkpoint.interval.ms": 200,
        "replica.high.watermark.checkpoint.interval.ms": 200,
    })
    create_topic(proc.bootstrap, topic_name, 1, config={"segment.bytes": "2048"})
    outs = [Out(value=b"%04d" % i + b"." * 100, partition=0) for i in range(50)]
    ck_produce(proc.bootstrap, topic_name, outs, **ONE_PER_BATCH)
    data = Path(proc.data_dir)

    def entry(name: str) -> int | None:
        try:
            lines = (data / name).read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in lines[2:]:
            topic, partition, offset = line.split()
            if (topic, partition) == (topic_name, "0"):
                return int(offset)
        return None

    wait_until(lambda: entry("replication-offset-checkpoint") == 50, 10, desc="HW checkpoint")
    # Rolls flush the closed segment, so the recovery point reaches the active base.
    active_base = int(segment_files(partition_dir(proc, topic_name))[-1].name[:20])
    wait_until(lambda: (entry("recovery-point-offset-checkpoint") or 0) >= active_base, 10,
               desc="recovery point checkpoint")
    epochs = (partition_dir(proc, topic_name) / "leader-epoch-checkpoint").read_text()
    assert epochs == "0\n1\n0 0\n"
    assert _offset_for_leader_epoch(proc.bootstrap, topic_name, 0) == (0, 0, 50)
    assert not (data / ".kafka_cleanshutdown").exists()
    proc.stop()
    assert (data / ".kafka_cleanshutdown").exists()
    assert entry("recovery-point-offset-checkpoint") == 50
    assert entry("replication-offset-checkpoint") == 50
    proc.start()
    wait_until(lambda: not (data / ".kafka_cleanshutdown").exists(), 10, desc="marker removed")
    assert watermarks(proc.bootstrap, topic_name, 0) == (0, 50)


def test_flush_messages_1_acks_after_grouped_fsyncs_from_many_producers(broker_factory,
                                                                        topic_name):
    proc = broker_factory()
    create_topic(proc.bootstrap, topic_name, 1, config={"flush.messages": "1"})
    acked: list[bytes] = []
    lock = threading.Lock()

    def produce(worker: int) -> None:
        def on_delivery(err, msg):
            if err is None:
                with lock:
                    acked.append(msg.value())

        p = Producer({"bootstrap.servers": proc.bootstrap, "acks": "all", "linger.ms": 0,
                      "batch.num.messages": 1, "message.timeout.ms": 20000})
        for i in range(300):
            p.produce(topic_name, value=b"w%d-%04d" % (worker, i), partition=0,
                      on_delivery=on_delivery)
            p.poll(0)
        assert p.flush(30) == 0

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(6)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - started
    assert len(acked) == 1800, f"{len(acked)} acked in {elapsed:.1f}s"
    proc.kill9()  # every acknowledged record was fsynced before its answer
    proc.start()
    got = ck_consume(proc.bootstrap, topic_name, 1800, timeout=30)
    assert sorted(r.value for r in got) == sorted(acked)
