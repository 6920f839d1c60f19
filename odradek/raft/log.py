"""The log the Raft core replicates, kept small: an interface and an in-memory log.

Theory of operation
-------------------
The core sees the log as offsets and leader epochs. Every entry has an
offset (dense, from `log_start_offset` to `log_end_offset - 1`) and the epoch
of the leader that appended it; epochs never decrease along the log. Below
`log_start_offset` the log is summarised by the latest snapshot, whose id is
(end offset, epoch of the entry just before it).

Rules every implementation keeps (the core relies on them):

* `append_as_leader` and `append_as_follower` only add at `log_end_offset`.
* `flush` makes everything up to `log_end_offset` durable. The core flushes
  before it reports an offset to anyone (a follower's next Fetch, the leader's
  own vote towards the high watermark), so a reported offset survives a crash.
* `truncate_to` and snapshot changes are durable when they return.
* `end_offset_for_epoch(e)` answers like Kafka's leader-epoch cache: the
  largest epoch <= e the log knows and the offset where it ends (the start of
  the next epoch, or `log_end_offset`). With no such epoch it answers
  `(log_start_offset, -1)`.

`InMemoryRaftLog` is the simulation's log (and the unit tests'): a list of
entries, an epoch index, a flushed offset and one snapshot; `crash()` drops
what was never flushed. `log_adapter.py` maps the same interface onto a
`PartitionLog`.

Snapshot files are named as Kafka names them:
``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

SNAPSHOT_SUFFIX = ".checkpoint"


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class RecordsSlice:
    """Entries [base_offset, next_offset) as the log stores them (opaque)."""

    base_offset: int
    next_offset: int
    payload: object = field(repr=False)
    size_bytes: int = 0


def snapshot_file_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> OffsetAndEpoch | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    offset, dash, epoch = stem.partition("-")
    if not dash or len(offset) != 20 or len(epoch) != 10:
        return None
    if not (offset.isdigit() and epoch.isdigit()):
        return None
    return OffsetAndEpoch(int(offset), int(epoch))


class RaftLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def last_fetched_epoch(self) -> int:
        """Epoch of the last entry (the snapshot's if the log is empty past it), 0 if none."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def append_as_leader(self, records: Sequence[bytes], epoch: int, control: bool = False) -> int:
        """Append at log_end_offset in `epoch`; returns the last offset written."""
        ...

    def append_as_follower(self, records: RecordsSlice) -> int:
        """Append what the leader's `read` returned; returns the new log_end_offset."""
        ...

    def read(self, fetch_offset: int, max_bytes: int) -> RecordsSlice: ...

    def truncate_to(self, offset: int) -> None: ...

    def flush(self) -> None: ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None: ...

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a snapshot of the state at `snapshot_id.offset` and drop the log below it."""
        ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the whole log by a snapshot fetched from the leader."""
        ...

    def control_entries(self, start: int, end: int) -> list[tuple[int, int, bytes]]:
        """The control entries in [start, end): (offset, control type, value)."""
        ...

    def snapshot_control_entries(self, snapshot_id: OffsetAndEpoch) -> list[tuple[int, bytes]]:
        """The control records of a snapshot: (control type, value)."""
        ...


@dataclass(frozen=True, slots=True)
class Entry:
    epoch: int
    data: bytes
    control: bool = False


class InMemoryRaftLog:
    """A RaftLog in memory, with a crash model: `crash()` keeps what `flush` saw."""

    def __init__(
        self, snapshot_controls: Callable[[bytes], list[tuple[int, bytes]]] | None = None
    ) -> None:
        # How to find the control records (voters) in a snapshot's bytes: the
        # state machine's format, so the state machine says.
        self._snapshot_controls = snapshot_controls
        self._start = 0
        self._entries: list[Entry] = []
        # (epoch, start offset), increasing in both.
        self._epochs: list[tuple[int, int]] = []
        self._epoch_starts: list[int] = []
        self._flushed_end = 0
        self._snapshot: tuple[OffsetAndEpoch, bytes] | None = None

    # -- reading -----------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    def entry(self, offset: int) -> Entry:
        assert self._start <= offset < self.log_end_offset, offset
        return self._entries[offset - self._start]

    def entries(self, start: int, end: int) -> list[Entry]:
        assert self._start <= start <= end <= self.log_end_offset, (start, end)
        return self._entries[start - self._start : end - self._start]

    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        if self._snapshot is not None:
            return self._snapshot[0].epoch
        return 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        i = bisect_right(self._epochs, (epoch, 2**63)) - 1
        if i >= 0:
            found, _ = self._epochs[i]
            end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.log_end_offset
            return OffsetAndEpoch(end, found)
        if self._snapshot is not None and self._snapshot[0].epoch <= epoch:
            return self._snapshot[0]
        return OffsetAndEpoch(self._start, -1)

    def read(self, fetch_offset: int, max_bytes: int) -> RecordsSlice:
        assert self._start <= fetch_offset <= self.log_end_offset, fetch_offset
        i = fetch_offset - self._start
        taken: list[Entry] = []
        size = 0
        while i < len(self._entries):
            entry = self._entries[i]
            if taken and size + len(entry.data) > max_bytes:
                break
            taken.append(entry)
            size += len(entry.data)
            i += 1
        return RecordsSlice(fetch_offset, fetch_offset + len(taken), tuple(taken), size)

    def control_entries(self, start: int, end: int) -> list[tuple[int, int, bytes]]:
        out = []
        for offset in range(max(start, self._start), min(end, self.log_end_offset)):
            entry = self._entries[offset - self._start]
            if entry.control and len(entry.data) >= 4:
                out.append((offset, int.from_bytes(entry.data[2:4], "big", signed=True),
                            entry.data[4:]))
        return out

    def snapshot_control_entries(self, snapshot_id: OffsetAndEpoch) -> list[tuple[int, bytes]]:
        data = self.read_snapshot(snapshot_id)
        if data is None or self._snapshot_controls is None:
            return []
        return self._snapshot_controls(data)

    # -- writing -----------------------------------------------------------
    def _add(self, entry: Entry) -> None:
        if not self._epochs or entry.epoch > self._epochs[-1][0]:
            self._epochs.append((entry.epoch, self.log_end_offset))
            self._epoch_starts.append(self.log_end_offset)
        assert entry.epoch == self._epochs[-1][0], "epochs never decrease along the log"
        self._entries.append(entry)

    def append_as_leader(self, records: Sequence[bytes], epoch: int, control: bool = False) -> int:
        assert records
        for data in records:
            self._add(Entry(epoch, bytes(data), control))
        return self.log_end_offset - 1

    def append_as_follower(self, records: RecordsSlice) -> int:
        assert records.base_offset == self.log_end_offset, (records, self.log_end_offset)
        payload = records.payload
        assert isinstance(payload, tuple)
        for entry in payload:
            assert isinstance(entry, Entry)
            self._add(entry)
        return self.log_end_offset

    def truncate_to(self, offset: int) -> None:
        assert offset >= self._start, (offset, self._start)
        if offset >= self.log_end_offset:
            return
        del self._entries[offset - self._start :]
        while self._epochs and self._epochs[-1][1] >= self.log_end_offset:
            self._epochs.pop()
            self._epoch_starts.pop()
        self._flushed_end = min(self._flushed_end, self.log_end_offset)

    def flush(self) -> None:
        self._flushed_end = self.log_end_offset

    def crash(self) -> None:
        """What a process crash leaves: the flushed prefix."""
        self.truncate_to(max(self._flushed_end, self._start))

    # -- snapshots ---------------------------------------------------------
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return None if self._snapshot is None else self._snapshot[0]

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        if self._snapshot is None or self._snapshot[0] != snapshot_id:
            return None
        return self._snapshot[1]

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        assert self._start <= snapshot_id.offset <= self._flushed_end, snapshot_id
        if self._snapshot is not None and self._snapshot[0].offset >= snapshot_id.offset:
            return
        self._snapshot = (snapshot_id, data)
        drop = snapshot_id.offset - self._start
        del self._entries[:drop]
        self._start = snapshot_id.offset
        # Epochs that still own entries, the first one clamped to the new start.
        kept: list[tuple[int, int]] = []
        for i, (epoch, start) in enumerate(self._epochs):
            end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.log_end_offset
            if end > self._start:
                kept.append((epoch, max(start, self._start)))
        self._epochs = kept
        self._epoch_starts = [start for _, start in kept]

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._snapshot = (snapshot_id, data)
        self._entries = []
        self._epochs = []
        self._epoch_starts = []
        self._start = snapshot_id.offset
        self._flushed_end = snapshot_id.offset
