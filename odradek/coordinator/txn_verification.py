"""KIP-890 part 1 across brokers: a partition leader asks the transaction
coordinator before it lets a transactional batch open a transaction.

A transactional batch that would open a transaction on a partition (its
producer has none open there: `ProducerStateManager.starts_transaction`) must
go to a partition the producer added with AddPartitionsToTxn; otherwise a
late or stray write would leave a transaction that no marker ever closes (a
hanging transaction). When this broker is the coordinator of the
transactional id, `producer_checks.py` asks it directly. Otherwise, before
the appends of a Produce request, `TxnVerifier.verify` asks the coordinator's
broker with AddPartitionsToTxn v5 and `verify_only=true`, one call for all
such partitions of the request, and hands each partition a `Verified`:

* an error: TRANSACTION_ABORTABLE (the partition is not in the transaction),
  INVALID_TXN_STATE or INVALID_PRODUCER_EPOCH as the coordinator said (PRODUCER_FENCED, which no Produce version carries, as
  INVALID_PRODUCER_EPOCH: Kafka's AddPartitionsToTxnManager); coordinator conditions a producer cannot act on in a
  Produce answer (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, or no answer within
  `VERIFY_TIMEOUT_S`) become NOT_ENOUGH_REPLICAS, which every client retries,
  as Kafka maps them;
* or a verification token from the partition's producer state. A marker for
  the producer applied while the call was in flight voids it (the transaction
  it verified has ended), and the batch is then refused with
  INVALID_TXN_STATE instead of opening a new, unverified transaction.

Transactions v2 (KIP-890 part 2): a Produce v12+ request on a cluster at
transaction.version 2 adds such partitions to the transaction instead of
verifying them (the producer sends no AddPartitionsToTxn): this node's
coordinator adds them itself (`add_here`), a remote one is sent
AddPartitionsToTxn v4 with ``verify_only=false``. Errors are mapped as above.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol import api
from ..protocol import errors as E
from ..protocol.records import InvalidRecords, parse_batch_header
from ..replication.node import ReplicaHost
from ..replication.peers import PeerChannels, by_topic
from ..storage.log import PartitionLog
from .transaction import TransactionCoordinator

log = logging.getLogger(__name__)

# AddPartitionsToTxn v4 brought verify_only; v5 may answer TRANSACTION_ABORTABLE
VERIFY_VERSION = 5
VERIFY_TIMEOUT_S = 5.0
TRANSACTION_STATE_TOPIC = "__transaction_state"
_RETRIABLE = frozenset(
    {
        E.NOT_COORDINATOR,
        E.COORDINATOR_NOT_AVAILABLE,
        E.COORDINATOR_LOAD_IN_PROGRESS,
        E.CONCURRENT_TRANSACTIONS,
    }
)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Verified:
    error_code: int
    token: object | None = None  # from the producer state when error_code is NONE


class VerifierHost(ReplicaHost, Protocol):
    """What the produce path's transaction verification reads of its node."""

AddHere = Callable[[str, int, int, list[TopicPartition]], Awaitable[int]]


