"""Elections: a Raft node's states, their transitions, and the messages that move them.

Vote (pre-vote, KIP-996, and vote), BeginQuorumEpoch and EndQuorumEpoch; the
rules are in core.py's theory of operation. A part of `RaftCore` over the
shared state in node.py; it asks replication.py (through the methods node.py
declares) to start fetching as a follower and to start leading.
"""

from __future__ import annotations

from dataclasses import replace

from . import messages as M
from .effects import LeaderChanged
from .leader_state import LeaderState
from .node import RaftNode
from .state import NO_ID, ElectionState, State
from .voters import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    LEADER_CHANGE,
    control_entry,
    encode_kraft_version,
    encode_voters,
)


class Election(RaftNode):
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
        self._schedule_update_voter()
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
            candidate_directory_id=self.config.directory_id,
        )
        for voter in sorted(self.voters.ids - {self.node_id}):
            self._send(voter, self._addressed_to(voter, request))
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
            candidate_directory_id=self.config.directory_id,
        )
        for voter in sorted(self.voters.ids - {self.node_id}):
            self._send(voter, self._addressed_to(voter, request))
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
        entries = [control_entry(LEADER_CHANGE, body)]
        history = self.voter_history
        if history.kraft_version >= 1 and history.last_offset < 0:
            # KIP-853: voters known only from the bootstrap snapshot (or an
            # older one) go into the log, so observers that fetch learn them.
            entries.append(control_entry(KRAFT_VERSION, encode_kraft_version(1)))
            entries.append(control_entry(KRAFT_VOTERS, encode_voters(history.latest())))
        last = self.log.append_as_leader(entries, epoch, control=True)
        if len(entries) > 1:
            history.add(last, history.latest())
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
    def _addressed_to(self, voter: int, request: M.VoteRequest) -> M.VoteRequest:
        """`request` with the voter key (KIP-853) of `voter` in this node's set."""
        return replace(request, voter_id=voter,
                       voter_directory_id=self.voters.directory_ids.get(voter, ""))

    def _on_vote_request(self, envelope: M.Envelope, req: M.VoteRequest) -> None:
        if req.replica_epoch > self.epoch:
            self._become_unattached(req.replica_epoch)
        if not self._is_local_key(req.voter_id, req.voter_directory_id):
            # KIP-853: meant for another replica (this node was wiped and
            # re-formatted, or the sender's voter set is another one): no vote
            self._reply(envelope, M.VoteResponse(
                M.INVALID_VOTER_KEY, self.leader_id, self.epoch, False, req.pre_vote))
            return
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
        if state == State.RESIGNED and not self.is_voter and req.pre_vote:
            # KIP-853: a leader that removed itself (its removal maybe not
            # committed yet) must not block the rest from electing a successor.
            return up_to_date
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
        if resp.error_code == M.INVALID_VOTER_KEY:
            return  # not the voter asked (KIP-853): neither a grant nor a rejection
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
        self._send(voter, M.BeginQuorumEpochRequest(
            self.node_id, self.epoch, voter, self.voters.directory_ids.get(voter, "")))

    def _on_begin_quorum_epoch(self, envelope: M.Envelope, req: M.BeginQuorumEpochRequest) -> None:
        if req.leader_epoch >= self.epoch:
            self._observe(req.leader_epoch, req.leader_id)
        error = M.NONE if req.leader_epoch == self.epoch else M.FENCED_LEADER_EPOCH
        if error == M.NONE and not self._is_local_key(req.voter_id, req.voter_directory_id):
            error = M.INVALID_VOTER_KEY  # KIP-853: it still follows the leader, as Kafka's
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
