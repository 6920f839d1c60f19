"""Metadata snapshots: the `.checkpoint` files of `__cluster_metadata-0`.

A snapshot is the committed metadata image at an offset, written so that
replaying it rebuilds the image; the log before it can then go. Names are
Kafka's: ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``, where the
end offset is the first offset *not* in the snapshot and the epoch is the
leader epoch of the entry just before it (`raft/log.py`).

File format (Kafka's KRaft snapshot layout; odradek's JSON record values)
-------------------------------------------------------------------------
Record batches v2, back to back, offsets counting from 0, every batch's
partition leader epoch = the snapshot's epoch:

* first batch, control, one record: key = version int16 (0), type int16 (3,
  SNAPSHOT_HEADER); value = Kafka's SnapshotHeaderRecord: version int16 (0),
  last_contained_log_timestamp int64 (ms), tagged fields (uvarint 0);
* data batches of at most `SNAPSHOT_BATCH_RECORDS` records: null keys, values
  the JSON metadata records of `records.py` (`image.records_of`: brokers,
  topics and partitions, configs, the next producer id), as the log holds them;
* last batch, control, one record: key = (0, 4 SNAPSHOT_FOOTER); value =
  SnapshotFooterRecord: version int16 (0), tagged fields (uvarint 0).

A file is written as ``<name>.checkpoint.part``, fsynced, renamed and its
directory fsynced, so a ``.checkpoint`` is whole once it is seen; a file that
does not parse (a CRC, no header or no footer) is skipped and reported.
Leftover ``.part`` files are removed when the directory is opened.

Retention (odradek's rule, not Kafka's `metadata.max.retention.*`): the two
newest snapshots are kept, and the log from the older one (`raft_log.py`
cuts it when a snapshot is created).
"""

from __future__ import annotations

import logging
import os
import struct
import time
from pathlib import Path

from ..protocol import records as batches
from ..raft.log import (
    SNAPSHOT_SUFFIX,
    OffsetAndEpoch,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from . import image as img
from . import records as R

log = logging.getLogger(__name__)

PART_SUFFIX = ".part"
SNAPSHOTS_KEPT = 2
SNAPSHOT_BATCH_RECORDS = 1000
SNAPSHOT_HEADER = 3  # Kafka's ControlRecordType values
SNAPSHOT_FOOTER = 4
_CONTROL_KEY = struct.Struct(">hh")
_HEADER_VALUE = struct.Struct(">hq")
_FOOTER_VALUE = struct.Struct(">h")


class InvalidSnapshot(ValueError):
    pass


def encode(
    image: img.MetadataImage,
    snapshot_id: OffsetAndEpoch,
    controls: list[tuple[int, bytes]] | None = None,
) -> bytes:
    """The bytes of the snapshot of `image` (the file's whole content).
    `controls`: (control type, value) records after the header (KIP-853's
    KRaftVersionRecord and VotersRecord, when the quorum is at kraft.version 1)."""
    now_ms = int(time.time() * 1000)
    epoch = snapshot_id.epoch
    out = bytearray()
    offset = 0

    def control(kind: int, value: bytes) -> None:
        nonlocal offset
        record = batches.Record(offset, now_ms, _CONTROL_KEY.pack(0, kind), value)
        out.extend(
            batches.build_batch(
                [record], base_offset=offset, is_control=True, partition_leader_epoch=epoch
            )
        )
        offset += 1

    control(SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, now_ms) + b"\x00")
    for kind, value in controls or ():
        control(kind, value)
    records = img.records_of(image)
    for start in range(0, len(records), SNAPSHOT_BATCH_RECORDS):
        chunk = records[start : start + SNAPSHOT_BATCH_RECORDS]
        out.extend(
            batches.build_batch(
                [
                    batches.Record(offset + i, now_ms, None, R.encode(r))
                    for i, r in enumerate(chunk)
                ],
                base_offset=offset,
                partition_leader_epoch=epoch,
            )
        )
        offset += len(chunk)
    control(SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0) + b"\x00")
    return bytes(out)


def bootstrap_checkpoint(controls: list[tuple[int, bytes]]) -> bytes:
    """KIP-853's bootstrap snapshot ``00000000000000000000-0000000000.checkpoint``
    (`odradek storage format --standalone/--initial-controllers`): the header,
    the KRaftVersionRecord and VotersRecord, the footer; no metadata records."""
    now_ms = int(time.time() * 1000)
    kinds = [(SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, now_ms) + b"\x00"), *controls,
             (SNAPSHOT_FOOTER, _FOOTER_VALUE.pack(0) + b"\x00")]
    out = bytearray()
    for offset, (kind, value) in enumerate(kinds):
        record = batches.Record(offset, now_ms, _CONTROL_KEY.pack(0, kind), value)
        out.extend(batches.build_batch([record], base_offset=offset, is_control=True,
                                       partition_leader_epoch=0))
    return bytes(out)


