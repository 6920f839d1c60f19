"""Writing a transaction marker (a COMMIT or ABORT control batch) to a partition.

Used by the transaction coordinator for the partitions it leads and by the
WriteTxnMarkers handler. The marker's producer epoch must not be older than
the partition's (INVALID_PRODUCER_EPOCH). On a `__consumer_offsets` partition
the marker also commits or drops the producer's pending transactional offsets
(coordinator/txn_offsets.py).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ..protocol import records as batches
from ..storage.producer_state import ProducerStateError
from . import errors as E
from .core import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ..broker.broker import Broker

log = logging.getLogger(__name__)

NOT_LEADER_OR_FOLLOWER = 6
KAFKA_STORAGE_ERROR = 56


def advance_high_watermark(broker: Broker, part: Any) -> None:
    """After an append by the coordinator: the high watermark moves as for a
    produce (broker/replication.py when the broker replicates, else to the log
    end offset), and parked fetches are woken."""
    replication = getattr(broker, "replication", None)
    if replication is not None:
        replication.on_leader_append(part)
    else:
        part.log.high_watermark = part.log.log_end_offset
    broker.replica_manager.purgatory.notify((part.topic, part.partition))


def write_marker(broker: Broker, topic: str, partition: int, producer_id: int,
                 producer_epoch: int, commit: bool, coordinator_epoch: int) -> int:
    """Append the marker; returns a Kafka error code."""
    rm = broker.replica_manager
    part = rm.get(topic, partition)
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if part.leader != broker.node_id:
        return NOT_LEADER_OR_FOLLOWER
    plog = part.log
    try:
        plog.producer_state.check_marker(producer_id, producer_epoch)
    except ProducerStateError as e:
        log.warning("%s-%d: marker refused: %s", topic, partition, e.message)
        return e.error_code
    batch = bytearray(batches.build_control_batch(
        "COMMIT" if commit else "ABORT", producer_id, producer_epoch, coordinator_epoch,
        timestamp_ms=int(time.time() * 1000)))
    headers = list(batches.iter_batch_headers(batch))
    try:
        plog.append_as_leader(batch, headers, part.leader_epoch)
    except OSError as e:
        log.error("marker append to %s-%d failed: %s", topic, partition, e)
        return KAFKA_STORAGE_ERROR
    advance_high_watermark(broker, part)
    if topic == OFFSETS_TOPIC:
        service = getattr(broker, "group_coordinator", None)
        if service is not None:
            service.core.txn_offsets.complete(producer_id, commit, service.core)
    return E.NONE
