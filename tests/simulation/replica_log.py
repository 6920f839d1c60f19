"""The simulated storage of one replica (replication.py's brokers hold one per partition)."""

from __future__ import annotations

from odradek.storage.leader_epoch import LeaderEpochCache


class ReplicaLog:
    """One broker's copy of one partition: records as (epoch, value) by offset,
    batch boundaries, the leader epoch cache. Appends and truncation follow
    `storage/log.py` (cuts at batch boundaries; epochs learnt from batches)."""

    def __init__(self) -> None:
        self.epochs_at: list[int] = []  # leader epoch of each offset's batch
        self.values: list[int] = []
        self.batch_bases: list[int] = []
        self.high_watermark = 0
        self.epochs = LeaderEpochCache()

    @property
    def log_end_offset(self) -> int:
        return len(self.values)

    def entry(self, offset: int) -> tuple[int, int] | None:
        if 0 <= offset < len(self.values):
            return self.epochs_at[offset], self.values[offset]
        return None

    def assign_leader_epoch(self, epoch: int) -> None:
        if epoch > self.epochs.latest_epoch():
            self.epochs.assign(epoch, self.log_end_offset)

    def append_as_leader(self, values: tuple[int, ...], epoch: int) -> int:
        base = self.log_end_offset
        if epoch > self.epochs.latest_epoch():
            self.epochs.assign(epoch, base)
        self.batch_bases.append(base)
        self.epochs_at.extend([epoch] * len(values))
        self.values.extend(values)
        return base

    def read(self, offset: int, max_batches: int) -> list[tuple[int, int, tuple[int, ...]]]:
        """Whole batches from the one holding `offset`: (base, epoch, values)."""
        holding = max((b for b in self.batch_bases if b <= offset), default=None)
        if holding is None or offset >= self.log_end_offset:
            return []
        i = self.batch_bases.index(holding)
        out = []
        for j in range(i, min(i + max_batches, len(self.batch_bases))):
            base = self.batch_bases[j]
            end = self.batch_bases[j + 1] if j + 1 < len(self.batch_bases) else self.log_end_offset
            out.append((base, self.epochs_at[base], tuple(self.values[base:end])))
        return out

    def append_as_follower(self, batches: list[tuple[int, int, tuple[int, ...]]]) -> None:
        for base, epoch, values in batches:
            if base != self.log_end_offset:
                raise ValueError(
                    f"batch at offset {base} does not follow offset {self.log_end_offset - 1}")
            if epoch > self.epochs.latest_epoch():
                self.epochs.assign(epoch, base)
            self.batch_bases.append(base)
            self.epochs_at.extend([epoch] * len(values))
            self.values.extend(values)

    def truncate_to(self, offset: int) -> list[tuple[int, int, int]]:
        """Cut at the batch boundary at or below `offset`; returns what went
        as (offset, epoch, value)."""
        if offset >= self.log_end_offset:
            self.epochs.truncate_from_end(self.log_end_offset)
            return []
        cut = max((b for b in self.batch_bases if b <= offset), default=0)
        removed = [(o, self.epochs_at[o], self.values[o]) for o in range(cut, self.log_end_offset)]
        del self.epochs_at[cut:], self.values[cut:]
        self.batch_bases = [b for b in self.batch_bases if b < cut]
        self.high_watermark = min(self.high_watermark, cut)
        # epochs starting at or after the cut go too (replica_fetcher.truncate_follower)
        self.epochs.truncate_from_end(cut)
        return removed
