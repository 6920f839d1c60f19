"""Producer state (idempotence, open transactions, snapshots) and the .txnindex."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.protocol.records import Record, build_batch, build_control_batch, iter_batch_headers
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import (
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    Duplicate,
    ProducerStateError,
    ProducerStateManager,
)
from odradek.storage.txn_index import ENTRY_BYTES, AbortedTxn, TransactionIndex


def _batch(pid: int, epoch: int, seq: int, n: int = 1, txn: bool = False) -> bytearray:
    return bytearray(build_batch(
        [Record(offset=-1, timestamp=1_700_000_000_000, value=b"v%d" % i) for i in range(n)],
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn))


def _append(plog: PartitionLog, buf: bytearray):
    headers = list(iter_batch_headers(buf))
    info = plog.append_as_leader(buf, headers, 0)
    plog.high_watermark = plog.log_end_offset  # one replica: the HW follows the LEO
    return info


def _check(plog: PartitionLog, buf: bytearray):
    return plog.producer_state.check(next(iter_batch_headers(buf)))


def _open(tmp_path: Path, **kw) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(**kw), None)


def test_duplicate_batch_answers_original_offsets_and_gap_is_out_of_order(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(7, 0, 0, 3))
    _append(plog, _batch(7, 0, 3, 2))
    dup = _check(plog, _batch(7, 0, 0, 3))
    assert dup == Duplicate(0, 2)
    assert _check(plog, _batch(7, 0, 3, 2)) == Duplicate(3, 4)
    assert _check(plog, _batch(7, 0, 5, 1)) is None
    with pytest.raises(ProducerStateError) as e:
        _check(plog, _batch(7, 0, 9, 1))
    assert e.value.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_only_the_last_five_batches_are_remembered(tmp_path):
    plog = _open(tmp_path)
    for i in range(7):
        _append(plog, _batch(1, 0, i))
    assert _check(plog, _batch(1, 0, 2)) == Duplicate(2, 2)
    with pytest.raises(ProducerStateError) as e:
        _check(plog, _batch(1, 0, 1))  # evicted: no longer known as a duplicate
    assert e.value.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER


def test_old_epoch_is_fenced_and_new_epoch_must_start_at_zero(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(1, 3, 0))
    with pytest.raises(ProducerStateError) as e:
        _check(plog, _batch(1, 2, 1))
    assert e.value.error_code == INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as e:
        _check(plog, _batch(1, 4, 5))
    assert e.value.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert _check(plog, _batch(1, 4, 0)) is None


def test_unknown_producer_may_start_at_any_sequence(tmp_path):
    plog = _open(tmp_path)
    assert _check(plog, _batch(42, 0, 17)) is None


def test_open_transaction_holds_the_lso_and_abort_goes_to_txnindex(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(1, 0, 0, 2))                      # 0-1 plain idempotent
    _append(plog, _batch(2, 0, 0, 3, txn=True))            # 2-4 txn of producer 2
    assert plog.last_stable_offset == 2
    with pytest.raises(ProducerStateError) as e:
        _check(plog, _batch(2, 0, 3, 1, txn=False))
    assert e.value.error_code == INVALID_TXN_STATE
    _append(plog, bytearray(build_control_batch("ABORT", 2, 0, 5)))  # marker at 5
    assert plog.last_stable_offset == plog.log_end_offset == 6
    aborted = plog.collect_aborted_txns(0, 6)
    assert aborted == [AbortedTxn(2, 2, 5, 6)]
    seg = plog.active_segment
    raw = seg.txn_index.path.read_bytes()
    assert len(raw) == ENTRY_BYTES
    assert struct.unpack(">hqqqq", raw) == (0, 2, 2, 5, 6)


def test_snapshot_on_roll_and_close_restores_state(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(5, 1, 0, 4))
    _append(plog, _batch(6, 0, 0, 1, txn=True))
    plog.roll()
    snaps = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snaps == ["00000000000000000005.snapshot"]
    _append(plog, _batch(5, 1, 4, 1))
    plog.close()
    assert (tmp_path / "t-0" / "00000000000000000006.snapshot").exists()
    again = _open(tmp_path)
    assert again.producer_state.producers[5].last_seq == 4
    assert again.last_stable_offset == 4  # producer 6's transaction is still open
    assert _check(again, _batch(5, 1, 4, 1)) == Duplicate(5, 5)


def test_unclean_recovery_replays_the_log_after_the_last_snapshot(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(5, 0, 0, 2))
    plog.roll()  # snapshot at 2
    _append(plog, _batch(5, 0, 2, 3))
    _append(plog, _batch(9, 0, 0, 1, txn=True))
    _append(plog, bytearray(build_control_batch("ABORT", 9, 0, 0)))
    plog.active_segment.txn_index.delete()  # lost with the crash
    for seg in plog.segments:
        seg.close_files()
    again = PartitionLog.open(tmp_path / "t-0", "t", 0, LogConfig(), None,
                              recovery_point=0, had_clean_shutdown=False)
    ps = again.producer_state
    assert ps.producers[5].last_seq == 4
    assert ps.producers[9].current_txn_first_offset == -1
    assert again.collect_aborted_txns(0, again.log_end_offset) == [AbortedTxn(9, 5, 6, 7)]


def test_corrupt_snapshot_is_ignored(tmp_path):
    ps = ProducerStateManager(tmp_path)
    ps.producers.clear()
    path = ps.take_snapshot(10)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF if len(data) > 10 else 0
    path.write_bytes(bytes(data[:-1]) + b"x")
    assert ProducerStateManager(tmp_path).load_snapshot(100) is None


def test_expired_producers_are_forgotten(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(5, 0, 0))
    ps = plog.producer_state
    assert ps.expire(1_700_000_000_000 + 10, 1000) == 0
    assert ps.expire(1_700_000_000_000 + 1000, 1000) == 1
    assert 5 not in ps.producers


def test_txn_index_append_is_idempotent_and_truncates(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert idx.append(AbortedTxn(1, 0, 5, 6))
    assert not idx.append(AbortedTxn(1, 0, 5, 6))
    assert idx.append(AbortedTxn(2, 7, 9, 10))
    assert TransactionIndex(idx.path).entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 7, 9, 10)]
    assert idx.collect(6, 100) == [AbortedTxn(2, 7, 9, 10)]
    idx.truncate_to(8)
    assert TransactionIndex(idx.path).entries == [AbortedTxn(1, 0, 5, 6)]


def test_aborted_txn_whose_marker_is_in_a_later_segment_is_found(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(3, 0, 0, 2, txn=True))   # 0-1, open
    plog.roll()
    _append(plog, _batch(4, 0, 0, 1))             # 2, plain idempotent
    assert plog.last_stable_offset == 0
    _append(plog, bytearray(build_control_batch("ABORT", 3, 0, 0)))  # 3, in segment 2
    assert plog.last_stable_offset == 4
    assert plog.collect_aborted_txns(0, 2) == [AbortedTxn(3, 0, 3, 4)]
    assert plog.collect_aborted_txns(2, 3) == [AbortedTxn(3, 0, 3, 4)]  # overlaps [2, 3)
    assert plog.collect_aborted_txns(4, 5) == []


def test_truncation_rebuilds_producer_state_and_txnindex(tmp_path):
    plog = _open(tmp_path)
    _append(plog, _batch(3, 0, 0, 2, txn=True))                       # 0-1
    _append(plog, bytearray(build_control_batch("ABORT", 3, 0, 0)))  # 2
    _append(plog, _batch(3, 0, 2, 1, txn=True))                       # 3, a new txn
    assert plog.last_stable_offset == 3
    plog.truncate_to(2)  # the marker and the second txn go
    assert plog.log_end_offset == 2
    assert plog.producer_state.producers[3].current_txn_first_offset == 0
    assert plog.collect_aborted_txns(0, 2) == []
    assert plog.last_stable_offset == 0


def test_snapshot_bytes_follow_kafkas_producer_snapshot_v1(tmp_path):
    from crc32c import crc32c

    plog = _open(tmp_path)
    _append(plog, _batch(9, 2, 0, 3, txn=True))  # offsets 0-2, seq 0-2, open txn at 0
    path = plog.producer_state.take_snapshot(3)
    data = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    assert (version, count) == (1, 1) and crc == crc32c(data[6:])
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    #        pid epoch lastSeq lastOffset offsetDelta timestamp coordEpoch txnFirstOffset
    assert entry == (9, 2, 2, 2, 2, 1_700_000_000_000, -1, 0)
    assert len(data) == 10 + 46


def test_kip890_verification_token_is_voided_by_a_marker_in_flight(tmp_path):
    plog = _open(tmp_path)
    state = plog.producer_state
    first = next(iter_batch_headers(_batch(2, 0, 0, 1, txn=True)))
    assert state.starts_transaction(first)  # unknown producer: it would open one
    token = state.start_verification(2)
    assert state.end_verification(2, token)
    assert not state.end_verification(2, token)  # used once
    _append(plog, _batch(2, 0, 0, 1, txn=True))
    assert not state.starts_transaction(next(iter_batch_headers(_batch(2, 0, 1, 1, txn=True))))
    assert state.starts_transaction(next(iter_batch_headers(_batch(2, 1, 0, 1, txn=True))))
    # A verification in flight when the marker lands is void: the transaction ended.
    token = state.start_verification(2)
    _append(plog, bytearray(build_control_batch("COMMIT", 2, 0, 1)))
    assert not state.end_verification(2, token)
    assert state.starts_transaction(next(iter_batch_headers(_batch(2, 0, 1, 1, txn=True))))
