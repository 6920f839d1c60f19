"""What a leader keeps about its voters during one epoch.

Invariants:
* `high_watermark` never decreases while this object lives, and only moves
  to an offset past `epoch_start_offset` (the leader's own LeaderChange entry):
  Raft's rule that a leader commits only through an entry of its own epoch.
* A voter's `end_offset` is recorded only from a Fetch validated against this
  leader's log in this epoch, so the prefix below it matches the leader's.
* At most one parked Fetch per voter (bounded by the voter count).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Envelope, FetchRequest

MAX_OBSERVERS = 1024  # observers tracked per epoch (brokers and would-be voters)


@dataclass(slots=True)
class ReplicaState:
    node_id: int
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_sent_high_watermark: int = -1
    acknowledged: bool = False  # BeginQuorumEpoch answered, or fetched in this epoch
    begin_sent_ms: int = -1
    # DescribeQuorum's lastCaughtUpTimestamp: the last time the replica had
    # everything the leader had (Kafka's rule: a fetch at or past the leader's
    # end offset is caught up now; one at or past the leader's end offset of the
    # previous fetch was caught up at that previous fetch)
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1
    directory_id: str = ""  # an observer's, from its Fetch (KIP-853)

    def record_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = now_ms
        elif 0 <= self.leader_end_at_last_fetch <= fetch_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leader_end_at_last_fetch = leader_end_offset
        self.end_offset = max(self.end_offset, fetch_offset)
        self.last_fetch_ms = now_ms


@dataclass(slots=True)
class ParkedFetch:
    envelope: Envelope
    request: FetchRequest
    deadline_ms: int


@dataclass(slots=True)
class LeaderState:
    node_id: int
    epoch: int
    epoch_start_offset: int
    voters: frozenset[int]
    now_ms: int
    high_watermark: int = -1
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # Observers that fetched in this epoch (KIP-853: a voter is added only
    # once it has caught up as an observer). At most MAX_OBSERVERS.
    observers: dict[int, ReplicaState] = field(default_factory=dict)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    check_quorum_deadline_ms: int = 0

    def __post_init__(self) -> None:
        for voter in self.voters:
            if voter != self.node_id:
                # A grace period: every voter counts as heard from at election time.
                self.replicas[voter] = ReplicaState(voter, last_fetch_ms=self.now_ms)

    def set_voters(self, voters: frozenset[int], now_ms: int) -> None:
        """The voter set changed (a VotersRecord appended or truncated away):
        an added voter keeps what it reported as an observer."""
        self.voters = voters
        for gone in [r for r in self.replicas if r not in voters]:
            self.observers[gone] = self.replicas.pop(gone)
        for voter in voters:
            if voter != self.node_id and voter not in self.replicas:
                state = self.observers.pop(voter, None) or ReplicaState(voter)
                state.last_fetch_ms = max(state.last_fetch_ms, now_ms)
                state.acknowledged = state.end_offset >= 0  # it fetched in this epoch
                self.replicas[voter] = state

    def update_replica(
        self, replica_id: int, end_offset: int, now_ms: int, leader_end_offset: int,
        directory_id: str = "", is_voter_key: bool = True,
    ) -> None:
        replica = self.replicas.get(replica_id) if is_voter_key else None
        if replica is None:
            # An observer: it does not count towards the high watermark. A
            # fetch from another directory than the one known is another
            # replica (a disk wiped and formatted again): it starts over.
            replica = self.observers.get(replica_id)
            if replica is not None and replica.directory_id != directory_id:
                replica = None
            if replica is None:
                if len(self.observers) >= MAX_OBSERVERS and replica_id not in self.observers:
                    return
                replica = self.observers[replica_id] = ReplicaState(
                    replica_id, directory_id=directory_id)
            replica.record_fetch(end_offset, leader_end_offset, now_ms)
            return
        # Reordered fetches of one epoch only ever report less: keep the max.
        replica.record_fetch(end_offset, leader_end_offset, now_ms)
        replica.acknowledged = True

    def heard_from(self, replica_id: int, now_ms: int) -> None:
        replica = self.replicas.get(replica_id)
        if replica is not None:
            replica.last_fetch_ms = now_ms

    def maybe_advance_high_watermark(self, leader_end_offset: int, majority: int) -> bool:
        # A leader being removed (KIP-853) leads until the removal commits,
        # without counting itself.
        mine = [leader_end_offset] if self.node_id in self.voters else []
        offsets = sorted(mine + [r.end_offset for r in self.replicas.values()], reverse=True)
        candidate = offsets[majority - 1]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            assert self.high_watermark <= leader_end_offset
            return True
        return False

    def voters_heard_within(self, now_ms: int, window_ms: int) -> int:
        """Voters (the leader included) that fetched within the last `window_ms`."""
        me = 1 if self.node_id in self.voters else 0
        return me + sum(1 for r in self.replicas.values() if now_ms - r.last_fetch_ms <= window_ms)

    def preferred_successors(self) -> tuple[int, ...]:
        ranked = sorted(self.replicas.values(), key=lambda r: (-r.end_offset, r.node_id))
        return tuple(r.node_id for r in ranked)
