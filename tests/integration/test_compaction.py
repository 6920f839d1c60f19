"""Log compaction with a real broker and real clients: latest value per key,
tombstones, the offset-map bound, compact,delete, keyless records."""

from __future__ import annotations

import io
import os
import signal
import struct
import time

import pytest
from confluent_kafka import KafkaError
from kio.serial import entity_reader, entity_writer

from odradek.protocol import api, entities
from odradek.protocol.records import Record, build_batch
from tests.integration.clients import (
    Out,
    Wire,
    ck_consume,
    ck_produce,
    create_topic,
    wait_until,
    watermarks,
)
from tests.integration.compaction_helpers import (
    FILLER_KEY,
    cleaned_lines,
    cleaner_worker_pids,
    consume_all,
    latest_by_key,
    partition_dir,
    produce_updates,
    roll_with_filler,
    segment_bases,
    wait_for_exact,
)

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

FAST_CLEANER = {"log.cleaner.backoff.ms": 200, "log.retention.check.interval.ms": 200}


def _compacted(**extra: object) -> dict[str, str]:
    config = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
              "segment.ms": "1000"}
    config.update({k: str(v) for k, v in extra.items()})
    return config


def test_100k_updates_over_1000_keys_leave_the_latest_values_then_no_tombstones(
    broker_factory, topic_name
):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, 1,
                 # tombstones must outlive the first cleaning, which a loaded machine
                 # delays (a CI run beside a chaos run took the cleaner past 3 s)
                 _compacted(**{"segment.bytes": 200_000, "delete.retention.ms": 10_000}))
    updates: list[tuple[bytes, bytes | None]] = []
    for i in range(100_000):
        key = b"key-%04d" % (i % 1000)
        last_round = i >= 99_000
        value = None if last_round and i % 10 == 0 else b"value-%d" % i
        updates.append((key, value))
    produce_updates(broker.bootstrap, topic_name, updates)
    expected = dict(updates)
    assert sum(v is None for v in expected.values()) == 100
    roll_with_filler(broker.bootstrap, topic_name, 1000)
    records = wait_for_exact(broker.bootstrap, topic_name, expected)
    assert sum(r.value is None for r in records) == 100  # unexpired tombstones stay
    assert cleaned_lines(broker, f"{topic_name}-0")
    # Progress is in Kafka's cleaner-offset-checkpoint: cleaned up to the filler's segment.
    checkpoint = (broker.data_dir / "cleaner-offset-checkpoint").read_text().splitlines()
    assert checkpoint[0] == "0" and f"{topic_name} 0 100000" in checkpoint[2:]
    # After delete.retention.ms the cleaner runs again and the tombstones go.
    without_tombstones = {k: v for k, v in expected.items() if v is not None}
    wait_for_exact(broker.bootstrap, topic_name, without_tombstones, timeout=60)
    # The offsets of what is left are the ones the updates were written at.
    offsets = {r.key: r.offset for r in consume_all(broker.bootstrap, topic_name)}
    assert all(offsets[b"key-%04d" % k] == 99_000 + k for k in range(1, 1000) if k % 10)


def test_a_consumer_from_the_beginning_during_cleaning_sees_every_latest_value(
    broker_factory, topic_name
):
    # The swap must land while the consumer reads: an idle-cgroup worker
    # (odradek.log.cleaner.cgroup.idle) gets no CPU while other processes on
    # a loaded machine keep both busy, which makes that a matter of load.
    broker = broker_factory({**FAST_CLEANER, "odradek.log.cleaner.cgroup.idle": "false"},
                            start=False)
    broker.env = {"ODRADEK_CLEANER_STEP_DELAY_MS": "40"}
    broker.start()
    create_topic(broker.bootstrap, topic_name, 1, _compacted(**{"segment.bytes": 8000}))
    updates = [(b"k%04d" % (i % 1000), b"v%d" % i) for i in range(15_000)]
    produce_updates(broker.bootstrap, topic_name, updates)
    expected = dict(updates)
    roll_with_filler(broker.bootstrap, topic_name, 1000)
    dir = partition_dir(broker, topic_name)
    wait_until(lambda: any(n.endswith((".cleaned", ".swap")) for n in os.listdir(dir)),
               timeout=20, interval=0.02, desc="the cleaner at work")
    bases_at_start = segment_bases(dir)
    # A slow reader with small fetches: it reads for longer than the cleaning takes.
    seen = consume_all(broker.bootstrap, topic_name, timeout=60, batch=100, pause_s=0.03,
                       **{"max.partition.fetch.bytes": 2000, "fetch.max.bytes": 2000,
                          "message.max.bytes": 1000, "queued.max.messages.kbytes": 1})
    assert segment_bases(dir) != bases_at_start, "no swap happened while the consumer read"
    latest = latest_by_key(r for r in seen if r.key != FILLER_KEY)
    assert latest == expected
    wait_for_exact(broker.bootstrap, topic_name, expected)


