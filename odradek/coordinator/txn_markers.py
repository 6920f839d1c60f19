"""Writing a transaction marker (a COMMIT or ABORT control batch) to a partition.

Used by the transaction coordinator for the partitions it leads and by the
WriteTxnMarkers handler. The marker's producer epoch must not be older than
the partition's (INVALID_PRODUCER_EPOCH; WriteTxnMarkers v2 with transaction
version 2: not the same either, as Kafka 4's leaders check it). Markers are appended as Kafka's
WriteTxnMarkers does, with acks=-1: refused below the partition's
min.insync.replicas (NOT_ENOUGH_REPLICAS), and `write_markers` answers once
the ISR has them (coordinator/replicated.py). On a `__consumer_offsets` partition
the marker also commits or drops the producer's pending transactional offsets
(coordinator/txn_offsets.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from ..protocol import api
from ..protocol import records as batches
from ..replication.node import ClusterView
from ..replication.peers import PeerChannels, by_topic
from ..storage.producer_state import ProducerStateError
from . import errors as E
from .core import OFFSETS_TOPIC
from .host import PartitionHost
from .replicated import min_isr_error, wait_replicated

log = logging.getLogger(__name__)

NOT_LEADER_OR_FOLLOWER = 6
KAFKA_STORAGE_ERROR = 56


def advance_high_watermark(broker: PartitionHost, part: Any) -> None:
    """After an append by the coordinator: the high watermark moves as for a
    produce (replication/leader_replication.py when the broker replicates, else to the log
    end offset), and parked fetches are woken."""
    replication = getattr(broker, "replication", None)
    if replication is not None:
        replication.on_leader_append(part)
    else:
        part.log.high_watermark = part.log.log_end_offset
    broker.replica_manager.purgatory.notify((part.topic, part.partition))


def write_marker(broker: PartitionHost, topic: str, partition: int, producer_id: int,
                 producer_epoch: int, commit: bool, coordinator_epoch: int,
                 transaction_version: int = 0) -> int:
    """Append the marker; returns a Kafka error code. `transaction_version`
    (WriteTxnMarkers v2) >= 2: the marker's epoch must be above the producer's."""
    rm = broker.replica_manager
    part = rm.get(topic, partition)
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if part.leader != broker.node_id:
        return NOT_LEADER_OR_FOLLOWER
    refused = min_isr_error(part)
    if refused != E.NONE:
        return refused
    plog = part.log
    try:
        plog.producer_state.check_marker(producer_id, producer_epoch, transaction_version)
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


async def write_markers(broker: PartitionHost, partitions: Iterable[tuple[str, int]], producer_id: int,
                        producer_epoch: int, commit: bool, coordinator_epoch: int,
                        timeout_ms: int, transaction_version: int = 0
                        ) -> dict[tuple[str, int], int]:
    """Append the marker to each partition, then wait until the ISR has each;
    an error code per partition."""
    codes = {
        (topic, p): write_marker(broker, topic, p, producer_id, producer_epoch, commit,
                                 coordinator_epoch, transaction_version)
        for topic, p in partitions
    }
    deadline = time.monotonic() + timeout_ms / 1000
    for (topic, p), code in codes.items():
        if code == E.NONE:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            codes[(topic, p)] = await wait_replicated(
                broker, broker.replica_manager.get(topic, p), remaining_ms, write=True)
    return codes


WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 10.0
COORDINATOR_NOT_AVAILABLE = 15


class RemoteMarkers:
    """WriteTxnMarkers to the leaders of partitions this broker does not lead."""

    def __init__(self, broker: ClusterView) -> None:
        self._peers = PeerChannels(broker, b"odradek-txn-markers")

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self._peers.leader_of(topic, partition)

    async def send(self, node_id: int, partitions: list[tuple[str, int]], producer_id: int,
                   producer_epoch: int, commit: bool, coordinator_epoch: int
                   ) -> dict[tuple[str, int], int]:
        """An error code per partition (COORDINATOR_NOT_AVAILABLE if unreachable)."""
        resp = await self._peers.request(node_id, api.ApiKey.WRITE_TXN_MARKERS,
                                         WRITE_TXN_MARKERS_VERSION, {
            "markers": [{
                "producer_id": producer_id, "producer_epoch": producer_epoch,
                "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": t, "partition_indexes": ps}
                           for t, ps in by_topic(partitions).items()],
            }]}, MARKER_TIMEOUT_S, "WriteTxnMarkers")
        if resp is None:
            return dict.fromkeys(partitions, COORDINATOR_NOT_AVAILABLE)
        codes: dict[tuple[str, int], int] = {}
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    codes[(t.name, p.partition_index)] = p.error_code.value
        return {tp: codes.get(tp, COORDINATOR_NOT_AVAILABLE) for tp in partitions}

    def close(self) -> None:
        self._peers.close()
