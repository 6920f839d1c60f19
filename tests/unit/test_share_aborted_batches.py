"""`aborted_batches`: which batches a read_committed share partition archives."""

from __future__ import annotations

from types import SimpleNamespace

from odradek.broker.handlers.share_groups import aborted_batches


def _h(pos: int, base: int, last: int, pid: int, txn: bool = True,
       control: bool = False) -> SimpleNamespace:
    return SimpleNamespace(position=pos, base_offset=base, last_offset=last,
                           producer_id=pid, is_transactional=txn, is_control=control)


def _t(pid: int, first: int) -> SimpleNamespace:
    return SimpleNamespace(producer_id=pid, first_offset=first)


def test_interleaved_producers_only_the_aborted_one_is_skipped() -> None:
    headers = [
        _h(0, 0, 4, pid=1),               # txn of 1, committed later
        _h(100, 5, 9, pid=2),             # txn of 2, aborted
        _h(200, 10, 10, pid=-1, txn=False),  # not transactional
        _h(300, 11, 11, pid=1, control=True),  # commit marker of 1
        _h(400, 12, 14, pid=2),           # still 2's aborted txn
        _h(500, 15, 15, pid=2, control=True),  # abort marker of 2
        _h(600, 16, 20, pid=2),           # 2's next txn: not aborted
    ]
    assert aborted_batches(headers, [_t(2, 5)]) == {100, 400}


def test_a_transaction_begun_before_the_read_is_still_skipped() -> None:
    headers = [_h(0, 50, 59, pid=7), _h(90, 60, 60, pid=7, control=True)]
    assert aborted_batches(headers, [_t(7, 10)]) == {0}


def test_no_aborted_transactions_skips_nothing() -> None:
    assert aborted_batches([_h(0, 0, 9, pid=3)], []) == frozenset()


def test_an_aborted_transaction_starting_later_does_not_reach_back() -> None:
    headers = [_h(0, 0, 9, pid=4), _h(80, 10, 10, pid=4, control=True),
               _h(160, 11, 19, pid=4)]
    assert aborted_batches(headers, [_t(4, 11)]) == {160}
