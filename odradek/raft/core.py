"""The Raft core: KRaft's quorum protocol as a pure state machine.

Theory of operation
-------------------
Everything that changes a node's Raft state lives in this package's core:
this file (the public calls) and its parts, one class each over the shared
state in `node.py`: `election.py`, `replication.py`, `snapshots.py`. The core never
reads a clock, a socket or a random source of its own: every call takes the
time (`now_ms`), messages come in through `handle`, timers fire through
`tick`, randomness comes from the seeded `random.Random` it was given. Each
call returns the effects to run, in order (`effects.py`): messages to send,
election state to persist, a new high watermark, a leader change, an
installed snapshot. The log is called directly (`log.py`); it is small and
durable when the calls return (appends after `flush`).

The shape is KRaft's (KIP-595, KIP-996):

* **States.** Unattached (no leader, no vote), Voted (voted in this epoch),
  Prospective (asking for pre-votes, KIP-996), Candidate (asking for votes in
  a new epoch), Leader, Follower, Resigned (a leader that stepped down and
  waits for someone else to win). Only Prospective becomes Candidate.
* **Elections.** An election timeout (`controller.quorum.election.timeout.ms`
  plus a random part of the same size) turns Unattached/Voted/Candidate/
  Resigned into Prospective; a follower that has heard nothing from its leader
  for `controller.quorum.fetch.timeout.ms` does the same. A Prospective asks
  every voter for a pre-vote in its current epoch; it changes nobody's state
  and is granted when the asker's log is at least as up to date and the voter
  is not following a leader it has fetched from. An answer naming a leader
  makes a Prospective follow it only if the epoch is newer or it is not the
  leader this node timed out on (KIP-996); a Prospective that loses or times
  out goes back to following the leader it timed out on, if any (it fetches
  again; not having fetched, it grants pre-votes). A majority of pre-votes makes
  it a Candidate: epoch + 1, a vote for itself (persisted), Vote requests.
  A majority of votes makes it Leader. A lost election backs off for a random
  time up to `controller.quorum.election.backoff.max.ms`.
* **Leading.** A new leader appends a LeaderChange control entry in its
  epoch, sends BeginQuorumEpoch to the voters (again every request timeout
  until each answers or fetches) and serves Fetch. A leader that has not
  heard from a majority for 1.5 x fetch timeout resigns (check quorum).
* **Replication is pulled.** A follower sends Fetch(fetch_offset = its log
  end offset, last_fetched_epoch). The leader checks the pair against its
  log: if it diverges it answers with the diverging epoch and where it ends
  (KIP-101's rule, answered in the Fetch like KIP-595 does); if it falls below
  the log start it answers with the snapshot id; else with records and the
  high watermark. A caught-up fetch waits (parked) up to its max wait.
* **Commit.** The high watermark is the largest offset a majority of voters'
  fetch offsets (the leader's own log end offset included) have reached, and
  it moves only past the leader's epoch start offset.

Invariants asserted here: the high watermark never decreases and never passes
the log end offset; a follower never truncates below its high watermark; a
vote is persisted before it is sent; epochs never decrease; one leader per
epoch as far as this node can see.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import messages as M
from .config import VoterAddress
from .effects import Effect
from .election import Election
from .membership import Membership, VoterChangeError
from .node import RaftNode
from .replication import CHECK_QUORUM_FACTOR, FETCH_RETRY_BACKOFF_MS, Replication
from .snapshots import InvalidSnapshotId, Snapshots
from .state import NO_ID, State

__all__ = [
    "CHECK_QUORUM_FACTOR",
    "FETCH_RETRY_BACKOFF_MS",
    "InvalidSnapshotId",
    "NotLeaderError",
    "RaftCore",
    "RaftNode",
    "VoterChangeError",
]


class NotLeaderError(Exception):
    def __init__(self, epoch: int, leader_id: int) -> None:
        super().__init__(f"not the leader (epoch {epoch}, leader {leader_id})")
        self.epoch = epoch
        self.leader_id = leader_id


class RaftCore(Election, Replication, Snapshots, Membership):
    """A Raft node: the parts together, and the calls the shell makes."""

    # -- public API ---------------------------------------------------------------------
    def start(self, now_ms: int) -> list[Effect]:
        """Resume from the persisted election state (KRaft's rules at start-up)."""
        self._set_time(now_ms)
        e = self.election
        if e.leader_id == self.node_id:
            self.state = State.RESIGNED
            self._reset_election_timer()
        elif e.leader_id != NO_ID:
            self._become_follower(e.epoch, e.leader_id)
        elif e.voted_id != NO_ID:
            self.state = State.VOTED
            self._reset_election_timer()
        else:
            self.state = State.UNATTACHED
            self._reset_election_timer()
        if self.voters.ids == {self.node_id} and self.state != State.LEADER:
            self._become_prospective()
        return self._drain()

    def tick(self, now_ms: int) -> list[Effect]:
        self._set_time(now_ms)
        now = self.now_ms
        if self.state == State.LEADER:
            self._tick_leader()
        elif self.state == State.FOLLOWER:
            if now >= self._fetch_deadline_ms and self.is_voter:
                self._become_prospective()
            else:
                if self.is_voter:
                    self._maybe_update_voter()
                if now >= self._fetch_deadline_ms:
                    # An observer whose leader went quiet keeps fetching but no
                    # longer vouches for it (KIP-996): it grants pre-votes, so
                    # a voter set it is about to join can elect (KIP-853).
                    self._fetched_from_leader = False
                    self._fetch_deadline_ms = now + self.config.fetch_timeout_ms
                self._tick_follower()
        elif now >= self._election_deadline_ms:
            if self._retained_leader() != NO_ID:
                self._become_follower(self.epoch, self._retained_leader())
            elif self.is_voter:
                self._become_prospective()
            else:
                self._discover_leader()
        return self._drain()

    def handle(self, envelope: M.Envelope, now_ms: int) -> list[Effect]:
        self._set_time(now_ms)
        assert envelope.dst == self.node_id, envelope
        body = envelope.body
        if isinstance(body, M.VoteRequest):
            self._on_vote_request(envelope, body)
        elif isinstance(body, M.VoteResponse):
            self._on_vote_response(envelope.src, body)
        elif isinstance(body, M.BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(envelope, body)
        elif isinstance(body, M.BeginQuorumEpochResponse):
            self._on_begin_quorum_epoch_response(envelope.src, body)
        elif isinstance(body, M.EndQuorumEpochRequest):
            self._on_end_quorum_epoch(envelope, body)
        elif isinstance(body, M.EndQuorumEpochResponse):
            self._observe(body.leader_epoch, body.leader_id)
        elif isinstance(body, M.FetchRequest):
            self._on_fetch_request(envelope, body)
        elif isinstance(body, M.FetchResponse):
            self._on_fetch_response(envelope, body)
        elif isinstance(body, M.FetchSnapshotRequest):
            self._on_fetch_snapshot_request(envelope, body)
        elif isinstance(body, M.FetchSnapshotResponse):
            self._on_fetch_snapshot_response(envelope, body)
        elif isinstance(body, M.UpdateVoterRequest):
            self._on_update_voter_request(envelope, body)
        elif isinstance(body, M.UpdateVoterResponse):
            # the leader appends the new entry; a stale epoch moves this node on
            self._observe(body.leader_epoch, body.leader_id)
        return self._drain()

    def propose(self, records: Sequence[bytes], now_ms: int) -> tuple[int, list[Effect]]:
        """Append `records` as the leader; returns (last offset, effects).
        The records are committed once the high watermark passes that offset."""
        self._set_time(now_ms)
        if self.state != State.LEADER:
            raise NotLeaderError(self.epoch, self.leader_id)
        if not records or len(records) > self.config.max_records_per_append:
            raise ValueError(f"between 1 and {self.config.max_records_per_append} records")
        last_offset = self.log.append_as_leader(records, self.epoch)
        self.log.flush()
        self._leader_log_grew()
        return last_offset, self._drain()

    def add_voter(
        self, node_id: int, directory_id: str, address: VoterAddress | None, now_ms: int
    ) -> tuple[int, list[Effect]]:
        """AddRaftVoter on the leader: (offset of the VotersRecord, effects).
        Raises VoterChangeError with Kafka's error code (membership.py)."""
        self._set_time(now_ms)
        offset = self._add_voter(node_id, directory_id, address)
        return offset, self._drain()

    def remove_voter(
        self, node_id: int, directory_id: str, now_ms: int
    ) -> tuple[int, list[Effect]]:
        self._set_time(now_ms)
        offset = self._remove_voter(node_id, directory_id)
        return offset, self._drain()

    def update_voter(
        self, node_id: int, directory_id: str, address: VoterAddress, now_ms: int
    ) -> tuple[int, list[Effect]]:
        self._set_time(now_ms)
        offset = self._update_voter(node_id, directory_id, address)
        return offset, self._drain()

    def resign(self, now_ms: int) -> list[Effect]:
        """Graceful shutdown of a leader: Resigned, EndQuorumEpoch to the voters."""
        self._set_time(now_ms)
        if self.state == State.LEADER:
            self._become_resigned()
        return self._drain()

    def next_deadline_ms(self) -> int:
        """When `tick` has something to do next (the shell sleeps until then)."""
        if self.state == State.LEADER:
            assert self.leader is not None
            times = [self.leader.check_quorum_deadline_ms]
            times += [p.deadline_ms for p in self.leader.parked.values()]
            times += [
                r.begin_sent_ms + self.config.request_timeout_ms
                for r in self.leader.replicas.values()
                if not r.acknowledged
            ]
            return min(times)
        if self.state == State.FOLLOWER:
            times = [self._fetch_deadline_ms]
            if self.is_voter and self._voter_entry_stale():
                times.append(self._update_voter_due_ms)
            if self._in_flight is not None:
                times.append(self._in_flight[1] + self.config.request_timeout_ms)
            else:
                times.append(self._next_fetch_ms)
            return min(times)
        return self._election_deadline_ms
