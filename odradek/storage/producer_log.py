"""Glue between a partition log and its producer state / transaction indexes.

* ``apply_appended``: after an append, every batch with a producer id goes to
  the producer state; an ABORT marker adds an entry to the active segment's
  ``.txnindex`` (storage/txn_index.py).
* ``load``: on open, the newest producer snapshot at or below the log end
  offset is loaded and batch headers are replayed from there to the end (only
  a control batch's one record is read). After a clean shutdown with no
  snapshot at all nothing is replayed (Kafka's shortcut: the log predates
  producer state and a full scan would cost a start-up).

Works on a LocalLog (storage/local_log.py: the segment list and the producer
state it carries); storage/log.py calls it, never the other way.
"""

from __future__ import annotations

from dataclasses import replace

from odradek.protocol.records import (
    BatchHeader,
    InvalidRecords,
    decode_batch_records,
    parse_control_record,
)
from odradek.storage.local_log import LocalLog
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn


def marker_of(buf: bytes | bytearray | memoryview, header: BatchHeader) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch's record."""
    try:
        records = decode_batch_records(buf, header, max_decompressed_bytes=1 << 20)
        kind, coordinator_epoch = parse_control_record(records[0])
        return int(kind), coordinator_epoch
    except (InvalidRecords, IndexError):
        return -1, -1


def _apply(
    log: LocalLog, segment: LogSegment, buf: bytes | bytearray | memoryview, h: BatchHeader
) -> None:
    ps = log.producer_state
    marker = marker_of(buf, h) if h.is_control else None
    if marker is not None and marker[0] < 0:
        return  # a control batch that is not a transaction marker
    completed = ps.on_batch(h, marker)
    if completed is not None and completed.is_aborted:
        first_unstable = ps.first_unstable_offset()
        lso = first_unstable if first_unstable is not None else completed.last_offset + 1
        segment.txn_index.append(
            AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
        )


def apply_appended(
    log: LocalLog,
    segment: LogSegment,
    buf: bytes | bytearray | memoryview,
    headers: list[BatchHeader],
) -> None:
    for h in headers:
        if h.producer_id >= 0:
            _apply(log, segment, buf, h)


def load(log: LocalLog, had_clean_shutdown: bool) -> int:
    """Rebuild ``log.producer_state``; returns the number of batches replayed."""
    ps = ProducerStateManager(log.dir)
    log.producer_state = ps
    end = log.log_end_offset
    start = ps.load_snapshot(end)
    if start is None:
        if had_clean_shutdown:
            return 0
        start = log.log_start_offset
    replayed = 0
    for segment in log.segments:
        if segment.next_offset <= start:
            continue
        for position, h in segment.iter_headers_from(start):
            if h.last_offset < start:
                continue
            if h.producer_id >= 0:
                buf = segment.read_batch(position, h.size) if h.is_control else b""
                if h.is_control:
                    h = _relocated(h)
                _apply(log, segment, buf, h)
                replayed += 1
    return replayed


def _relocated(h: BatchHeader) -> BatchHeader:
    """The header as if its batch started at byte 0 of its own buffer."""
    return replace(h, position=0)


def rebuild_after_truncation(log: LocalLog) -> None:
    load(log, had_clean_shutdown=False)
