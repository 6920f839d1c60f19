"""The Raft core's log (`raft/log.py`'s `RaftLog`) over a `PartitionLog`.

The metadata log `__cluster_metadata-0` is an ordinary partition log of
record batches v2; this adapter lets the Raft core (`raft/core.py`) drive it:

* one `append_as_leader` call is one batch: its records are the entries, in
  the leader's epoch (the batch's partition leader epoch, which the leader
  epoch cache learns); a control entry (KRaft's LeaderChange) is a control
  batch, which the metadata image skips;
* `read` returns whole batches as bytes (`RecordsSlice.payload`), and a
  follower's `append_as_follower` writes them as they came, so every replica
  holds the same batches at the same offsets and every offset the core sees
  (log end offsets, epoch ends, the high watermark) falls on a batch boundary;
* `end_offset_for_epoch` is the leader epoch cache's answer
  (`leader-epoch-checkpoint`), as Kafka's KafkaRaftClient asks it.

* snapshots are the `.checkpoint` files of `snapshots.py`; creating one keeps
  the two newest and cuts the log below the older one (`log_start_offset`
  moves there, whole segments below it are deleted); installing one fetched
  from the leader empties the log and starts it at the snapshot's end offset.
  Where the log holds no entry (empty past the snapshot, or asked about an
  epoch the cut removed), the snapshot's id answers, as in the in-memory log.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..protocol import records as batches
from ..raft.log import OffsetAndEpoch, RecordsSlice
from ..storage.log import PartitionLog
from . import snapshots as S
from .snapshots import SNAPSHOTS_KEPT, MetadataSnapshots

CONTROL_READ_BYTES = 1024 * 1024  # one read while scanning for control records


class PartitionRaftLog:
    def __init__(self, plog: PartitionLog, snapshots: MetadataSnapshots | None = None) -> None:
        self.plog = plog
        self.snapshots = snapshots if snapshots is not None else MetadataSnapshots(plog.dir)

    # -- reading -----------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.plog.log_end_offset

    def last_fetched_epoch(self) -> int:
        latest = self.plog.leader_epoch_cache.latest_epoch()
        if latest < 0 or self.plog.log_end_offset == self.plog.log_start_offset:
            snapshot_id = self.snapshots.latest()
            if snapshot_id is not None and snapshot_id.offset >= self.plog.log_end_offset:
                return snapshot_id.epoch
        return max(latest, 0)

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the entry at `offset` (the snapshot's below the log)."""
        epoch = self.plog.leader_epoch_cache.epoch_for_offset(offset)
        if epoch < 0:
            snapshot_id = self.snapshots.latest()
            if snapshot_id is not None and offset < snapshot_id.offset:
                return snapshot_id.epoch
        return max(epoch, 0)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        cache = self.plog.leader_epoch_cache
        earliest = cache.earliest_entry()
        found, end = cache.end_offset_for(epoch, self.plog.log_end_offset)
        if found < 0 or earliest is None or epoch < earliest[0]:
            # below the log's epochs: the snapshot's, else the log start
            snapshot_id = self.snapshots.latest()
            if snapshot_id is not None and snapshot_id.epoch <= epoch:
                return snapshot_id
            return OffsetAndEpoch(self.plog.log_start_offset, -1)
        return OffsetAndEpoch(end, found)

    def read(self, fetch_offset: int, max_bytes: int) -> RecordsSlice:
        leo = self.plog.log_end_offset
        if fetch_offset >= leo:
            return RecordsSlice(fetch_offset, fetch_offset, b"", 0)
        data = bytes(self.plog.read(fetch_offset, max(max_bytes, 1), leo, True).records)
        headers = list(batches.iter_batch_headers(data))
        if not headers:
            return RecordsSlice(fetch_offset, fetch_offset, b"", 0)
        assert headers[0].base_offset == fetch_offset, (
            f"fetch offset {fetch_offset} is inside the batch at {headers[0].base_offset}"
        )
        end = headers[-1].position + headers[-1].size
        return RecordsSlice(fetch_offset, headers[-1].next_offset, data[:end], end)

    # -- writing -----------------------------------------------------------------------
    def append_as_leader(self, records: Sequence[bytes], epoch: int, control: bool = False) -> int:
        assert records
        now_ms = int(time.time() * 1000)
        # A control entry is its key (version, type) then its value (voters.py).
        buf = bytearray(batches.build_batch(
            [batches.Record(offset=-1, timestamp=now_ms, key=bytes(r[:4]), value=bytes(r[4:]))
             if control else
             batches.Record(offset=-1, timestamp=now_ms, key=None, value=bytes(r))
             for r in records],
            is_control=control,
        ))
        headers = list(batches.iter_batch_headers(buf))
        return self.plog.append_as_leader(buf, headers, epoch).last_offset

    def append_as_follower(self, records: RecordsSlice) -> int:
        data = records.payload
        assert isinstance(data, bytes | bytearray), type(data)
        headers = list(batches.iter_batch_headers(data))
        if headers:
            assert headers[0].base_offset == self.plog.log_end_offset, (
                headers[0].base_offset, self.plog.log_end_offset)
            self.plog.append_as_follower(data, headers)
        return self.plog.log_end_offset

    def truncate_to(self, offset: int) -> None:
        self.plog.truncate_to(offset)

    def flush(self) -> None:
        self.plog.flush()

    def control_entries(self, start: int, end: int) -> list[tuple[int, int, bytes]]:
        """(offset, control type, value) of the control records in [start, end)."""
        out: list[tuple[int, int, bytes]] = []
        position = max(start, self.plog.log_start_offset)
        end = min(end, self.plog.log_end_offset)
        while position < end:
            data = bytes(self.plog.read(position, CONTROL_READ_BYTES, end, True).records)
            headers = list(batches.iter_batch_headers(data))
            if not headers:
                break
            for header in headers:
                if header.is_control and header.base_offset >= start:
                    for record in batches.decode_batch_records(data, header):
                        if record.key is not None and len(record.key) >= 4:
                            kind = int.from_bytes(record.key[2:4], "big", signed=True)
                            out.append((record.offset, kind, bytes(record.value or b"")))
                position = header.next_offset
        return out

    def snapshot_control_entries(self, snapshot_id: OffsetAndEpoch) -> list[tuple[int, bytes]]:
        data = self.snapshots.read(snapshot_id)
        return [] if data is None else S.control_records(data)

    # -- snapshots -----------------------------------------------------------------------
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self.snapshots.latest()

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        return self.snapshots.read(snapshot_id)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Write the snapshot, keep the SNAPSHOTS_KEPT newest and the log from
        the oldest of those (its entries below are in every kept snapshot)."""
        latest = self.snapshots.latest()
        if latest is not None and latest.offset >= snapshot_id.offset:
            return
        assert snapshot_id.offset <= self.plog.log_end_offset, snapshot_id
        self.snapshots.write(snapshot_id, data)
        kept = self.snapshots.ids()[-SNAPSHOTS_KEPT:]
        cut = kept[0].offset if len(kept) == SNAPSHOTS_KEPT else self.plog.log_start_offset
        plog = self.plog
        if cut > plog.log_start_offset:
            # Below a snapshot everything is committed (the caller checked it
            # against its high watermark), so the cut may pass the log's own.
            plog.high_watermark = max(plog.high_watermark, cut)
            plog.delete_records_before(cut)
            plog.delete_pending_files(now_ms=2**62)
        self.snapshots.delete_below(kept[0].offset)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot fetched from the leader replaces the whole log."""
        S.decode(data)  # whole and readable, or InvalidSnapshot before anything changes
        self.snapshots.write(snapshot_id, data)
        self.plog.truncate_fully_and_start_at(snapshot_id.offset)
        self.snapshots.delete_all_but(snapshot_id)