def decode(data: bytes) -> list[R.MetadataRecord]:
    """The metadata records of a snapshot; InvalidSnapshot unless it is whole
    (every CRC right, a header first and a footer last)."""
    kinds: list[int] = []
    records: list[R.MetadataRecord] = []
    end = 0
    try:
        for header in batches.iter_batch_headers(data):
            if not batches.batch_crc_ok(data, header):
                raise InvalidSnapshot(f"batch at offset {header.base_offset} fails its CRC")
            end = header.position + header.size
            for record in batches.decode_batch_records(data, header):
                if header.is_control:
                    if record.key is None or len(record.key) < _CONTROL_KEY.size:
                        raise InvalidSnapshot("a control record without its key")
                    kinds.append(_CONTROL_KEY.unpack_from(record.key)[1])
                elif record.value is not None:
                    records.append(R.decode(record.value))
    except (batches.InvalidRecords, ValueError) as e:
        raise InvalidSnapshot(str(e)) from e
    if end != len(data):
        raise InvalidSnapshot(f"{len(data) - end} bytes after the last whole batch")
    if kinds[:1] != [SNAPSHOT_HEADER] or kinds[-1:] != [SNAPSHOT_FOOTER]:
        raise InvalidSnapshot("no SnapshotHeader first or no SnapshotFooter last")
    return records


def control_records(data: bytes) -> list[tuple[int, bytes]]:
    """(control type, value) of every control record of a snapshot, header
    and footer included; [] if the bytes do not parse."""
    out: list[tuple[int, bytes]] = []
    try:
        for header in batches.iter_batch_headers(data):
            if not header.is_control:
                continue
            for record in batches.decode_batch_records(data, header):
                if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
                    out.append((_CONTROL_KEY.unpack_from(record.key)[1], record.value or b""))
    except (batches.InvalidRecords, ValueError):
        return []
    return out


def image_of(snapshot_id: OffsetAndEpoch, records: list[R.MetadataRecord]) -> img.MetadataImage:
    """The image a snapshot stands for: its records replayed, at the offset
    just before its end offset."""
    return img.apply(img.MetadataImage(), records, snapshot_id.offset - 1)


class MetadataSnapshots:
    """The `.checkpoint` files of one metadata log directory."""

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        dir.mkdir(parents=True, exist_ok=True)
        for leftover in dir.glob(f"*{SNAPSHOT_SUFFIX}{PART_SUFFIX}"):
            leftover.unlink(missing_ok=True)

    def ids(self) -> list[OffsetAndEpoch]:
        found = (parse_snapshot_file_name(p.name) for p in self.dir.iterdir())
        return sorted(i for i in found if i is not None)

    def latest(self) -> OffsetAndEpoch | None:
        ids = self.ids()
        return ids[-1] if ids else None

    def path(self, snapshot_id: OffsetAndEpoch) -> Path:
        return self.dir / snapshot_file_name(snapshot_id)

    def read(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        try:
            return self.path(snapshot_id).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a snapshot durably (temporary file, fsync, rename, fsync dir)."""
        final = self.path(snapshot_id)
        part = final.with_name(final.name + PART_SUFFIX)
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def load_newest(self) -> tuple[OffsetAndEpoch, list[R.MetadataRecord]] | None:
        """The newest snapshot that parses, with its records; None if none does."""
        for snapshot_id in reversed(self.ids()):
            data = self.read(snapshot_id)
            if data is None:
                continue
            try:
                return snapshot_id, decode(data)
            except InvalidSnapshot as e:
                log.error(
                    "metadata snapshot %s is not valid, skipped: %s",
                    snapshot_file_name(snapshot_id),
                    e,
                )
        return None

    def delete_below(self, offset: int) -> None:
        """Delete the snapshots whose end offset is below `offset`."""
        for snapshot_id in self.ids():
            if snapshot_id.offset < offset:
                self.path(snapshot_id).unlink(missing_ok=True)

    def delete_all_but(self, keep: OffsetAndEpoch) -> None:
        for snapshot_id in self.ids():
            if snapshot_id != keep:
                self.path(snapshot_id).unlink(missing_ok=True)
