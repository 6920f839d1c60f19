"""Coordinator answers wait for the ISR: Kafka's acks=all for the coordinators' own writes.

Theory of operation. The group and transaction coordinators change their
in-memory state and append the records that say so to their partition of
`__consumer_offsets` / `__transaction_state` in one event-loop turn, so the
state of a loaded partition is always the replay of its log up to the log
end offset. The one rule here: *a coordinator answers a request only once the
partition's high watermark has reached the log end offset the partition had
when the answer was made*. The records the answer rests on (its own, and any
earlier ones it read, such as another member's commit) are then on every
in-sync replica, so a new leader elected from the ISR has them: an
acknowledged OffsetCommit, group or transaction state can no longer be lost
by a crash of the coordinator's broker. It is what Kafka's coordinator
runtime does (a write answers when the high watermark passes its records; an
operation that writes nothing waits for the highest pending offset), and, for
offsets, what the old coordinator's cache-after-append gave: an OffsetFetch
never shows an offset the ISR does not have.

Reads (`write=False`: OffsetFetch) also need the broker's leadership lease
(broker/lifecycle.py): a broker whose last unfenced heartbeat was sent more
than `broker.session.timeout.ms` ago may have been fenced and replaced as
leader without knowing it (a SIGSTOP, a cut from the controller), so with
other replicas in the ISR it answers NOT_COORDINATOR instead of offsets that
may be older than what the new coordinator has acknowledged. Beyond Kafka,
whose coordinator serves such reads.

With the leader alone in the ISR (one node, RF=1) the high watermark moves
in the append itself (replication/leader_replication.py), so `wait_replicated` returns
without awaiting: no added latency.

Writes also honour the partition's `min.insync.replicas` as Kafka's
`offsets.commit.required.acks=-1` did: `min_isr_error` is asked *before* the
core changes anything (a refused write must leave no trace in memory), and
an ISR that shrank below it during the wait gives
NOT_ENOUGH_REPLICAS_AFTER_APPEND. Timeouts: `offsets.commit.timeout.ms` for
the group coordinator, `request.timeout.ms` for the transaction coordinator
and markers (Kafka's TransactionStateManager and WriteTxnMarkers).

Append errors become the coordinator's answers through Kafka's tables
(`OFFSET_COMMIT_ERRORS`, `GROUP_ERRORS`, `TXN_ERRORS`).
"""

from __future__ import annotations

import time
from typing import Any

from . import errors as E
from .host import PartitionHost

# Append errors (the protocol guide's numbers).
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_FETCH_SIZE = 4
KAFKA_STORAGE_ERROR = 56

# What every table below shares: the partition is gone or short of replicas
# (retriable where it is), or no longer led here.
_SHARED: dict[int, int] = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
}

# OffsetCommit and TxnOffsetCommit: Kafka's GroupMetadataManager.storeOffsets
# (a timeout stays REQUEST_TIMED_OUT; Kafka 4's coordinator runtime answers
# COORDINATOR_NOT_AVAILABLE for it instead; clients handle both alike).
OFFSET_COMMIT_ERRORS: dict[int, int] = {
    **_SHARED,
    MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
}

# Group state (JoinGroup, SyncGroup, LeaveGroup, ConsumerGroupHeartbeat, deletes)
# and OffsetFetch: Kafka's appendGroupMetadataErrorToResponseError.
GROUP_ERRORS: dict[int, int] = {
    **_SHARED,
    REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}

# Transaction state: Kafka's TransactionStateManager.appendTransactionToLog
# ("for timed out request we return NOT_AVAILABLE error code to let client retry").
TXN_ERRORS: dict[int, int] = {
    **_SHARED,
    REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def mapped(table: dict[int, int], append_error: int) -> int:
    """The coordinator's answer for an append error (NONE stays NONE)."""
    return table.get(append_error, append_error)


def min_isr_error(part: Any) -> int:
    """NOT_ENOUGH_REPLICAS when the ISR is below the partition's min.insync.replicas:
    asked before a write, as acks=all produce does."""
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if len(part.isr) < part.log.config.min_insync_replicas:
        return NOT_ENOUGH_REPLICAS
    return E.NONE


def _lease_ok(broker: PartitionHost) -> bool:
    check = getattr(broker, "leadership_lease_ok", None)  # brokers have it; test hosts not
    return True if check is None else bool(check())


async def wait_replicated(broker: PartitionHost, part: Any, timeout_ms: int, *, write: bool) -> int:
    """NONE once `part`'s high watermark reaches its log end offset as it is now,
    else the append error: NOT_LEADER_OR_FOLLOWER (leadership went),
    REQUEST_TIMED_OUT, or (`write` only) NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    replication = getattr(broker, "replication", None)
    required = part.log.log_end_offset
    if replication is None:  # no replication at all (unit tests' brokers)
        return E.NONE
    if part.leader != broker.node_id:
        return NOT_LEADER_OR_FOLLOWER
    if not write and len(part.isr) > 1 and not _lease_ok(broker):
        # a read on a broker that may have been fenced without knowing it (paused,
        # or cut off from the controller past its session): another replica may
        # lead and have taken newer commits, so this state may be stale. The client
        # asks FindCoordinator again (NOT_COORDINATOR). Kafka serves such reads;
        # the chaos run saw a committed offset read back lower from such a zombie.
        return NOT_LEADER_OR_FOLLOWER
    epoch = part.leader_epoch
    if part.log.high_watermark >= required:
        code = E.NONE  # the leader alone in the ISR: no await
        if write and len(part.isr) < part.log.config.min_insync_replicas:
            code = NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return code
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    code = await replication.wait_for_high_watermark(part, required, deadline)
    if code == NOT_ENOUGH_REPLICAS_AFTER_APPEND and not write:
        code = E.NONE
    if code == E.NONE and part.leader_epoch != epoch:
        # Led again under a new epoch: the offsets waited for may be other records.
        code = NOT_LEADER_OR_FOLLOWER
    return code
