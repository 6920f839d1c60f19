"""Per-partition producer state: idempotence, open transactions, the LSO.

Theory of operation
-------------------
For every producer id that wrote to the partition the state keeps its epoch,
the sequence/offset ranges of its last ``MAX_BATCHES_PER_PRODUCER`` (5)
batches, the epoch of the coordinator that wrote its last marker, and the
first offset of its open transaction. Only batch headers are read (producer
id, epoch, base sequence, last offset delta, attributes); a control batch's one
record is decoded to learn COMMIT or ABORT.

* ``check`` runs before a client's batch is appended (Kafka's
  ``ProducerAppendInfo`` rules): an older epoch is INVALID_PRODUCER_EPOCH; a
  batch equal to one of the last five of the same epoch is a ``Duplicate``
  (answered with its original offsets, not written); a sequence that does not
  follow the last one is OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch must start
  at sequence 0; a non-transactional batch while the producer has an open
  transaction is INVALID_TXN_STATE. A producer the partition does not know
  (new, or expired) may start at any sequence (KIP-360).
* ``on_batch`` runs for every appended batch with a producer id, whatever
  wrote it (client, coordinator, replay on recovery); it returns the
  transaction a marker completes.
* The first offset of the oldest open transaction bounds the last stable
  offset (``first_unstable_offset``).

Snapshot file format (Kafka's ``ProducerSnapshot`` v1)
------------------------------------------------------
``<offset:020d>.snapshot`` holds the state as of ``offset`` (every batch below
it applied). Big-endian::

    version int16 = 1
    crc uint32          CRC32C of every byte after this field
    count int32
    count x 46 bytes:   producerId int64, epoch int16, lastSequence int32,
                        lastOffset int64, offsetDelta int32 (last - first
                        sequence of the last batch), timestamp int64,
                        coordinatorEpoch int32, currentTxnFirstOffset int64
                        (-1: no open transaction)

Snapshots are written at every segment roll (at the new segment's base) and
on clean shutdown (at the log end offset). On open the newest snapshot at or
below the log end offset is loaded and the log replayed from there; after a
clean shutdown with no snapshot at all nothing is replayed (Kafka's rule).
At most ``MAX_SNAPSHOTS`` files are kept.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from odradek.protocol.records import BatchHeader

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
MAX_BATCHES_PER_PRODUCER = 5
MAX_SNAPSHOTS = 5
INT32_MAX = 2**31 - 1

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48

_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _ENTRY.size == 46

MARKER_ABORT = 0
MARKER_COMMIT = 1


class ProducerStateError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class CorruptSnapshot(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A batch already in the log: answer with these offsets, write nothing."""

    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


