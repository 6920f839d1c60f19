"""What the cleaner knows about transactions and producers in a log.

Theory of operation
-------------------
A cleaning first walks the batch headers of the whole log (every segment,
the active one up to its size when the task was made) and records, per
producer id:

* its transaction markers (offset and type, from the control batches — the
  only batches decoded in this pass), so a transactional batch is known to be
  aborted when the first marker of its producer after it is an ABORT;
* the last offset of its last data batch (and of its last control batch), so
  the batch holding a producer's last sequence is kept, emptied if need be,
  as Kafka keeps it (``BatchRetention.RETAIN_EMPTY``): a producer whose last
  batch vanished would see an out-of-sequence error on its next send.

This takes the aborted transactions from the markers in the log itself rather
than from the segments' ``.txnindex`` (storage/txn_index.py): the two agree,
and the markers also give COMMITs. Kafka takes a producer's last batch from
its producer state, which forgets producers after
``producer.id.expiration.ms``; here a producer's last batch is kept as long as
it is its last (an empty batch is 61 bytes).

While the segments are recopied, ``CleanedTransactions`` follows Kafka's
``CleanedTransactionMetadata``: a marker may go once no batch of its
transaction was met in this cleaning (its data is gone) and the delete
horizon of the marker's batch has passed.

Bound: one marker entry (9 bytes in arrays) per transaction in the log and
one entry per producer id.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

from odradek.protocol.records import BatchHeader, ControlRecordType


@dataclass(slots=True)
class _ProducerFacts:
    marker_offsets: array = field(default_factory=lambda: array("q"))
    marker_is_abort: bytearray = field(default_factory=bytearray)
    last_data_offset: int = -1
    last_control_offset: int = -1


class LogTransactions:
    """Per producer: markers and last batches, from a pass over the log's headers."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerFacts] = {}

    def _facts(self, producer_id: int) -> _ProducerFacts:
        facts = self._producers.get(producer_id)
        if facts is None:
            facts = self._producers[producer_id] = _ProducerFacts()
        return facts

    def add_batch(self, header: BatchHeader, marker: ControlRecordType | None) -> None:
        """Called for every batch in log order; ``marker`` for control batches."""
        if header.producer_id < 0:
            return
        facts = self._facts(header.producer_id)
        if header.is_control:
            facts.last_control_offset = header.last_offset
            if marker is not None:
                facts.marker_offsets.append(header.base_offset)
                facts.marker_is_abort.append(1 if marker == ControlRecordType.ABORT else 0)
        else:
            facts.last_data_offset = header.last_offset

    def is_aborted(self, header: BatchHeader) -> bool:
        """A transactional data batch whose transaction ended with ABORT."""
        if not header.is_transactional or header.is_control:
            return False
        facts = self._producers.get(header.producer_id)
        if facts is None:
            return False
        i = bisect_right(facts.marker_offsets, header.last_offset)
        return i < len(facts.marker_offsets) and facts.marker_is_abort[i] == 1

    def is_last_batch_of_producer(self, header: BatchHeader) -> bool:
        facts = self._producers.get(header.producer_id)
        if facts is None or header.producer_id < 0:
            return False
        if facts.last_data_offset >= 0:
            return not header.is_control and header.last_offset == facts.last_data_offset
        return header.is_control and header.last_offset == facts.last_control_offset

    @property
    def producer_count(self) -> int:
        return len(self._producers)


class CleanedTransactions:
    """Kafka's ``CleanedTransactionMetadata``, for one cleaning (all groups)."""

    def __init__(self, log_txns: LogTransactions) -> None:
        self.log_txns = log_txns
        self._aborted_with_data: set[int] = set()  # producer ids
        self._committed_with_data: set[int] = set()

    def on_data_batch(self, header: BatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (its records go)."""
        if not header.is_transactional:
            return False
        if self.log_txns.is_aborted(header):
            self._aborted_with_data.add(header.producer_id)
            return True
        self._committed_with_data.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader, marker: ControlRecordType | None) -> bool:
        """True when the marker governs no data met in this cleaning (it may go
        once its delete horizon has passed)."""
        producer_id = header.producer_id
        if marker == ControlRecordType.ABORT:
            if producer_id in self._aborted_with_data:
                self._aborted_with_data.discard(producer_id)
                return False
            return True
        if marker == ControlRecordType.COMMIT:
            if producer_id in self._committed_with_data:
                self._committed_with_data.discard(producer_id)
                return False
            return True
        return False
