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

Snapshots (`.checkpoint` files, FetchSnapshot) are not written yet: the log
is never cut below the start, so no snapshot is ever asked for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..protocol import records as batches
from ..raft.log import OffsetAndEpoch, RecordsSlice
from ..storage.log import PartitionLog


class SnapshotsNotSupported(NotImplementedError):
    pass


class PartitionRaftLog:
    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog

    # -- reading -----------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.plog.log_end_offset

    def last_fetched_epoch(self) -> int:
        return max(self.plog.leader_epoch_cache.latest_epoch(), 0)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found, end = self.plog.leader_epoch_cache.end_offset_for(epoch, self.plog.log_end_offset)
        if found < 0:
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
        buf = bytearray(batches.build_batch(
            [batches.Record(offset=-1, timestamp=now_ms, key=None, value=bytes(r))
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

    # -- snapshots -----------------------------------------------------------------------
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return None

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        return None

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        raise SnapshotsNotSupported("metadata snapshots are not written yet")

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        raise SnapshotsNotSupported("metadata snapshots are not fetched yet")
