"""What DescribeQuorum (KIP-595, KIP-836, KIP-853) tells of the metadata quorum.

Only the leader knows it: each voter's and observer's log end offset, the last
time it fetched and the last time it had caught up with the leader
(`raft/leader_state.py`'s ReplicaState keeps both, under Kafka's rule). The
voters' entries live in the Raft core's LeaderState; observers (broker-only
nodes) fetch the metadata log from the broker layer, which reports each fetch
here (`ObserverTable`). As in Kafka, the table is the leader's for one epoch,
and an observer not heard from for `OBSERVER_TIMEOUT_MS` is forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..raft.leader_state import LeaderState, ReplicaState

MAX_OBSERVERS = 10_000  # observers remembered by a leader; more are not listed
OBSERVER_TIMEOUT_MS = 300_000  # Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class ReplicaView:
    replica_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaView, ...]
    observers: tuple[ReplicaView, ...]


class ObserverTable:
    def __init__(self) -> None:
        self.epoch = -1
        self.replicas: dict[int, ReplicaState] = {}

    def fetched(
        self, epoch: int, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int
    ) -> None:
        if epoch != self.epoch:
            self.epoch, self.replicas = epoch, {}
        replica = self.replicas.get(replica_id)
        if replica is None:
            if len(self.replicas) >= MAX_OBSERVERS:
                return
            replica = self.replicas[replica_id] = ReplicaState(replica_id)
        replica.record_fetch(fetch_offset, leader_end_offset, now_ms)

    def current(self, epoch: int, now_ms: int) -> list[ReplicaState]:
        if epoch != self.epoch:
            return []
        for rid in [r for r, s in self.replicas.items() if now_ms - s.last_fetch_ms > OBSERVER_TIMEOUT_MS]:
            del self.replicas[rid]
        return sorted(self.replicas.values(), key=lambda s: s.node_id)


def _view(r: ReplicaState, wall_offset_ms: int) -> ReplicaView:
    def wall(t: int) -> int:
        return t + wall_offset_ms if t >= 0 else -1

    return ReplicaView(r.node_id, r.end_offset, wall(r.last_fetch_ms), wall(r.last_caught_up_ms))


def describe(
    leader: LeaderState,
    voters: frozenset[int],
    log_end_offset: int,
    observers: ObserverTable,
    now_ms: int,
    wall_offset_ms: int = 0,
    raft_observers: dict[int, ReplicaState] | None = None,
) -> QuorumStatus:
    """The leader's view; the leader itself is caught up now. Raft's clock is
    monotonic: `wall_offset_ms` turns its times into wall-clock ms, as Kafka
    reports them."""
    views = []
    for vid in sorted(voters):
        if vid == leader.node_id:
            now_wall = now_ms + wall_offset_ms
            views.append(ReplicaView(vid, log_end_offset, now_wall, now_wall))
        else:
            views.append(_view(leader.replicas.get(vid, ReplicaState(vid)), wall_offset_ms))
    return QuorumStatus(
        leader.node_id,
        leader.epoch,
        leader.high_watermark,
        tuple(views),
        tuple(_view(r, wall_offset_ms) for r in _observers(
            observers.current(leader.epoch, now_ms), raft_observers or {}, voters)),
    )


def _observers(
    brokers: list[ReplicaState], controllers: dict[int, ReplicaState], voters: frozenset[int]
) -> list[ReplicaState]:
    """Broker observers and controllers that fetch through the Raft core without
    being voters (KIP-853: waiting to be added, or removed), by node id."""
    merged = {r.node_id: r for r in brokers}
    for node_id, r in controllers.items():
        if node_id not in voters and node_id not in merged:
            merged[node_id] = r
    return sorted(merged.values(), key=lambda r: r.node_id)