class TxnVerifier:
    def __init__(self, broker: VerifierHost, core: TransactionCoordinator,
                 add_here: AddHere) -> None:
        self.broker = broker
        self.core = core  # this node's transaction coordinator
        # adds partitions to a transaction this node coordinates, written and
        # replicated (TransactionCoordinatorService.add_partitions)
        self._add_here = add_here
        self._peers = PeerChannels(broker, b"odradek-txn-verification")

    def close(self) -> None:
        self._peers.close()

    async def verify(self, req: Any, add: bool = False) -> dict[TopicPartition, Verified]:
        """Verification of every partition of Produce request ``req`` that needs
        one asked of a remote coordinator; {} when none does. With ``add``
        (Produce v12+ on a cluster at transaction.version 2, KIP-890 part 2)
        each such partition is added to the transaction instead, by this
        node's coordinator or the remote one."""
        tid = req.transactional_id
        if not tid:
            return {}
        core = self.core
        local = core.coordinator_error(tid) == E.NONE
        if local and not add:
            return {}  # this broker is the coordinator: producer_checks asks it
        rm = self.broker.replica_manager
        node_id = self.broker.node_id
        groups: dict[tuple[int, int], dict[TopicPartition, PartitionLog]] = {}
        for topic in req.topic_data:
            for pd in topic.partition_data:
                part = rm.partitions.get((topic.name, pd.index))
                if part is None or part.leader != node_id or part.log.offline or not pd.records:
                    continue  # answered with its error by the produce handler
                try:
                    h = parse_batch_header(pd.records)
                except InvalidRecords:
                    continue
                if h.producer_id < 0 or not h.is_transactional or h.is_control:
                    continue
                if part.log.producer_state.starts_transaction(h):
                    key = (h.producer_id, h.producer_epoch)
                    groups.setdefault(key, {})[(topic.name, pd.index)] = part.log
        verified: dict[TopicPartition, Verified] = {}
        for (producer_id, epoch), logs in groups.items():
            tokens = {
                tp: plog.producer_state.start_verification(producer_id) for tp, plog in logs.items()
            }
            if add:
                codes = await self.add(tid, producer_id, epoch, list(logs))
            else:
                codes = await self._ask(tid, producer_id, epoch, list(logs),
                                        core.partition_for(tid))
            for tp, token in tokens.items():
                code = codes.get(tp, E.COORDINATOR_NOT_AVAILABLE)
                if code in _RETRIABLE:
                    code = E.NOT_ENOUGH_REPLICAS
                elif code == E.PRODUCER_FENCED:
                    code = E.INVALID_PRODUCER_EPOCH
                if code != E.NONE:
                    logs[tp].producer_state.end_verification(producer_id, token)
                verified[tp] = Verified(code, token if code == E.NONE else None)
        return verified

    async def add(self, tid: str, producer_id: int, epoch: int,
                  partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Add ``partitions`` to the producer's transaction (transactions v2's
        implicit add): here when this node coordinates ``tid``, else with
        AddPartitionsToTxn v4 (``verify_only=false``) to its coordinator. The
        coordinator's error per partition, unmapped."""
        if self.core.coordinator_error(tid) == E.NONE:
            return dict.fromkeys(partitions, await self._add_here(tid, producer_id, epoch,
                                                                  partitions))
        return await self._ask(tid, producer_id, epoch, partitions,
                               self.core.partition_for(tid), verify_only=False)

    async def _ask(
        self,
        tid: str,
        producer_id: int,
        epoch: int,
        partitions: list[TopicPartition],
        state_partition: int,
        verify_only: bool = True,
    ) -> dict[TopicPartition, int]:
        failed = dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE)
        node = self._peers.leader_of(TRANSACTION_STATE_TOPIC, state_partition)
        if node is None:
            return failed
        if node == self.broker.node_id:  # ours, but not loaded yet
            return dict.fromkeys(partitions, E.COORDINATOR_LOAD_IN_PROGRESS)
        resp = await self._peers.request(
            node,
            api.ApiKey.ADD_PARTITIONS_TO_TXN,
            VERIFY_VERSION,
            {
                "transactions": [
                    {
                        "transactional_id": tid,
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "verify_only": verify_only,
                        "topics": [
                            {"name": t, "partitions": ps} for t, ps in by_topic(partitions).items()
                        ],
                    }
                ]
            },
            VERIFY_TIMEOUT_S,
            f"transaction verification of {tid!r}",
        )
        if resp is None:
            return failed
        top = int(resp.error_code.value)
        if top != E.NONE:
            return dict.fromkeys(partitions, top)
        codes: dict[TopicPartition, int] = {}
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    codes[(t.name, p.partition_index)] = int(p.partition_error_code.value)
        return {tp: codes.get(tp, E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
