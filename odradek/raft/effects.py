"""What the Raft core asks its shell to do, in order.

A core call returns a list of effects. The shell runs them in list order and
finishes each before the next: a `PersistElectionState` is written and fsynced
before any `Send` that follows it (a vote is durable before it is granted).
"""

from __future__ import annotations

from dataclasses import dataclass

from .log import OffsetAndEpoch
from .messages import Envelope
from .state import ElectionState


@dataclass(frozen=True, slots=True)
class Send:
    envelope: Envelope


@dataclass(frozen=True, slots=True)
class PersistElectionState:
    state: ElectionState


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    """Entries below `high_watermark` are committed: apply them to the state machine."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    epoch: int
    leader_id: int  # -1 while no leader is known


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    """The log now starts at this snapshot: reload the state machine from it."""

    snapshot_id: OffsetAndEpoch


Effect = Send | PersistElectionState | HighWatermarkAdvanced | LeaderChanged | SnapshotInstalled