def test_more_keys_than_the_offset_map_holds_are_cleaned_over_several_rounds(
    broker_factory, topic_name
):
    # 400 slots of 24 bytes: 360 keys a round at the default load factor 0.9.
    broker = broker_factory({**FAST_CLEANER, "log.cleaner.dedupe.buffer.size": 24 * 400})
    create_topic(broker.bootstrap, topic_name, 1, _compacted(**{"segment.bytes": 20_000}))
    updates = [(b"key-%04d" % (i % 1000), b"v%d" % i) for i in range(5_000)]
    produce_updates(broker.bootstrap, topic_name, updates)
    roll_with_filler(broker.bootstrap, topic_name, 1000)
    wait_for_exact(broker.bootstrap, topic_name, dict(updates))
    lines = cleaned_lines(broker, f"{topic_name}-0")
    full = [line for line in lines if "map full" in line]
    assert len(full) >= 2, lines
    for line in lines:
        used = int(line.split(" slots")[0].rsplit(", ", 1)[1].split("/")[0])
        assert used <= 360, line


@pytest.mark.parametrize("policy", ["compact,delete", "compact"])
def test_compact_delete_removes_old_segments_and_compact_alone_does_not(
    broker_factory, topic_name, policy
):
    broker = broker_factory(FAST_CLEANER)
    create_topic(broker.bootstrap, topic_name, 1, {
        "cleanup.policy": policy, "retention.ms": "1500", "segment.bytes": "2000",
        "file.delete.delay.ms": "0"})
    produce_updates(broker.bootstrap, topic_name,
                    [(b"distinct-%d" % i, b"v" * 40) for i in range(300)])
    time.sleep(2.0)
    produce_updates(broker.bootstrap, topic_name, [(b"late", b"v")])  # rolls the old data out
    if policy == "compact,delete":
        wait_until(lambda: watermarks(broker.bootstrap, topic_name, 0)[0] >= 300, timeout=20,
                   desc="retention removing the old segments")
        assert [r.key for r in consume_all(broker.bootstrap, topic_name)] == [b"late"]
    else:
        time.sleep(1.5)
        assert watermarks(broker.bootstrap, topic_name, 0)[0] == 0
        assert len(consume_all(broker.bootstrap, topic_name)) == 301


def _produce_raw(w: Wire, topic: str, batch: bytes) -> object:
    cls = api.request_class(api.ApiKey.PRODUCE, 9)
    buf = io.BytesIO()
    entity_writer(cls)(buf, entities.build(cls, {
        "transactional_id": None, "acks": 1, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
    w.send_request(0, 9, 11, buf.getvalue(), header_version=2)
    frame = w.read_frame()
    assert frame is not None and struct.unpack_from(">i", frame)[0] == 11
    resp, _ = entity_reader(api.response_class(api.ApiKey.PRODUCE, 9))(frame, 5)
    return resp.responses[0].partition_responses[0]


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact"})
    other = topic_name + "-delete"
    create_topic(broker.bootstrap, other, 1)
    mixed = build_batch([Record(-1, 1, b"k", b"a"), Record(-1, 1, None, b"b"),
                         Record(-1, 1, None, b"c")], compression=2)
    with Wire(broker.bootstrap) as w:
        answer = _produce_raw(w, topic_name, mixed)
        assert answer.error_code.value == 87  # INVALID_RECORD
        assert "Compacted topic cannot accept message without key" in answer.error_message
        assert [e.batch_index for e in answer.record_errors] == [1, 2]
        assert _produce_raw(w, other, mixed).error_code.value == 0
        keyed = build_batch([Record(-1, 1, b"k", b"a"), Record(-1, 1, b"j", None)])
        assert _produce_raw(w, topic_name, keyed).error_code.value == 0
    # A real client sees the error on its delivery report, and nothing was written.
    [delivery] = ck_produce(broker.bootstrap, topic_name, [Out(value=b"no key")],
                            raise_on_error=False, retries=0)
    assert delivery.error is not None and delivery.error.code() == KafkaError.INVALID_RECORD
    assert [(r.key, r.value) for r in ck_consume(broker.bootstrap, topic_name, 2)] == [
        (b"k", b"a"), (b"j", None)]


def test_a_dead_cleaner_worker_is_replaced_and_the_log_still_gets_cleaned(
    broker_factory, topic_name
):
    broker = broker_factory(FAST_CLEANER, start=False)
    broker.env = {"ODRADEK_CLEANER_STEP_DELAY_MS": "30"}
    broker.start()
    create_topic(broker.bootstrap, topic_name, 1, _compacted(**{"segment.bytes": 4000}))
    updates = [(b"k%04d" % (i % 500), b"v%d" % i) for i in range(3000)]
    produce_updates(broker.bootstrap, topic_name, updates, batch_records=50)
    dir = partition_dir(broker, topic_name)
    wait_until(lambda: any(n.endswith((".cleaned", ".swap")) for n in os.listdir(dir)),
               timeout=20, interval=0.01, desc="the cleaner at work")
    [worker] = cleaner_worker_pids(broker.pid or -1)
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: "cleaner worker 0 died" in broker.log_tail(20000), timeout=20,
               desc="the broker noticing its cleaner worker died")
    roll_with_filler(broker.bootstrap, topic_name, 1000)
    wait_for_exact(broker.bootstrap, topic_name, dict(updates))
    assert cleaned_lines(broker, f"{topic_name}-0")
