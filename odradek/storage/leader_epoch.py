"""The leader epoch cache: which leader epoch started at which offset.

File format: ``<log.dir>/<topic>-<partition>/leader-epoch-checkpoint``
---------------------------------------------------------------------
Kafka's checkpoint framing (see ``storage/checkpoint.py``), ASCII::

    0                 line 1: format version (always 0)
    2                 line 2: number of entries
    0 0               entries: "<leader epoch> <start offset>", both increasing
    3 1200

An entry ``(epoch, start_offset)`` says the first batch written under ``epoch``
has base offset ``start_offset``; that epoch ends where the next one starts, or
at the log end offset for the latest epoch. Written atomically (tmp + fsync +
rename) whenever an entry is added or entries are truncated.

Theory of operation (as Kafka's ``LeaderEpochFileCache``)
---------------------------------------------------------
* ``assign(epoch, start_offset)`` is called before appending a batch stamped
  with ``epoch``; it adds an entry only when ``epoch`` is newer than the
  latest. Entries that would break "both columns increase" are dropped first
  (an older epoch with a larger start offset cannot survive a newer leader),
  and so is an entry at the same start offset (an epoch that wrote nothing).
* ``end_offset_for(epoch, log_end_offset)`` answers OffsetForLeaderEpoch: the
  largest epoch <= the requested one and the start offset of the first epoch
  after it (or the log end offset when it is the latest epoch). A request
  below the first known epoch gets the requested epoch and the first entry's
  start offset, as Kafka answers (without it, a follower whose only epoch the
  leader never knew would be told to cut at an offset it already has, again
  and again: the replication simulator found that livelock).
* ``truncate_from_end(offset)`` (log truncated to ``offset``) drops entries
  starting at or after it; ``truncate_from_start(offset)`` (log start offset
  moved) drops entries wholly below it and moves the first kept entry's start
  up to ``offset``.
* The number of entries is bounded by ``MAX_EPOCH_ENTRIES``: beyond it the
  oldest entries are dropped (they only describe data that retention would
  have removed long before).
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from odradek.storage.checkpoint import (
    CorruptCheckpoint,
    read_checkpoint_lines,
    write_checkpoint_lines,
    write_checkpoints,
)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
MAX_EPOCH_ENTRIES = 100_000


class LeaderEpochCache:
    """Epoch -> start offset entries of one partition, in memory.

    `flush` is called after every change; here it does nothing (the
    replication simulator's logs hold this class, and `replication/` takes it
    for either), `LeaderEpochFileCache` writes the checkpoint file."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries or []:
            self._epochs.append(epoch)
            self._offsets.append(offset)

    # -- queries -----------------------------------------------------------------------
    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets))

    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch under which ``offset`` was written (UNDEFINED_EPOCH if unknown)."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, end offset of that epoch), as Kafka answers
        OffsetForLeaderEpoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch >= self._epochs[-1]:
            return self._epochs[-1], log_end_offset
        i = bisect_right(self._epochs, requested_epoch)
        if i == 0:
            # Below every epoch we know (Kafka's answer): the requested epoch
            # ends where our history starts. A follower that diverged in an
            # epoch this log never saw then cuts back to there.
            return requested_epoch, self._offsets[0]
        return self._epochs[i - 1], self._offsets[i]

    # -- changes -----------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed
        (the file is then rewritten)."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        # An entry at the same start wrote nothing: the new epoch replaces it
        # (Kafka drops entries with start offset >= the new one too).
        while self._offsets and self._offsets[-1] >= start_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        if len(self._epochs) > MAX_EPOCH_ENTRIES:
            del self._epochs[0], self._offsets[0]
        self.flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: drop epochs starting at or after it."""
        keep = bisect_right(self._offsets, end_offset - 1)
        if keep < len(self._offsets):
            del self._epochs[keep:], self._offsets[keep:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly below it and
        start the first kept one there."""
        i = bisect_right(self._offsets, start_offset) - 1
        if i < 0 or (i == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:i], self._offsets[:i]
        self._offsets[0] = start_offset
        self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self.flush()

    def flush(self) -> None:
        """The entries changed (nothing to write in memory)."""


class LeaderEpochFileCache(LeaderEpochCache):
    """A `LeaderEpochCache` kept in the partition's checkpoint file."""

    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        super().__init__(entries)
        self.path = Path(path)
        # While a log loads: the entries the file holds, written once at the end
        # if they changed (a recovery re-learns every epoch it scans).
        self._written: list[tuple[int, int]] | None = None

    def defer_writes(self) -> None:
        self._written = list(self.entries)

    def write_deferred(self) -> None:
        written, self._written = self._written, None
        if written is not None and written != list(self.entries):
            self.flush()

    @classmethod
    def load(cls, dir: Path) -> LeaderEpochFileCache:
        """Read ``dir/leader-epoch-checkpoint``; a missing file is an empty cache.

        A corrupt file is treated as missing (Kafka rebuilds it from the log as
        leaders change; odradek's single node re-assigns the current epoch)."""
        path = Path(dir) / LEADER_EPOCH_CHECKPOINT_FILE
        try:
            lines = read_checkpoint_lines(path)
        except (CorruptCheckpoint, OSError, UnicodeDecodeError):
            return cls(path)
        entries: list[tuple[int, int]] = []
        for line in lines or []:
            fields = line.split()
            try:
                epoch, offset = int(fields[0]), int(fields[1])
            except (IndexError, ValueError):
                return cls(path)
            if len(fields) != 2 or (
                entries and (epoch <= entries[-1][0] or offset < entries[-1][1])
            ):
                return cls(path)
            entries.append((epoch, offset))
        return cls(path, entries)

    def flush(self) -> None:
        if self._written is not None:
            return
        write_checkpoint_lines(
            self.path, [f"{e} {o}" for e, o in zip(self._epochs, self._offsets)]
        )


def write_deferred_together(caches: list[LeaderEpochFileCache]) -> dict[Path, OSError]:
    """`write_deferred` of many caches in one `write_checkpoints` call (the
    leaderships one metadata change gives this broker: their fsyncs go
    together). Returns the checkpoint files that failed, with their error."""
    files: list[tuple[Path, list[str]]] = []
    for cache in caches:
        written, cache._written = cache._written, None
        if written is not None and written != cache.entries:
            files.append((cache.path, [f"{e} {o}" for e, o in cache.entries]))
    return write_checkpoints(files)