def _last_seq(header: BatchHeader) -> int:
    seq = header.base_sequence + header.last_offset_delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """One partition's producer table; see the module docstring."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.producers: dict[int, ProducerEntry] = {}
        # first offset of each open transaction -> producer id
        self.ongoing: dict[int, int] = {}
        self._first_unstable: int | None = None
        # KIP-890: producer id -> the token of a verification in flight (see
        # start_verification); a marker for the producer voids it.
        self._verifications: dict[int, object] = {}

    # -- the produce path ---------------------------------------------------------------
    def check(self, h: BatchHeader) -> Duplicate | None:
        """Validate a client's batch; raises ProducerStateError, returns a Duplicate."""
        entry = self.producers.get(h.producer_id)
        if entry is None or entry.epoch < 0:
            return None
        epoch = h.producer_epoch
        if epoch < entry.epoch:
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {h.producer_id} at offset {h.base_offset} is {epoch}, "
                f"which is smaller than the last seen epoch {entry.epoch}",
            )
        first_seq = h.base_sequence
        if epoch == entry.epoch:
            last_seq = _last_seq(h)
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return Duplicate(b.first_offset, b.last_offset)
            current = entry.last_seq
            if (current == -1 and first_seq != 0) or (
                current != -1 and not _in_sequence(current, first_seq)
            ):
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Out of order sequence number for producer {h.producer_id}: "
                    f"{first_seq} (incoming seq. number), {current} (current end sequence number)",
                )
        elif first_seq != 0:
            raise ProducerStateError(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Invalid sequence number for new epoch of producer {h.producer_id}: "
                f"{epoch} (request epoch), {first_seq} (seq. number), {entry.epoch} "
                f"(current producer epoch)",
            )
        if not h.is_transactional and entry.current_txn_first_offset >= 0:
            raise ProducerStateError(
                INVALID_TXN_STATE,
                f"Expected transactional write from producer {h.producer_id} at offset "
                f"{h.base_offset} in partition {self.dir.name}",
            )
        return None

    # -- KIP-890 verification ------------------------------------------------------------
    def starts_transaction(self, h: BatchHeader) -> bool:
        """True if transactional batch ``h`` would open a transaction here: the
        producer has none open on this partition (or a newer epoch starts one)."""
        entry = self.producers.get(h.producer_id)
        return entry is None or entry.current_txn_first_offset < 0 or h.producer_epoch > entry.epoch

    def start_verification(self, producer_id: int) -> object:
        """A token that stays valid until a marker for ``producer_id`` is applied:
        a batch verified with the coordinator is appended only if no marker
        ended the transaction while the verification was in flight."""
        token = object()
        self._verifications[producer_id] = token
        return token

    def end_verification(self, producer_id: int, token: object) -> bool:
        """True if ``token`` is still valid; forgets it either way."""
        if self._verifications.get(producer_id) is token:
            del self._verifications[producer_id]
            return True
        return False

    def check_marker(self, producer_id: int, epoch: int, transaction_version: int = 0) -> None:
        """A marker's epoch against the producer's: older is INVALID_PRODUCER_EPOCH;
        with transaction_version >= 2 (WriteTxnMarkers v2, KIP-890 part 2: the
        coordinator bumped the epoch at the transaction's end) the same epoch is too."""
        entry = self.producers.get(producer_id)
        strict = transaction_version >= 2
        if entry is not None and (epoch <= entry.epoch if strict else epoch < entry.epoch):
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"Producer {producer_id}'s epoch in the marker is {epoch}, "
                f"{'not above' if strict else 'smaller than'} the last seen epoch "
                f"{entry.epoch} (transaction version {transaction_version})",
            )

    def on_batch(
        self, h: BatchHeader, marker: tuple[int, int] | None = None
    ) -> CompletedTxn | None:
        """Apply an appended batch (offsets assigned). ``marker`` is (type,
        coordinator epoch) for a control batch."""
        pid = h.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid)
        if h.producer_epoch > entry.epoch:
            entry.batches.clear()
        entry.epoch = max(entry.epoch, h.producer_epoch)
        entry.last_timestamp = max(entry.last_timestamp, h.max_timestamp)
        if h.is_control:
            self._verifications.pop(pid, None)
            kind, coordinator_epoch = marker if marker is not None else (MARKER_ABORT, -1)
            first = entry.current_txn_first_offset
            if first >= 0:
                self._remove_ongoing(first)
            entry.current_txn_first_offset = -1
            entry.coordinator_epoch = coordinator_epoch
            return CompletedTxn(
                pid, first if first >= 0 else h.base_offset, h.base_offset, kind == MARKER_ABORT
            )
        if h.base_sequence >= 0:
            entry.batches.append(
                BatchMetadata(h.base_sequence, _last_seq(h), h.base_offset, h.last_offset)
            )
        if h.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing[h.base_offset] = pid
            self._first_unstable = None
        return None

    def _remove_ongoing(self, first_offset: int) -> None:
        self.ongoing.pop(first_offset, None)
        self._first_unstable = None

    def first_unstable_offset(self) -> int | None:
        if not self.ongoing:
            return None
        if self._first_unstable is None:
            self._first_unstable = min(self.ongoing)
        return self._first_unstable

    def open_transactions(self) -> Iterator[tuple[int, int]]:
        """(producer id, first offset) of each open transaction, oldest first."""
        for first in sorted(self.ongoing):
            yield self.ongoing[first], first

    # -- expiry ----------------------------------------------------------------------------
    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open txn."""
        gone = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            stem, _, suffix = name.partition(".")
            if "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def encode(self) -> bytes:
        body = bytearray(_HEAD.size)
        for e in self.producers.values():
            first_seq = e.batches[-1].first_seq if e.batches else -1
            body += _ENTRY.pack(
                e.producer_id, e.epoch, e.last_seq, e.last_offset,
                e.last_seq - first_seq if e.batches else 0,
                e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset,
            )
        struct.pack_into(">i", body, 6, len(self.producers))
        crc = crc32c(memoryview(body)[6:])
        struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
        return bytes(body)

    def take_snapshot(self, offset: int, keep_from: int = 0) -> Path:
        """Write ``<offset>.snapshot`` atomically; drop snapshots below
        ``keep_from`` and all but the newest MAX_SNAPSHOTS."""
        path = self.dir / snapshot_file_name(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(self.encode())
        os.replace(tmp, path)
        offsets = self.snapshot_offsets()
        for i, o in enumerate(offsets):
            if (o < keep_from and o != offset) or i < len(offsets) - MAX_SNAPSHOTS:
                (self.dir / snapshot_file_name(o)).unlink(missing_ok=True)
        return path

    def delete_snapshots_from(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o > offset:
                (self.dir / snapshot_file_name(o)).unlink(missing_ok=True)

    def delete_all_snapshots(self) -> None:
        for o in self.snapshot_offsets():
            (self.dir / snapshot_file_name(o)).unlink(missing_ok=True)

    def load_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset`` (newer ones
        are deleted, corrupt ones too); its offset, or None if there is none."""
        self.delete_snapshots_from(max_offset)
        for offset in reversed(self.snapshot_offsets()):
            path = self.dir / snapshot_file_name(offset)
            try:
                self._decode(path.read_bytes())
                return offset
            except (CorruptSnapshot, OSError):
                path.unlink(missing_ok=True)
        return None

    def _decode(self, data: bytes) -> None:
        if len(data) < _HEAD.size:
            raise CorruptSnapshot("snapshot is truncated")
        version, crc, count = _HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshot(f"snapshot version {version}")
        if crc32c(memoryview(data)[6:]) != crc:
            raise CorruptSnapshot("snapshot CRC mismatch")
        if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
            raise CorruptSnapshot("snapshot size does not match its entry count")
        producers: dict[int, ProducerEntry] = {}
        ongoing: dict[int, int] = {}
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
                _ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)
            )
            e = ProducerEntry(pid, epoch, last_timestamp=ts, coordinator_epoch=coord_epoch,
                              current_txn_first_offset=txn_first)
            if last_seq >= 0 and last_offset >= 0:
                e.batches.append(
                    BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset)
                )
            producers[pid] = e
            if txn_first >= 0:
                ongoing[txn_first] = pid
        self.producers = producers
        self.ongoing = ongoing
        self._first_unstable = None
