"""The view of a leader epoch cache that replication decisions need.

`storage/leader_epoch.py`'s `LeaderEpochCache` is one (its file-backed
subclass is what a partition log holds); the simulator's in-memory logs hold
the same class without a file.
"""

from __future__ import annotations

from typing import Protocol


class EpochHistory(Protocol):
    @property
    def entries(self) -> list[tuple[int, int]]: ...

    def latest_epoch(self) -> int: ...

    def earliest_entry(self) -> tuple[int, int] | None: ...

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...
