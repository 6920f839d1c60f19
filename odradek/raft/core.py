"""The Raft core: KRaft's quorum protocol as a pure state machine.

Theory of operation
-------------------
Everything that changes a node's Raft state lives in this file. The core never
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

import random
from collections.abc import Sequence

from . import messages as M
from .config import RaftConfig
from .effects import (
    Effect,
    HighWatermarkAdvanced,
    LeaderChanged,
    PersistElectionState,
    Send,
    SnapshotInstalled,
)
from .leader_state import LeaderState, ParkedFetch
from .log import OffsetAndEpoch, RaftLog
from .state import NO_ID, ElectionState, State

FETCH_RETRY_BACKOFF_MS = 50  # after an error answer, before the next Fetch
CHECK_QUORUM_FACTOR = 1.5  # Kafka's leader resigns after 1.5 x fetch timeout without a majority


class NotLeaderError(Exception):
    def __init__(self, epoch: int, leader_id: int) -> None:
        super().__init__(f"not the leader (epoch {epoch}, leader {leader_id})")
        self.epoch = epoch
        self.leader_id = leader_id


class InvalidSnapshotId(ValueError):
    pass


class RaftCore:
    def __init__(
        self,
        node_id: int,
        config: RaftConfig,
        log: RaftLog,
        election: ElectionState,
        rng: random.Random,
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.voters = config.voters
        self.log = log
        self.rng = rng
        self.election = election
        self.state = State.UNATTACHED
        # Everything in a snapshot is committed (a log may keep entries below it).
        snapshot_id = log.latest_snapshot_id()
        self.high_watermark = max(
            log.log_start_offset, snapshot_id.offset if snapshot_id is not None else 0
        )
        self.now_ms = 0
        self.leader: LeaderState | None = None
        self._out: list[Effect] = []
        self._next_correlation_id = 0
        self._election_deadline_ms = 0
        self._fetch_deadline_ms = 0  # follower: when the leader counts as gone
        self._votes_granted: set[int] = set()
        self._votes_rejected: set[int] = set()
        # Follower: the one Fetch or FetchSnapshot in flight.
        self._in_flight: tuple[int, int, int] | None = None  # (correlation id, sent ms, offset)
        self._next_fetch_ms = 0
        self._fetched_from_leader = False
        self._snapshot_fetch: tuple[OffsetAndEpoch, bytearray] | None = None

    # -- public API ---------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.election.epoch

    @property
    def leader_id(self) -> int:
        return self.election.leader_id

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

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
                self._tick_follower()
        elif now >= self._election_deadline_ms:
            if self._retained_leader() != NO_ID:
                self._become_follower(self.epoch, self._retained_leader())
            elif self.is_voter:
                self._become_prospective()
            else:
                self._reset_election_timer()
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

    def resign(self, now_ms: int) -> list[Effect]:
        """Graceful shutdown of a leader: Resigned, EndQuorumEpoch to the voters."""
        self._set_time(now_ms)
        if self.state == State.LEADER:
            self._become_resigned()
        return self._drain()

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """The state machine's snapshot at `snapshot_id.offset` (<= high watermark)."""
        offset, epoch = snapshot_id.offset, snapshot_id.epoch
        if not (self.log.log_start_offset < offset <= self.high_watermark):
            raise InvalidSnapshotId(f"{snapshot_id}: not in (log start, high watermark]")
        at = self.log.end_offset_for_epoch(epoch)
        before = self.log.end_offset_for_epoch(epoch - 1)
        if at.epoch != epoch or at.offset < offset or before.offset >= offset:
            raise InvalidSnapshotId(f"{snapshot_id}: offset {offset - 1} is not in epoch {epoch}")
        self.log.create_snapshot(snapshot_id, data)

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
            if self._in_flight is not None:
                times.append(self._in_flight[1] + self.config.request_timeout_ms)
            else:
                times.append(self._next_fetch_ms)
            return min(times)
        return self._election_deadline_ms

    # -- time and plumbing ------------------------------------------------------------
    def _set_time(self, now_ms: int) -> None:
        assert now_ms >= self.now_ms, f"time went back: {now_ms} < {self.now_ms}"
        self.now_ms = now_ms

    def _drain(self) -> list[Effect]:
        out, self._out = self._out, []
        assert self.high_watermark <= self.log.log_end_offset, (
            self.high_watermark,
            self.log.log_end_offset,
        )
        return out

    def _send(self, dst: int, body: M.Body, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            correlation_id = self._next_correlation_id
            self._next_correlation_id += 1
        self._out.append(Send(M.Envelope(self.node_id, dst, correlation_id, body)))
        return correlation_id

    def _reply(self, request: M.Envelope, body: M.Body) -> None:
        self._send(request.src, body, request.correlation_id)

    def _persist(self, election: ElectionState) -> None:
        assert election.epoch >= self.election.epoch, "epochs never decrease"
        if election != self.election:
            self.election = election
            self._out.append(PersistElectionState(election))

    def _randomized_election_timeout_ms(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.rng.randint(0, timeout)

    def _reset_election_timer(self, delay_ms: int | None = None) -> None:
        if delay_ms is None:
            delay_ms = self._randomized_election_timeout_ms()
        self._election_deadline_ms = self.now_ms + delay_ms

    def _backoff_ms(self) -> int:
        return self.rng.randint(0, self.config.election_backoff_max_ms)

    def _advance_high_watermark(self, offset: int) -> None:
        assert offset <= self.log.log_end_offset, (offset, self.log.log_end_offset)
        if offset > self.high_watermark:
            self.high_watermark = offset
            self._out.append(HighWatermarkAdvanced(offset))

    def _is_log_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        mine = (self.log.last_fetched_epoch(), self.log.log_end_offset)
        return (last_offset_epoch, last_offset) >= mine

    # -- transitions ----------------------------------------------------------------------
    def _leave_current_state(self) -> None:
        self.leader = None
        self._in_flight = None
        self._snapshot_fetch = None
        self._votes_granted = set()
        self._votes_rejected = set()

    def _become_unattached(self, epoch: int) -> None:
        assert epoch > self.epoch
        self._leave_current_state()
        self.state = State.UNATTACHED
        self._persist(ElectionState(epoch))
        self._reset_election_timer()
        self._out.append(LeaderChanged(epoch, NO_ID))

    def _become_voted(self, candidate_id: int) -> None:
        assert self.election.voted_id == NO_ID and self.election.leader_id == NO_ID
        self._leave_current_state()
        self.state = State.VOTED
        self._persist(ElectionState(self.epoch, voted_id=candidate_id))
        self._reset_election_timer()

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        assert leader_id != self.node_id and leader_id != NO_ID
        assert epoch >= self.epoch
        if epoch == self.epoch:
            assert self.election.leader_id in (NO_ID, leader_id), (
                f"two leaders in epoch {epoch}: {self.election.leader_id} and {leader_id}"
            )
            voted = self.election.voted_id
        else:
            voted = NO_ID
        self._leave_current_state()
        self.state = State.FOLLOWER
        self._persist(ElectionState(epoch, voted_id=voted, leader_id=leader_id))
        self._fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms
        self._fetched_from_leader = False
        self._next_fetch_ms = self.now_ms
        self._out.append(LeaderChanged(epoch, leader_id))
        self._send_fetch()

    def _become_prospective(self) -> None:
        assert self.is_voter
        self._leave_current_state()
        self.state = State.PROSPECTIVE
        self._reset_election_timer()
        self._votes_granted = {self.node_id}
        request = M.VoteRequest(
            replica_epoch=self.epoch,
            replica_id=self.node_id,
            last_offset_epoch=self.log.last_fetched_epoch(),
            last_offset=self.log.log_end_offset,
            pre_vote=True,
        )
        for voter in sorted(self.voters.ids - {self.node_id}):
            self._send(voter, request)
        self._maybe_win_pre_vote()

    def _become_candidate(self) -> None:
        assert self.state == State.PROSPECTIVE, "only Prospective becomes Candidate"
        self._leave_current_state()
        self.state = State.CANDIDATE
        epoch = self.epoch + 1
        self._persist(ElectionState(epoch, voted_id=self.node_id))
        self._out.append(LeaderChanged(epoch, NO_ID))
        self._reset_election_timer()
        self._votes_granted = {self.node_id}
        request = M.VoteRequest(
            replica_epoch=epoch,
            replica_id=self.node_id,
            last_offset_epoch=self.log.last_fetched_epoch(),
            last_offset=self.log.log_end_offset,
        )
        for voter in sorted(self.voters.ids - {self.node_id}):
            self._send(voter, request)
        self._maybe_win_election()

    def _become_leader(self) -> None:
        assert self.state == State.CANDIDATE and self.election.voted_id == self.node_id
        self._leave_current_state()
        self.state = State.LEADER
        epoch = self.epoch
        self._persist(ElectionState(epoch, voted_id=self.node_id, leader_id=self.node_id))
        epoch_start_offset = self.log.log_end_offset
        leader = LeaderState(
            self.node_id,
            epoch,
            epoch_start_offset,
            self.voters.ids,
            self.now_ms,
            high_watermark=self.high_watermark,
        )
        self._reset_check_quorum(leader)
        self.leader = leader
        self._out.append(LeaderChanged(epoch, self.node_id))
        # KRaft's LeaderChangeMessage: the first entry of the epoch, so the
        # high watermark can pass the epoch start without a client write.
        body = f"LeaderChange epoch={epoch} leader={self.node_id}".encode()
        self.log.append_as_leader([body], epoch, control=True)
        self.log.flush()
        for voter in sorted(self.voters.ids - {self.node_id}):
            self._send_begin_quorum_epoch(voter)
        self._leader_log_grew()

    def _become_resigned(self) -> None:
        assert self.leader is not None
        successors = self.leader.preferred_successors()
        self._leave_current_state()
        self.state = State.RESIGNED
        self._reset_election_timer()
        request = M.EndQuorumEpochRequest(self.node_id, self.epoch, successors)
        for voter in successors:
            self._send(voter, request)

    def _observe(self, epoch: int, leader_id: int) -> bool:
        """A message names `epoch` (and maybe its leader). Move to a newer epoch,
        or follow a leader newly learned in ours. True if the state changed."""
        if epoch > self.epoch:
            if leader_id not in (NO_ID, self.node_id):
                self._become_follower(epoch, leader_id)
            else:
                self._become_unattached(epoch)
            return True
        if (
            epoch == self.epoch
            and leader_id not in (NO_ID, self.node_id)
            and self.state != State.FOLLOWER
        ):
            assert self.state not in (State.LEADER, State.RESIGNED), (
                f"node {self.node_id} leads epoch {epoch}, told {leader_id} does"
            )
            self._become_follower(epoch, leader_id)
            return True
        return False

    # -- votes ----------------------------------------------------------------------------
    def _on_vote_request(self, envelope: M.Envelope, req: M.VoteRequest) -> None:
        if req.replica_epoch > self.epoch:
            self._become_unattached(req.replica_epoch)
        granted = False
        if req.replica_epoch == self.epoch and req.replica_id in self.voters:
            up_to_date = self._is_log_up_to_date(req.last_offset_epoch, req.last_offset)
            granted = self._can_grant(req, up_to_date)
            if granted and not req.pre_vote and self.election.voted_id == NO_ID:
                self._become_voted(req.replica_id)
        self._reply(
            envelope,
            M.VoteResponse(M.NONE, self.leader_id, self.epoch, granted, req.pre_vote),
        )

    def _can_grant(self, req: M.VoteRequest, up_to_date: bool) -> bool:
        state = self.state
        if state in (State.LEADER, State.RESIGNED):
            return False
        if state == State.FOLLOWER:
            # KIP-996: a follower that has fetched from its leader keeps it.
            return req.pre_vote and not self._fetched_from_leader and up_to_date
        if req.pre_vote:
            return up_to_date
        if self.election.leader_id != NO_ID:
            return False  # a leader already won this epoch
        if state == State.CANDIDATE:
            return False  # it voted for itself
        return self.election.voted_id in (NO_ID, req.replica_id) and up_to_date

    def _on_vote_response(self, src: int, resp: M.VoteResponse) -> None:
        # KIP-996: a Prospective that timed out on its leader keeps its
        # election when a voter still names that leader in the same epoch
        # (the voter has not timed out yet); only a newer epoch or a leader
        # it did not know makes it follow. Going back to the dead leader here
        # is how two survivors could stall forever, each pulling the other back.
        timed_out_on_named_leader = (
            self.state == State.PROSPECTIVE
            and resp.leader_epoch == self.epoch
            and resp.leader_id == self.election.leader_id != NO_ID
        )
        if not timed_out_on_named_leader and self._observe(resp.leader_epoch, resp.leader_id):
            return
        if resp.leader_epoch != self.epoch:
            return
        if src not in self.voters:
            return
        if resp.pre_vote and self.state == State.PROSPECTIVE:
            (self._votes_granted if resp.vote_granted else self._votes_rejected).add(src)
            self._maybe_win_pre_vote()
            lost = len(self._votes_rejected) >= self.voters.majority
            if self.state == State.PROSPECTIVE and lost and self._retained_leader() != NO_ID:
                self._become_follower(self.epoch, self._retained_leader())
        elif not resp.pre_vote and self.state == State.CANDIDATE:
            (self._votes_granted if resp.vote_granted else self._votes_rejected).add(src)
            if not self._maybe_win_election() and len(self._votes_rejected) >= self.voters.majority:
                # Lost: back off, then try again through a pre-vote.
                self._election_deadline_ms = min(
                    self._election_deadline_ms, self.now_ms + self._backoff_ms()
                )

    def _retained_leader(self) -> int:
        """A Prospective's last known leader (the one it timed out on), else NO_ID.

        KIP-996: a Prospective that loses or times out its pre-vote goes back
        to following that leader. If the leader is alive, the node fetches
        again; if not, it times out again, and meanwhile (not having fetched)
        it grants the other voters' pre-votes."""
        if self.state != State.PROSPECTIVE or self.election.leader_id == self.node_id:
            return NO_ID
        return self.election.leader_id

    def _maybe_win_pre_vote(self) -> None:
        if len(self._votes_granted) >= self.voters.majority:
            self._become_candidate()

    def _maybe_win_election(self) -> bool:
        if len(self._votes_granted) >= self.voters.majority:
            self._become_leader()
            return True
        return False

    # -- BeginQuorumEpoch / EndQuorumEpoch ----------------------------------------------
    def _send_begin_quorum_epoch(self, voter: int) -> None:
        assert self.leader is not None
        self.leader.replicas[voter].begin_sent_ms = self.now_ms
        self._send(voter, M.BeginQuorumEpochRequest(self.node_id, self.epoch))

    def _on_begin_quorum_epoch(self, envelope: M.Envelope, req: M.BeginQuorumEpochRequest) -> None:
        if req.leader_epoch >= self.epoch:
            self._observe(req.leader_epoch, req.leader_id)
        error = M.NONE if req.leader_epoch == self.epoch else M.FENCED_LEADER_EPOCH
        self._reply(envelope, M.BeginQuorumEpochResponse(error, self.leader_id, self.epoch))

    def _on_begin_quorum_epoch_response(self, src: int, resp: M.BeginQuorumEpochResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        if self.leader is not None and resp.error_code == M.NONE and src in self.leader.replicas:
            self.leader.replicas[src].acknowledged = True

    def _on_end_quorum_epoch(self, envelope: M.Envelope, req: M.EndQuorumEpochRequest) -> None:
        if req.leader_epoch >= self.epoch:
            self._observe(req.leader_epoch, req.leader_id)
        if req.leader_epoch == self.epoch and self.leader_id == req.leader_id:
            # The leader is going: the first preferred successor runs at once,
            # the others wait a little longer each.
            successors = req.preferred_successors
            if self.node_id in successors:
                position = successors.index(self.node_id)
                delay_ms = self.config.election_backoff_max_ms * position // len(successors)
            else:
                delay_ms = self.config.election_backoff_max_ms
            if self.state == State.FOLLOWER:
                self._fetch_deadline_ms = min(self._fetch_deadline_ms, self.now_ms + delay_ms)
        error = M.NONE if req.leader_epoch == self.epoch else M.FENCED_LEADER_EPOCH
        self._reply(envelope, M.EndQuorumEpochResponse(error, self.leader_id, self.epoch))

    # -- the leader's side of Fetch ---------------------------------------------------------
    def _leader_error(self, current_leader_epoch: int) -> int:
        """The error a leader-only request gets here, NONE if this node may serve it."""
        if current_leader_epoch < self.epoch:
            return M.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.epoch:
            return M.UNKNOWN_LEADER_EPOCH
        if self.state != State.LEADER:
            return M.NOT_LEADER_OR_FOLLOWER
        return M.NONE

    def _on_fetch_request(self, envelope: M.Envelope, req: M.FetchRequest) -> None:
        error = self._leader_error(req.current_leader_epoch)
        if error == M.NONE and (req.fetch_offset < 0 or req.last_fetched_epoch < 0):
            error = M.OFFSET_OUT_OF_RANGE
        if error != M.NONE:
            self._reply(envelope, M.FetchResponse(error, self.leader_id, self.epoch))
            return
        leader = self.leader
        assert leader is not None
        leader.parked.pop(envelope.src, None)  # a newer fetch replaces a parked one
        answer = self._validate_fetch(req.fetch_offset, req.last_fetched_epoch)
        if answer is not None:
            leader.heard_from(envelope.src, self.now_ms)
            self._reply(envelope, answer)
            return
        leader.update_replica(envelope.src, req.fetch_offset, self.now_ms)
        self._maybe_advance_leader_high_watermark()
        replica = leader.replicas.get(envelope.src)
        caught_up = req.fetch_offset >= self.log.log_end_offset and (
            replica is None or replica.last_sent_high_watermark == leader.high_watermark
        )
        if caught_up and req.max_wait_ms > 0:
            deadline_ms = self.now_ms + min(req.max_wait_ms, self.config.fetch_max_wait_ms)
            leader.parked[envelope.src] = ParkedFetch(envelope, req, deadline_ms)
            return
        self._answer_fetch(envelope, req)

    def _validate_fetch(self, fetch_offset: int, last_fetched_epoch: int) -> M.FetchResponse | None:
        """None if (fetch_offset, last_fetched_epoch) matches this log; else the
        answer that sends the follower to a diverging epoch or a snapshot."""
        log = self.log
        snapshot_id = log.latest_snapshot_id()
        start = log.log_start_offset
        if fetch_offset == 0 and start == 0:
            return None
        # Kafka's validateOffsetAndEpoch: the snapshot, if the fetch is at its
        # offset in another epoch, or the fetch's epoch is older than the
        # snapshot's (where that epoch ends is inside the snapshot, unknown).
        at_snapshot = snapshot_id is not None and (
            (
                fetch_offset == snapshot_id.offset == start
                and last_fetched_epoch != snapshot_id.epoch
            )
            or last_fetched_epoch < snapshot_id.epoch
        )
        if fetch_offset < start or at_snapshot:
            assert snapshot_id is not None, "a log that starts past 0 has a snapshot"
            return M.FetchResponse(
                M.NONE,
                self.node_id,
                self.epoch,
                self.leader_high_watermark(),
                start,
                snapshot_id=snapshot_id,
            )
        end = log.end_offset_for_epoch(last_fetched_epoch)
        if end.epoch == last_fetched_epoch and end.offset >= fetch_offset:
            return None
        if end.offset < start and snapshot_id is not None:
            return M.FetchResponse(
                M.NONE,
                self.node_id,
                self.epoch,
                self.leader_high_watermark(),
                start,
                snapshot_id=snapshot_id,
            )
        return M.FetchResponse(
            M.NONE,
            self.node_id,
            self.epoch,
            self.leader_high_watermark(),
            start,
            diverging_epoch=end,
        )

    def leader_high_watermark(self) -> int:
        assert self.leader is not None
        return self.leader.high_watermark

    def _answer_fetch(self, envelope: M.Envelope, req: M.FetchRequest) -> None:
        leader = self.leader
        assert leader is not None
        records = self.log.read(req.fetch_offset, self.config.fetch_max_bytes)
        replica = leader.replicas.get(envelope.src)
        if replica is not None:
            replica.last_sent_high_watermark = leader.high_watermark
        self._reply(
            envelope,
            M.FetchResponse(
                M.NONE,
                self.node_id,
                self.epoch,
                leader.high_watermark,
                self.log.log_start_offset,
                records=records,
            ),
        )

    def _leader_log_grew(self) -> None:
        self._maybe_advance_leader_high_watermark()
        self._complete_parked(everything=True)

    def _maybe_advance_leader_high_watermark(self) -> None:
        leader = self.leader
        assert leader is not None
        if leader.maybe_advance_high_watermark(self.log.log_end_offset, self.voters.majority):
            self._advance_high_watermark(leader.high_watermark)
            self._complete_parked(everything=True)

    def _complete_parked(self, everything: bool) -> None:
        leader = self.leader
        assert leader is not None
        for replica_id, parked in list(leader.parked.items()):
            if everything or parked.deadline_ms <= self.now_ms:
                del leader.parked[replica_id]
                self._answer_fetch(parked.envelope, parked.request)

    def _reset_check_quorum(self, leader: LeaderState) -> None:
        leader.check_quorum_deadline_ms = self.now_ms + int(
            CHECK_QUORUM_FACTOR * self.config.fetch_timeout_ms
        )

    def _tick_leader(self) -> None:
        leader = self.leader
        assert leader is not None
        self._complete_parked(everything=False)
        if self.now_ms >= leader.check_quorum_deadline_ms:
            window_ms = int(CHECK_QUORUM_FACTOR * self.config.fetch_timeout_ms)
            if leader.voters_heard_within(self.now_ms, window_ms) < self.voters.majority:
                self._become_resigned()
                return
            self._reset_check_quorum(leader)
        for replica in leader.replicas.values():
            due = replica.begin_sent_ms + self.config.request_timeout_ms
            if not replica.acknowledged and self.now_ms >= due:
                self._send_begin_quorum_epoch(replica.node_id)

    def _on_fetch_snapshot_request(self, envelope: M.Envelope, req: M.FetchSnapshotRequest) -> None:
        error = self._leader_error(req.current_leader_epoch)
        data = self.log.read_snapshot(req.snapshot_id) if error == M.NONE else None
        if error == M.NONE and data is None:
            error = M.SNAPSHOT_NOT_FOUND
        if error == M.NONE and data is not None and not 0 <= req.position <= len(data):
            error = M.POSITION_OUT_OF_RANGE
        if error != M.NONE or data is None:
            self._reply(envelope, M.FetchSnapshotResponse(error, self.leader_id, self.epoch))
            return
        assert self.leader is not None
        self.leader.heard_from(envelope.src, self.now_ms)
        chunk = data[req.position : req.position + self.config.fetch_snapshot_max_bytes]
        self._reply(
            envelope,
            M.FetchSnapshotResponse(
                M.NONE, self.node_id, self.epoch, req.snapshot_id, len(data), req.position, chunk
            ),
        )

    # -- the follower's side of Fetch ---------------------------------------------------
    def _tick_follower(self) -> None:
        if self._in_flight is not None:
            if self.now_ms >= self._in_flight[1] + self.config.request_timeout_ms:
                self._in_flight = None  # lost: ask again
                self._send_fetch()
        elif self.now_ms >= self._next_fetch_ms:
            self._send_fetch()

    def _send_fetch(self) -> None:
        assert self.state == State.FOLLOWER
        if self._in_flight is not None:
            return
        if self._snapshot_fetch is not None:
            snapshot_id, buf = self._snapshot_fetch
            body: M.Body = M.FetchSnapshotRequest(self.node_id, self.epoch, snapshot_id, len(buf))
            offset = len(buf)
        else:
            offset = self.log.log_end_offset
            body = M.FetchRequest(
                self.node_id,
                self.epoch,
                offset,
                self.log.last_fetched_epoch(),
                self.config.fetch_max_wait_ms,
            )
        correlation_id = self._send(self.leader_id, body)
        self._in_flight = (correlation_id, self.now_ms, offset)

    def _take_in_flight(self, envelope: M.Envelope, leader_epoch: int) -> bool:
        """True if `envelope` answers the Fetch/FetchSnapshot in flight to our leader."""
        if (
            self.state != State.FOLLOWER
            or leader_epoch != self.epoch
            or envelope.src != self.leader_id
            or self._in_flight is None
            or self._in_flight[0] != envelope.correlation_id
        ):
            return False
        self._in_flight = None
        return True

    def _retry_fetch_later(self) -> None:
        self._next_fetch_ms = self.now_ms + FETCH_RETRY_BACKOFF_MS

    def _on_fetch_response(self, envelope: M.Envelope, resp: M.FetchResponse) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        expected_offset = self._in_flight[2] if self._in_flight is not None else -1
        if not self._take_in_flight(envelope, resp.leader_epoch):
            return
        if resp.error_code != M.NONE:
            self._retry_fetch_later()
            return
        self._fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms
        self._fetched_from_leader = True
        log = self.log
        if resp.diverging_epoch is not None:
            diverging = resp.diverging_epoch
            mine = log.end_offset_for_epoch(diverging.epoch)
            truncate_offset = min(diverging.offset, mine.offset)
            assert truncate_offset >= self.high_watermark, (
                f"node {self.node_id} would truncate to {truncate_offset} "
                f"below its high watermark {self.high_watermark}"
            )
            log.truncate_to(max(truncate_offset, log.log_start_offset))
        elif resp.snapshot_id is not None:
            self._snapshot_fetch = (resp.snapshot_id, bytearray())
        elif (
            resp.records is not None
            and resp.records.base_offset == expected_offset == log.log_end_offset
        ):
            if resp.records.next_offset > resp.records.base_offset:
                log.append_as_follower(resp.records)
                log.flush()
            if resp.high_watermark >= 0:
                self._advance_high_watermark(min(resp.high_watermark, log.log_end_offset))
        self._send_fetch()

    def _on_fetch_snapshot_response(
        self, envelope: M.Envelope, resp: M.FetchSnapshotResponse
    ) -> None:
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        if not self._take_in_flight(envelope, resp.leader_epoch):
            return
        pending = self._snapshot_fetch
        if resp.error_code != M.NONE or pending is None or resp.snapshot_id != pending[0]:
            self._snapshot_fetch = None  # start over from a Fetch
            self._retry_fetch_later()
            return
        self._fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms
        self._fetched_from_leader = True
        snapshot_id, buf = pending
        if resp.position == len(buf):
            buf += resp.unaligned_records
        if len(buf) >= resp.size:
            self._snapshot_fetch = None
            assert snapshot_id.offset >= self.high_watermark
            self.log.install_snapshot(snapshot_id, bytes(buf))
            self._out.append(SnapshotInstalled(snapshot_id))
            self._advance_high_watermark(snapshot_id.offset)
        self._send_fetch()
