"""A broker killed between PrepareCommit and the markers completes the commit.

The broker runs with ``ODRADEK_TEST_CRASH_AFTER_PREPARE=1`` (see
coordinator/transaction_service.py): it SIGKILLs itself right after the
PrepareCommit record is in `__transaction_state`, before any marker. Restarted
without the hook, the coordinator loads the record and finishes the commit.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException

from odradek.coordinator.transaction_service import CRASH_AFTER_PREPARE_ENV
from tests.integration.clients import create_topic
from tests.integration.txn_helpers import TXN_BROKER, end_offset, read_values, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def test_kill9_between_prepare_commit_and_markers_completes_after_restart(
        broker_factory, topic_name):
    b = broker_factory(TXN_BROKER, start=False)
    b.env = {CRASH_AFTER_PREPARE_ENV: "1"}
    b.start()
    create_topic(b.bootstrap, topic_name, 2)
    p = txn_producer(b.bootstrap, "tx-crash", **{"socket.timeout.ms": 5000,
                                                "transaction.timeout.ms": 60000})
    p.begin_transaction()
    for i in range(8):
        p.produce(topic_name, value=b"r%d" % i, partition=i % 2)
    p.flush(30)
    with pytest.raises(KafkaException):
        p.commit_transaction(5)
    assert b.proc is not None
    assert b.proc.wait(30) == -9, "the broker did not kill itself after PrepareCommit"
    # the records are in the log, but no marker: nothing is stable yet
    b.env = None
    b.restart()
    values = read_values(b.bootstrap, topic_name, 2, "read_committed", expect=8, timeout_s=30)
    assert sorted(values) == sorted(b"r%d" % i for i in range(8))
    assert end_offset(b.bootstrap, topic_name, 0, True) == 5  # 4 records + the COMMIT marker
    # the client's retried commit is answered with success (CompleteCommit)
    try:
        p.commit_transaction(30)
    except KafkaException as e:  # librdkafka may have given up on the txn; the data is in
        assert not e.args[0].txn_requires_abort(), e
