"""The transaction coordinator core and the __transaction_state record formats."""

from __future__ import annotations

import itertools
import struct

from odradek.coordinator.core import partition_for
from odradek.coordinator.transaction import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    TRANSACTION_ABORTABLE,
    TransactionCoordinator,
    TxnConfig,
    TxnOut,
)
from odradek.coordinator.transaction_log import (
    TxnLogValue,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def _core(**kw):
    core = TransactionCoordinator(TxnConfig(num_partitions=3, **kw))
    core.loaded = {0, 1, 2}
    ids = itertools.count(1000)
    return core, lambda: next(ids)


def _replay(out: TxnOut):
    return [(decode_key(k), None if v is None else decode_value(v)) for _, k, v in out.records]


def test_key_and_value_bytes_follow_kafkas_v0_layout():
    key = encode_key("tx")
    assert key == struct.pack(">hh", 0, 2) + b"tx"
    v = TxnLogValue(7, 3, 60000, TxnState.ONGOING, (("t", (0, 1)),), 10, 5)
    raw = encode_value(v)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 1) + struct.pack(">i", 1)
                + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">qq", 10, 5))
    assert raw == expected
    assert decode_value(raw) == v


def test_partition_is_abs_java_hashcode_mod_partitions():
    # "hello".hashCode() == 99162322 in Java
    assert partition_for("hello", 50) == 99162322 % 50


def test_timeout_above_max_is_invalid():
    core, ids = _core(max_timeout_ms=1000)
    assert core.init_producer_id("a", 2000, -1, -1, 0, ids, TxnOut())[0] == (
        INVALID_TRANSACTION_TIMEOUT)


def test_commit_flow_writes_prepare_then_complete():
    core, ids = _core()
    out = TxnOut()
    code, pid, epoch = core.init_producer_id("a", 1000, -1, -1, 0, ids, out)
    assert (code, epoch) == (0, 0)
    assert core.add_partitions("a", pid, epoch, [("t", 0), ("t", 1)], 1, out) == 0
    assert core.verify_partition("a", pid, epoch, ("t", 1)) == 0
    assert core.verify_partition("a", pid, epoch, ("t", 2)) == TRANSACTION_ABORTABLE
    assert core.end_txn("a", pid, epoch, True, 2, out) == 0
    assert [s.state for _, s in _replay(out)] == [
        TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT]
    (job,) = out.jobs
    assert job.commit and job.partitions == (("t", 0), ("t", 1))
    core.complete(job, 3, out)
    assert core.txns["a"].state == TxnState.COMPLETE_COMMIT
    assert core.end_txn("a", pid, epoch, True, 4, TxnOut()) == 0  # a retried commit
    assert core.end_txn("a", pid, epoch, False, 4, TxnOut()) == INVALID_TXN_STATE


def test_new_instance_fences_the_open_transaction():
    core, ids = _core()
    out = TxnOut()
    _, pid, epoch = core.init_producer_id("a", 1000, -1, -1, 0, ids, out)
    core.add_partitions("a", pid, epoch, [("t", 0)], 1, out)
    out = TxnOut()
    code, *_ = core.init_producer_id("a", 1000, -1, -1, 2, ids, out)
    assert code == CONCURRENT_TRANSACTIONS
    (job,) = out.jobs
    assert not job.commit and job.producer_epoch == epoch + 1
    core.complete(job, 3, out)
    code, pid2, epoch2 = core.init_producer_id("a", 1000, -1, -1, 4, ids, TxnOut())
    assert (code, pid2, epoch2) == (0, pid, epoch + 2)
    assert core.add_partitions("a", pid, epoch, [("t", 0)], 5, TxnOut()) == PRODUCER_FENCED
    assert core.end_txn("a", pid + 1, epoch2, True, 5, TxnOut()) == INVALID_PRODUCER_ID_MAPPING


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    core, ids = _core()
    out = TxnOut()
    _, pid, epoch = core.init_producer_id("a", 1000, -1, -1, 0, ids, out)
    core.add_partitions("a", pid, epoch, [("t", 0)], 100, out)
    assert core.abort_timed_out(1000, ids, TxnOut()) == []
    out = TxnOut()
    assert core.abort_timed_out(1101, ids, out) == ["a"]
    assert out.jobs[0].producer_epoch == epoch + 1 and not out.jobs[0].commit


def test_load_finishes_a_prepared_commit_and_drops_tombstones():
    core, ids = _core()
    out = TxnOut()
    _, pid, epoch = core.init_producer_id("a", 1000, -1, -1, 0, ids, out)
    core.add_partitions("a", pid, epoch, [("t", 0)], 1, out)
    core.end_txn("a", pid, epoch, True, 2, out)
    core.init_producer_id("b", 1000, -1, -1, 0, ids, out)
    core.expire_transactional_ids(10**12, TxnOut())  # in memory only; not replayed
    records = _replay(out) + [("b", None)]
    fresh = TransactionCoordinator(TxnConfig(num_partitions=3))
    loaded = TxnOut()
    fresh.load(partition_for("a", 3), iter(records), loaded)
    assert "b" not in fresh.txns
    assert fresh.txns["a"].state == TxnState.PREPARE_COMMIT
    assert loaded.jobs and loaded.jobs[0].commit


def test_expired_transactional_id_gets_a_tombstone():
    core, ids = _core(transactional_id_expiration_ms=100)
    core.init_producer_id("a", 1000, -1, -1, 0, ids, TxnOut())
    out = TxnOut()
    assert core.expire_transactional_ids(100, out) == ["a"]
    assert out.records[0][2] is None and "a" not in core.txns


def test_list_filters_by_state_and_pattern():
    core, ids = _core()
    out = TxnOut()
    _, pid, e = core.init_producer_id("app-1", 1000, -1, -1, 0, ids, out)
    core.init_producer_id("other", 1000, -1, -1, 0, ids, out)
    core.add_partitions("app-1", pid, e, [("t", 0)], 0, out)
    assert [t.transactional_id for t in core.list({"Ongoing"}, set(), -1, None, 1)] == ["app-1"]
    assert [t.transactional_id for t in core.list(set(), set(), -1, "app-.*", 1)] == ["app-1"]
    assert [t.transactional_id for t in core.list(set(), set(), 50, None, 10)] == []
