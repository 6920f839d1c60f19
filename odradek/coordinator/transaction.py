"""The transaction coordinator core: transactional ids as a state machine.

Theory of operation
-------------------
Each transactional id hashes to a partition of `__transaction_state`
(``abs(java hashCode) % transaction.state.log.num.partitions``); the
coordinator of that partition keeps the id's producer id and epoch, its
timeout, its state and the partitions of its open transaction, and writes
every change as a TransactionLogValue record (coordinator/transaction_log.py)
before answering. This core does no I/O: calls take time and inputs and
return a `TxnOut` with the records to append and the marker jobs to run; the
shell (transaction_service.py) does the writing.

States, as in Kafka::

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit --markers--> CompleteCommit
                                     \\--EndTxn/timeout/fence--> PrepareAbort --markers--> CompleteAbort
    Complete*/Empty --AddPartitions--> Ongoing;   expired id --> Dead (tombstone)

A new InitProducerId for an id with an open transaction fences the old
producer: the epoch is bumped, the transaction aborted with the bumped epoch
(the markers reject the old epoch on every partition), and the new producer
gets the epoch after that. A transaction older than its timeout is aborted
the same way. PrepareCommit/PrepareAbort found on load are finished (markers,
then Complete), so a coordinator that stopped between the two phases still
completes the outcome it logged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from . import errors as E
from .state import partition_for
from .transaction_log import TxnLogValue, TxnState, encode_key, encode_value

TRANSACTION_STATE_TOPIC = "__transaction_state"
MAX_EPOCH = 32767  # Short.MAX_VALUE; an epoch at MAX_EPOCH - 1 cannot be bumped
MAX_TRANSACTIONAL_IDS = 100_000  # per broker; a new id beyond it is refused
MAX_PARTITIONS_PER_TXN = 100_000

INVALID_TXN_STATE = 48
TRANSACTION_ABORTABLE = 120
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
INVALID_PRODUCER_EPOCH = 47

TopicPartition = tuple[str, int]
PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@lru_cache(maxsize=4096)
def _partition_for(transactional_id: str, num_partitions: int) -> int:
    """Cached: the produce path asks for it once per transactional batch."""
    return partition_for(transactional_id, num_partitions)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    # transactions v2 (KIP-890 part 2): the id before the last rotation, the id
    # the producer gets when the transaction in Prepare* completes (its epoch
    # was exhausted), and the client's transaction version (2 once an EndTxn v5
    # ended a transaction of this id)
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_version: int = 0

    def to_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(p)
        return TxnLogValue(
            self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
            tuple((t, tuple(ps)) for t, ps in by_topic.items()),
            self.last_update_ms, self.start_ms,
            self.previous_producer_id, self.next_producer_id, self.client_version,
        )

    @classmethod
    def from_value(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(
            transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
            {(t, p) for t, ps in v.partitions for p in ps}, v.last_update_ms, v.start_ms,
            v.previous_producer_id, v.next_producer_id, v.client_version,
        )


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write COMMIT/ABORT markers for a transaction, then call `complete`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(slots=True)
class TxnOut:
    records: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)
    jobs: list[MarkerJob] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.loaded: set[int] = set()
        self.txns: dict[str, TxnMetadata] = {}

    # -- ownership and records --------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        return _partition_for(transactional_id, self.config.num_partitions)

    def coordinator_error(self, transactional_id: str) -> int:
        return E.NONE if self.partition_for(transactional_id) in self.loaded else E.NOT_COORDINATOR

    def _write(self, txn: TxnMetadata, out: TxnOut) -> None:
        out.records.append((
            self.partition_for(txn.transactional_id),
            encode_key(txn.transactional_id),
            encode_value(txn.to_value()),
        ))

    def load(self, partition: int, values: Iterable[tuple[str, TxnLogValue | None]],
             out: TxnOut) -> int:
        """Replay a partition's records; queues marker jobs for Prepare* states."""
        latest: dict[str, TxnLogValue | None] = {}
        count = 0
        for tid, value in values:
            latest[tid] = value
            count += 1
        for tid, value in latest.items():
            if value is None or value.state == TxnState.DEAD:
                self.txns.pop(tid, None)
                continue
            txn = TxnMetadata.from_value(tid, value)
            if txn.state == TxnState.PREPARE_EPOCH_FENCE:
                txn.state = TxnState.PREPARE_ABORT
            self.txns[tid] = txn
            if txn.state in PREPARE:
                out.jobs.append(self._job(txn))
        self.loaded.add(partition)
        return count

    def unload(self, partition: int) -> None:
        self.loaded.discard(partition)
        for tid in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[tid]

    @staticmethod
    def _job(txn: TxnMetadata) -> MarkerJob:
        return MarkerJob(
            txn.transactional_id, txn.producer_id, txn.producer_epoch,
            txn.state == TxnState.PREPARE_COMMIT, tuple(sorted(txn.partitions)),
        )

    # -- InitProducerId ------------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
        new_producer_id: Callable[[], int],
        out: TxnOut,
    ) -> tuple[int, int, int]:
        """(error, producer id, epoch). With an open transaction the answer is
        CONCURRENT_TRANSACTIONS plus a job that fences and aborts it; the shell
        runs the job and asks again."""
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return INVALID_TRANSACTION_TIMEOUT, -1, -1
        code = self.coordinator_error(transactional_id)
        if code != E.NONE:
            return code, -1, -1
        txn = self.txns.get(transactional_id)
        if txn is None:
            if len(self.txns) >= MAX_TRANSACTIONAL_IDS:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            txn = TxnMetadata(transactional_id, new_producer_id(), 0, timeout_ms, TxnState.EMPTY,
                              last_update_ms=now_ms)
            self.txns[transactional_id] = txn
            self._write(txn, out)
            return E.NONE, txn.producer_id, txn.producer_epoch
        if txn.state in PREPARE:
            return CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0 and (
            producer_id != txn.producer_id or producer_epoch != txn.producer_epoch
        ):
            return PRODUCER_FENCED, -1, -1
        if txn.state == TxnState.ONGOING:
            self._fence_and_abort(txn, now_ms, new_producer_id, out)
            return CONCURRENT_TRANSACTIONS, -1, -1
        self._bump_epoch(txn, new_producer_id)
        txn.timeout_ms = timeout_ms
        txn.state = TxnState.EMPTY
        txn.partitions = set()
        txn.start_ms = -1
        txn.last_update_ms = now_ms
        self._write(txn, out)
        return E.NONE, txn.producer_id, txn.producer_epoch

    @staticmethod
    def _bump_epoch(txn: TxnMetadata, new_producer_id: Callable[[], int]) -> None:
        if txn.producer_epoch >= MAX_EPOCH - 1:
            txn.producer_id = new_producer_id()
            txn.producer_epoch = 0
        else:
            txn.producer_epoch += 1

    def _fence_and_abort(self, txn: TxnMetadata, now_ms: int,
                         new_producer_id: Callable[[], int], out: TxnOut) -> None:
        """Bump the epoch (the old producer is fenced) and abort with it."""
        if txn.producer_epoch < MAX_EPOCH - 1:
            txn.producer_epoch += 1
        txn.state = TxnState.PREPARE_ABORT
        txn.last_update_ms = now_ms
        self._write(txn, out)
        out.jobs.append(self._job(txn))

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int
                        ) -> tuple[int, TxnMetadata | None]:
        code = self.coordinator_error(transactional_id)
        if code != E.NONE:
            return code, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if epoch != txn.producer_epoch:
            return PRODUCER_FENCED, None
        return E.NONE, txn

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[TopicPartition], now_ms: int, out: TxnOut) -> int:
        code, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        if txn.state in PREPARE or txn.state == TxnState.PREPARE_EPOCH_FENCE:
            return CONCURRENT_TRANSACTIONS
        new = set(partitions) - txn.partitions if txn.state == TxnState.ONGOING else set(
            partitions)
        if not new:
            return E.NONE
        if txn.state != TxnState.ONGOING:
            txn.partitions = set()
            txn.start_ms = now_ms
        if len(txn.partitions) + len(new) > MAX_PARTITIONS_PER_TXN:
            return E.INVALID_REQUEST
        txn.partitions |= new
        txn.state = TxnState.ONGOING
        txn.last_update_ms = now_ms
        self._write(txn, out)
        return E.NONE

    def verify_partition(self, transactional_id: str, producer_id: int, epoch: int,
                         tp: TopicPartition) -> int:
        """KIP-890 part 1: is ``tp`` in the ongoing transaction of this producer?

        A partition the producer did not add (or a transaction that has ended:
        Empty, CompleteCommit, CompleteAbort) is TRANSACTION_ABORTABLE, as Kafka's
        coordinator answers since 3.8: the producer may abort and carry on. Answers
        of versions that cannot carry it say INVALID_TXN_STATE (`broker/apis.py`)."""
        if self.partition_for(transactional_id) not in self.loaded:
            return E.NONE  # another broker's id: not verified here
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return INVALID_TXN_STATE
        if epoch < txn.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return INVALID_TXN_STATE
        if txn.state != TxnState.ONGOING or tp not in txn.partitions:
            return TRANSACTION_ABORTABLE
        return E.NONE

    # -- EndTxn -----------------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                now_ms: int, out: TxnOut, *, bump: bool = False,
                new_producer_id: Callable[[], int] | None = None) -> int:
        """EndTxn. With ``bump`` (EndTxn v5 on a cluster at transaction.version
        2) the transactions v2 rules apply (`_end_txn_v2`)."""
        if bump:
            assert new_producer_id is not None
            return self._end_txn_v2(transactional_id, producer_id, epoch, commit, now_ms,
                                    new_producer_id, out)
        code, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return code
        state = txn.state
        if state == TxnState.ONGOING:
            txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            txn.last_update_ms = now_ms
            self._write(txn, out)
            out.jobs.append(self._job(txn))
            return E.NONE
        if state == TxnState.COMPLETE_COMMIT:
            return E.NONE if commit else INVALID_TXN_STATE
        if state == TxnState.COMPLETE_ABORT:
            return E.NONE if not commit else INVALID_TXN_STATE
        if state == TxnState.PREPARE_COMMIT:
            return CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE
        if state == TxnState.PREPARE_ABORT:
            return CONCURRENT_TRANSACTIONS if not commit else INVALID_TXN_STATE
        return INVALID_TXN_STATE

    def _end_txn_v2(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                    now_ms: int, new_producer_id: Callable[[], int], out: TxnOut) -> int:
        """Transactions v2 (KIP-890 part 2): every end of a transaction bumps the
        producer epoch, in the Prepare record, so the markers carry the new epoch
        and fence the old one on every partition; the producer learns the new
        epoch from the EndTxn v5 answer. An epoch that cannot be bumped again
        (MAX_EPOCH - 1) is bumped to MAX_EPOCH for the markers and a new
        producer id, epoch 0, takes over when the transaction completes.

        A retried EndTxn (the answer was lost) carries the epoch before the
        bump: it is answered NONE once the outcome it asked for is complete.
        An abort with no open transaction bumps the epoch too (no markers)."""
        code = self.coordinator_error(transactional_id)
        if code != E.NONE:
            return code
        txn = self.txns.get(transactional_id)
        if txn is None:
            return INVALID_PRODUCER_ID_MAPPING
        retry_on_bump = txn.producer_id == producer_id and txn.producer_epoch == epoch + 1
        retry_on_overflow = (txn.previous_producer_id == producer_id
                             and epoch == MAX_EPOCH - 1 and txn.producer_epoch == 0)
        if txn.producer_id != producer_id and not retry_on_overflow:
            return INVALID_PRODUCER_ID_MAPPING
        state = txn.state
        if state in PREPARE:
            valid = retry_on_bump
        elif state in COMPLETE:
            valid = retry_on_bump or retry_on_overflow or epoch == txn.producer_epoch
        else:
            valid = epoch == txn.producer_epoch
        if not valid:
            return PRODUCER_FENCED
        retry = retry_on_bump or retry_on_overflow
        if state == TxnState.ONGOING:
            self._prepare_v2(txn, commit, now_ms, new_producer_id, out)
            return E.NONE
        if state == TxnState.COMPLETE_COMMIT:
            if commit:
                return E.NONE if retry else INVALID_TXN_STATE
            if retry:
                return INVALID_TXN_STATE
        elif state == TxnState.COMPLETE_ABORT:
            if not commit and retry:
                return E.NONE
            if commit:
                return INVALID_TXN_STATE
        elif state in PREPARE:
            wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return CONCURRENT_TRANSACTIONS if state == wanted else INVALID_TXN_STATE
        elif state != TxnState.EMPTY or commit:
            return INVALID_TXN_STATE
        # an abort with nothing open (Empty, Complete*): bump the epoch, no markers
        txn.partitions = set()
        self._prepare_v2(txn, False, now_ms, new_producer_id, out)
        return E.NONE

    def _prepare_v2(self, txn: TxnMetadata, commit: bool, now_ms: int,
                    new_producer_id: Callable[[], int], out: TxnOut) -> None:
        if txn.producer_epoch >= MAX_EPOCH - 1:
            txn.next_producer_id = new_producer_id()
        txn.producer_epoch += 1
        txn.client_version = 2
        txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        txn.last_update_ms = now_ms
        self._write(txn, out)
        out.jobs.append(self._job(txn))

    def complete(self, job: MarkerJob, now_ms: int, out: TxnOut) -> None:
        """The markers of ``job`` are written: Prepare* -> Complete* (and, after
        an exhausted epoch in transactions v2, the next producer id, epoch 0)."""
        txn = self.txns.get(job.transactional_id)
        if txn is None or txn.state not in PREPARE or txn.producer_id != job.producer_id:
            return
        txn.state = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        if txn.next_producer_id >= 0:
            txn.previous_producer_id = txn.producer_id
            txn.producer_id = txn.next_producer_id
            txn.producer_epoch = 0
            txn.next_producer_id = -1
        txn.partitions = set()
        txn.last_update_ms = now_ms
        self._write(txn, out)

    # -- time ---------------------------------------------------------------------------------------
    def abort_timed_out(self, now_ms: int, new_producer_id: Callable[[], int],
                        out: TxnOut) -> list[str]:
        """Fence and abort every ongoing transaction older than its timeout."""
        timed_out = [
            t for t in self.txns.values()
            if t.state == TxnState.ONGOING and t.start_ms >= 0
            and now_ms - t.start_ms > t.timeout_ms
        ]
        for txn in timed_out:
            self._fence_and_abort(txn, now_ms, new_producer_id, out)
        return [t.transactional_id for t in timed_out]

    def unfinished_jobs(self) -> list[MarkerJob]:
        """Marker jobs of transactions still in Prepare* (a marker write failed)."""
        return [self._job(t) for t in self.txns.values() if t.state in PREPARE]

    def expire_transactional_ids(self, now_ms: int, out: TxnOut) -> list[str]:
        """Ids idle (Empty/Complete*) for transactional.id.expiration.ms: tombstoned."""
        limit = self.config.transactional_id_expiration_ms
        gone = [
            t for t in self.txns.values()
            if (t.state == TxnState.EMPTY or t.state in COMPLETE)
            and now_ms - t.last_update_ms >= limit
        ]
        for txn in gone:
            txn.state = TxnState.DEAD
            del self.txns[txn.transactional_id]
            out.records.append(
                (self.partition_for(txn.transactional_id), encode_key(txn.transactional_id), None)
            )
        return [t.transactional_id for t in gone]

    # -- admin -----------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        code = self.coordinator_error(transactional_id)
        if code != E.NONE:
            return code, None
        txn = self.txns.get(transactional_id)
        if txn is None:
            return 105, None  # TRANSACTIONAL_ID_NOT_FOUND
        return E.NONE, txn

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int,
             pattern: str | None, now_ms: int) -> list[TxnMetadata]:
        regex = re.compile(pattern) if pattern else None
        out = []
        for txn in self.txns.values():
            if states and txn.state.kafka_name not in states:
                continue
            if producer_ids and txn.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                txn.state != TxnState.ONGOING or now_ms - txn.start_ms < min_duration_ms
            ):
                continue
            if regex is not None and not regex.fullmatch(txn.transactional_id):
                continue
            out.append(txn)
        return sorted(out, key=lambda t: t.transactional_id)
