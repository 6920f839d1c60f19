"""Transactions with confluent-kafka (librdkafka): commit, abort, read_committed,
fencing of a killed producer, timeouts, offsets in a transaction, dump-log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.integration.clients import ck_common, ck_producer, create_topic, wait_until
from tests.integration.txn_helpers import TXN_BROKER, end_offset, read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def test_aborted_txn_is_invisible_to_read_committed_and_visible_to_read_uncommitted(
        broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 2)
    p = txn_producer(b.bootstrap, "tx-visibility")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, value=b"c1-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, value=b"ab-%d" % i, partition=i % 2)
    p.flush(30)  # sent, so the abort has something to hide
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, value=b"c2-%d" % i, partition=i % 2)
    p.commit_transaction(30)

    committed = read_values(b.bootstrap, topic_name, 2, "read_committed", expect=14)
    assert sorted(committed) == sorted([b"c1-%d" % i for i in range(10)]
                                       + [b"c2-%d" % i for i in range(4)])
    everything = read_values(b.bootstrap, topic_name, 2, "read_uncommitted", expect=20)
    assert len(everything) == 20 and {b"ab-%d" % i for i in range(6)} <= set(everything)
    # control batches take offsets but never reach the application:
    # 10 + 6 + 4 records + 3 markers per partition
    assert end_offset(b.bootstrap, topic_name, 0, False) == 10 + 3
    assert end_offset(b.bootstrap, topic_name, 0, True) == 10 + 3


KILLED_PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[3],
                  "transaction.timeout.ms": 600000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(sys.argv[2], value=b"zombie-%d" % i, partition=0)
    p.flush(30)
    print("SENT", flush=True)
    time.sleep(600)
""")


def test_producer_killed_mid_txn_is_fenced_and_its_txn_aborted(broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    child = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, b.bootstrap, topic_name,
                              "tx-zombie"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "SENT"
        # the open transaction pins the LSO at its first offset
        assert end_offset(b.bootstrap, topic_name, 0, True) == 0
        assert end_offset(b.bootstrap, topic_name, 0, False) == 5
    finally:
        child.kill()
        child.wait(10)
    p = txn_producer(b.bootstrap, "tx-zombie")  # fences and aborts the old epoch
    p.begin_transaction()
    p.produce(topic_name, value=b"fresh", partition=0)
    p.commit_transaction(30)
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", expect=1) == [b"fresh"]
    assert len(read_values(b.bootstrap, topic_name, 1, "read_uncommitted", expect=6)) == 6


def test_live_zombie_gets_fenced_when_a_new_instance_starts(broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    old = txn_producer(b.bootstrap, "tx-live")
    old.begin_transaction()
    old.produce(topic_name, value=b"old", partition=0)
    old.flush(30)
    new = txn_producer(b.bootstrap, "tx-live")
    with pytest.raises(KafkaException) as e:
        old.produce(topic_name, value=b"old-2", partition=0)
        old.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    new.begin_transaction()
    new.produce(topic_name, value=b"new", partition=0)
    new.commit_transaction(30)
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", expect=1) == [b"new"]


def test_open_txn_blocks_read_committed_until_it_times_out(broker_factory, topic_name):
    b = broker_factory({**TXN_BROKER,
                        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    create_topic(b.bootstrap, topic_name, 1)
    plain = ck_producer(b.bootstrap)
    plain.produce(topic_name, value=b"before", partition=0)
    plain.flush(30)
    hanging = txn_producer(b.bootstrap, "tx-hanging",
                           **{"transaction.timeout.ms": 4000, "socket.timeout.ms": 3000})
    hanging.begin_transaction()
    hanging.produce(topic_name, value=b"open", partition=0)
    hanging.flush(30)
    plain.produce(topic_name, value=b"after", partition=0)
    plain.flush(30)
    started = time.monotonic()
    assert end_offset(b.bootstrap, topic_name, 0, True) == 1  # the txn's first offset
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", idle_s=1.0) == [b"before"]
    wait_until(lambda: end_offset(b.bootstrap, topic_name, 0, True) == 4, 30,
               desc="LSO after the timed-out txn is aborted")
    assert time.monotonic() - started > 1.5
    assert read_values(b.bootstrap, topic_name, 1, "read_committed", expect=2) == [
        b"before", b"after"]


def test_offsets_sent_to_a_txn_commit_with_it_and_vanish_with_an_abort(
        broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    group = f"g-{topic_name}"
    c = Consumer({**ck_common(b.bootstrap), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic_name])
    c.poll(1.0)
    p = txn_producer(b.bootstrap, "tx-offsets")

    def committed() -> int:
        return c.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset

    p.begin_transaction()
    p.produce(topic_name, value=b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 42)],
                                  c.consumer_group_metadata(), 30)
    p.abort_transaction(30)
    assert committed() < 0
    p.begin_transaction()
    p.produce(topic_name, value=b"y", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 7)],
                                  c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    assert committed() == 7
    c.close()
    # the committed offset survives a restart (replayed from __consumer_offsets,
    # the aborted one stays aborted)
    b.restart()
    c2 = Consumer({**ck_common(b.bootstrap), "group.id": group})
    assert c2.committed([TopicPartition(topic_name, 0)], timeout=20)[0].offset == 7
    c2.close()


def test_dump_log_shows_control_batches_and_transactional_flags(broker_factory, topic_name):
    b = broker_factory(TXN_BROKER)
    create_topic(b.bootstrap, topic_name, 1)
    p = txn_producer(b.bootstrap, "tx-dump")
    p.begin_transaction()
    p.produce(topic_name, value=b"v", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, value=b"w", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    seg = b.data_dir / f"{topic_name}-0" / "00000000000000000000.log"
    out = subprocess.run([sys.executable, "-m", "odradek", "dump-log", "--files", str(seg),
                          "--print-data-log"], check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("isTransactional: true") == 4, text
    assert text.count("isControl: true") == 2, text
    assert "endTxnMarker: COMMIT" in text and "endTxnMarker: ABORT" in text, text
    txnindex = seg.with_suffix(".txnindex")
    assert txnindex.stat().st_size == 34  # one aborted transaction, Kafka's entry size
