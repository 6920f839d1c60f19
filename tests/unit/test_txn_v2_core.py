"""Transactions v2 (KIP-890 part 2) in the coordinator core: the epoch bump at
every end of a transaction, retries, the exhausted epoch's new producer id, and
the TransactionLogValue v1 record that carries it across a coordinator move."""

from __future__ import annotations

import itertools

from odradek.coordinator.core import partition_for
from odradek.coordinator.transaction import (
    CONCURRENT_TRANSACTIONS,
    INVALID_TXN_STATE,
    MAX_EPOCH,
    PRODUCER_FENCED,
    TransactionCoordinator,
    TxnConfig,
    TxnOut,
)
from odradek.coordinator.transaction_log import TxnLogValue, TxnState, decode_value, encode_value


def _core():
    core = TransactionCoordinator(TxnConfig(num_partitions=3))
    core.loaded = {0, 1, 2}
    ids = itertools.count(1000)
    return core, lambda: next(ids)


def _end(core, ids, pid, epoch, commit, out=None):
    return core.end_txn("a", pid, epoch, commit, 0, out if out is not None else TxnOut(),
                        bump=True, new_producer_id=ids)


def _finish(core, out):
    for job in out.jobs:
        core.complete(job, 1, TxnOut())


def test_every_end_bumps_the_epoch_and_the_markers_carry_it():
    core, ids = _core()
    _, pid, epoch = core.init_producer_id("a", 1000, -1, -1, 0, ids, TxnOut())
    core.add_partitions("a", pid, epoch, [("t", 0)], 1, TxnOut())
    out = TxnOut()
    assert _end(core, ids, pid, epoch, True, out) == 0
    (job,) = out.jobs
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, epoch + 1, True)
    assert _end(core, ids, pid, epoch, True) == CONCURRENT_TRANSACTIONS  # markers pending
    _finish(core, out)
    txn = core.txns["a"]
    assert (txn.state, txn.producer_id, txn.producer_epoch) == (
        TxnState.COMPLETE_COMMIT, pid, epoch + 1)
    assert _end(core, ids, pid, epoch, True) == 0  # a retry: the answer was lost
    assert _end(core, ids, pid, epoch, False) == INVALID_TXN_STATE
    assert _end(core, ids, pid, epoch - 1, True) == PRODUCER_FENCED
    assert core.add_partitions("a", pid, epoch, [("t", 0)], 2, TxnOut()) == PRODUCER_FENCED
    # an abort with nothing open still bumps the epoch (no partition, no marker)
    out = TxnOut()
    assert _end(core, ids, pid, epoch + 1, False, out) == 0
    assert out.jobs[0].partitions == () and out.jobs[0].producer_epoch == epoch + 2
    _finish(core, out)
    assert core.txns["a"].producer_epoch == epoch + 2
    assert _end(core, ids, pid, epoch + 2, True) == INVALID_TXN_STATE  # nothing to commit


def test_an_exhausted_epoch_hands_over_a_new_producer_id_when_the_txn_completes():
    core, ids = _core()
    _, pid, _ = core.init_producer_id("a", 1000, -1, -1, 0, ids, TxnOut())
    core.txns["a"].producer_epoch = MAX_EPOCH - 1
    core.add_partitions("a", pid, MAX_EPOCH - 1, [("t", 0)], 1, TxnOut())
    out = TxnOut()
    assert _end(core, ids, pid, MAX_EPOCH - 1, True, out) == 0
    (job,) = out.jobs
    assert (job.producer_id, job.producer_epoch) == (pid, MAX_EPOCH)  # the markers' epoch
    # the Prepare record carries the next id: a coordinator that loads it hands it over
    prepared = decode_value(out.records[-1][2])
    assert prepared.next_producer_id > pid and prepared.client_version == 2
    fresh = TransactionCoordinator(TxnConfig(num_partitions=3))
    loaded = TxnOut()
    fresh.load(partition_for("a", 3), iter([("a", prepared)]), loaded)
    fresh.complete(loaded.jobs[0], 2, TxnOut())
    for c in (core, fresh):
        c.complete(job, 2, TxnOut())
        txn = c.txns["a"]
        assert (txn.producer_id, txn.producer_epoch, txn.previous_producer_id) == (
            prepared.next_producer_id, 0, pid)
    # a retry with the old id and epoch is answered as done
    assert _end(core, ids, pid, MAX_EPOCH - 1, True) == 0


def test_log_value_v1_round_trips_and_v0_stays_v0():
    v0 = TxnLogValue(5, 3, 60000, TxnState.ONGOING, (("t", (0, 1)),), 10, 9)
    assert encode_value(v0)[:2] == b"\x00\x00" and decode_value(encode_value(v0)) == v0
    v1 = TxnLogValue(5, 3, 60000, TxnState.PREPARE_COMMIT, (("t", (0, 1)), ("u", (2,))),
                     10, 9, 4, 77, 2)
    assert encode_value(v1)[:2] == b"\x00\x01" and decode_value(encode_value(v1)) == v1
    empty = TxnLogValue(5, 0, 60000, TxnState.EMPTY, (), 10, -1, 4, -1, 2)
    assert decode_value(encode_value(empty)) == empty
