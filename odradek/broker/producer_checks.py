"""Checks on a produce batch that carries a producer id, before it is appended.

* The partition's producer state (storage/producer_state.py): a duplicate is
  answered with its original offsets, an old epoch, a sequence gap or a
  non-transactional write inside an open transaction is an error.
* KIP-890 part 1: a transactional batch must go to a partition the producer
  added to its transaction with AddPartitionsToTxn. The coordinator of the
  transactional id is asked directly when it lives on this broker; otherwise
  `txn_verification.py` asked the coordinator's broker before the appends
  and its answer comes in as ``verified``. A partition not in the ongoing
  transaction of that producer id and epoch gets TRANSACTION_ABORTABLE (the
  produce handler answers INVALID_TXN_STATE to versions below 11).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol import errors as E
from ..protocol.records import BatchHeader
from ..storage.log import PartitionLog
from ..storage.producer_state import Duplicate, ProducerStateError

if TYPE_CHECKING:
    from ..coordinator.transaction_service import TransactionCoordinatorService
    from ..coordinator.txn_verification import Verified


@dataclass(frozen=True, slots=True)
class Verdict:
    error: tuple[int, str | None] | None = None
    first_offset: int = -1  # for a duplicate


def check_producer_batch(
    txn_coordinator: TransactionCoordinatorService | None,
    plog: PartitionLog,
    header: BatchHeader,
    transactional_id: str | None,
    topic: str,
    partition: int,
    verified: Verified | None = None,
) -> Verdict | None:
    try:
        found = plog.producer_state.check(header)
    except ProducerStateError as e:
        return Verdict((e.error_code, e.message))
    if isinstance(found, Duplicate):
        return Verdict(None, found.first_offset)
    if verified is not None:
        if verified.error_code != E.NONE:
            why = None
            if verified.error_code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):
                why = (f"Partition {topic}-{partition} is not in the ongoing transaction "
                       f"of {transactional_id!r}")
            return Verdict((verified.error_code, why))
        if not plog.producer_state.end_verification(header.producer_id, verified.token):
            return Verdict((E.INVALID_TXN_STATE, (
                f"The transaction of {transactional_id!r} ended while partition "
                f"{topic}-{partition} was being verified")))
        return None
    if header.is_transactional and transactional_id is not None:
        coordinator = txn_coordinator
        if coordinator is not None:
            code = coordinator.verify_partition(
                transactional_id, header.producer_id, header.producer_epoch, topic, partition
            )
            if code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):
                why = (f"Partition {topic}-{partition} is not in the ongoing transaction "
                       f"of {transactional_id!r}")
                return Verdict((code, why))
            if code != E.NONE:
                return Verdict((code, None))
    return None
