"""Membership changes (KIP-853): AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter in the core.

Only the leader changes the voter set, by appending a VotersRecord (a control
entry) with the whole new set; the set is in force from that append on, on
every replica that has the entry (`voters.py`), so the entry itself commits
under the new set's majority. The rules, as Kafka's handlers keep them:

* kraft.version must be 1 (a static ``controller.quorum.voters`` quorum cannot
  change): UNSUPPORTED_VERSION;
* the leader must have committed an entry of its own epoch, and the previous
  change must be committed (one change at a time): REQUEST_TIMED_OUT;
* a voter added must not be one already (DUPLICATE_VOTER) and must be an
  observer that has fetched from this leader up to its high watermark
  (caught up): REQUEST_TIMED_OUT otherwise;
* a voter removed or updated must be in the set with that directory id:
  VOTER_NOT_FOUND; the last voter cannot be removed: INVALID_REQUEST.

A voter keeps its own entry current, as Kafka's KafkaRaftClient does: a
follower voter compares, every `UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS` fetch
timeouts, the endpoint the voter set holds for it with its own
(`RaftConfig.local_address`, e.g. after a restart on another port) and sends
UpdateRaftVoter to its leader when they differ. (Kafka also compares the
supported kraft.version range; every odradek node supports 0-1.)

A leader that removes itself leads (without counting itself towards the
high watermark) until the removal commits, then resigns (EndQuorumEpoch to the
remaining voters) and stays an observer. A part of `RaftCore` over node.py.
"""

from __future__ import annotations

from . import messages as M
from .config import VoterAddress, VoterSet
from .node import RaftNode
from .state import State
from .voters import KRAFT_VOTERS, ZERO_UUID, control_entry, encode_voters

# Kafka's follower lets a few fetch rounds pass (3 fetch timeouts) between checks
UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS = 3


class VoterChangeError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class Membership(RaftNode):
    @property
    def voter_change_pending(self) -> bool:
        return self.voter_history.last_offset >= self.high_watermark

    def _add_voter(
        self, node_id: int, directory_id: str, address: VoterAddress | None
    ) -> int:
        """Append the VotersRecord that adds `node_id`; returns its offset
        (the change is done once the high watermark passes it)."""
        self._check_can_change()
        voters = self.voters
        if node_id in voters:
            raise VoterChangeError(M.DUPLICATE_VOTER, f"node {node_id} is already a voter")
        assert self.leader is not None
        observer = self.leader.observers.get(node_id)
        if (
            observer is None
            or observer.end_offset < self.high_watermark
            or observer.directory_id not in ("", directory_id)
        ):
            raise VoterChangeError(
                M.REQUEST_TIMED_OUT,
                f"node {node_id} (directory {directory_id}) is not an observer caught up "
                f"to the high watermark {self.high_watermark}",
            )
        return self._append_voters(voters.with_voter(node_id, directory_id, address))

    def _remove_voter(self, node_id: int, directory_id: str) -> int:
        self._check_can_change()
        voters = self._find_voter(node_id, directory_id)
        if len(voters) == 1:
            raise VoterChangeError(M.INVALID_REQUEST, "the last voter cannot be removed")
        return self._append_voters(voters.without_voter(node_id))

    def _update_voter(self, node_id: int, directory_id: str, address: VoterAddress) -> int:
        """A voter's endpoints changed (it restarted with new listeners)."""
        self._check_can_change()
        voters = self._find_voter(node_id, directory_id)
        if voters.addresses.get(node_id) == address:
            return self.voter_history.last_offset
        return self._append_voters(voters.with_voter(node_id, directory_id, address))

    # -- a voter's own entry (UpdateRaftVoter) ------------------------------------------
    def _schedule_update_voter(self) -> None:
        period = UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS * self.config.fetch_timeout_ms
        self._update_voter_due_ms = self.now_ms + period

    def _voter_entry_stale(self) -> bool:
        """This node is a voter (its directory id, if the set names one) whose
        endpoint in the voter set is not its own."""
        local = self.config.local_address
        voters = self.voters
        if local is None or self.voter_history.kraft_version < 1 or self.node_id not in voters:
            return False
        known = voters.directory_ids.get(self.node_id, ZERO_UUID)
        if known not in (ZERO_UUID, "", self.config.directory_id):
            return False  # another replica of this id (this one was re-formatted)
        return voters.addresses.get(self.node_id) != local

    def _maybe_update_voter(self) -> None:
        """A follower voter's periodic check: UpdateRaftVoter to the leader."""
        if self.state != State.FOLLOWER or self.now_ms < self._update_voter_due_ms:
            return
        self._schedule_update_voter()
        local = self.config.local_address
        if local is not None and self._voter_entry_stale():
            self._send(self.leader_id, M.UpdateVoterRequest(
                self.node_id, self.config.directory_id, self.epoch, local))

    def _on_update_voter_request(self, envelope: M.Envelope, req: M.UpdateVoterRequest) -> None:
        """The leader's side, as Kafka's: answered at once, not on commit."""
        error = self._leader_error(req.current_leader_epoch)
        if error == M.NONE:
            try:
                self._update_voter(req.voter_id, req.voter_directory_id, req.address)
            except VoterChangeError as e:
                error = e.error_code
        self._reply(envelope, M.UpdateVoterResponse(error, self.leader_id, self.epoch))

    # -- internals ------------------------------------------------------------------------
    def _check_can_change(self) -> None:
        if self.state != State.LEADER or self.leader is None:
            raise VoterChangeError(M.NOT_LEADER_OR_FOLLOWER, "not the leader")
        if self.voter_history.kraft_version < 1:
            raise VoterChangeError(
                M.UNSUPPORTED_VERSION,
                "kraft.version is 0 (static controller.quorum.voters): voters cannot change",
            )
        if self.high_watermark <= self.leader.epoch_start_offset:
            raise VoterChangeError(
                M.REQUEST_TIMED_OUT, "the leader has not committed an entry of its epoch yet"
            )
        if self.voter_change_pending:
            raise VoterChangeError(
                M.REQUEST_TIMED_OUT, "the previous voter change is not committed yet"
            )

    def _find_voter(self, node_id: int, directory_id: str) -> VoterSet:
        voters = self.voters
        known = voters.directory_ids.get(node_id, ZERO_UUID)
        if node_id not in voters or directory_id not in (known, ZERO_UUID):
            raise VoterChangeError(
                M.VOTER_NOT_FOUND, f"no voter {node_id} with directory id {directory_id}"
            )
        return voters

    def _append_voters(self, voters: VoterSet) -> int:
        assert self.leader is not None
        entry = control_entry(KRAFT_VOTERS, encode_voters(voters))
        offset = self.log.append_as_leader([entry], self.epoch, control=True)
        self.log.flush()
        self.voter_history.add(offset, voters)
        self.leader.set_voters(voters.ids, self.now_ms)
        self._leader_log_grew()
        return offset

    def _resign_if_removed(self) -> None:
        """A leader whose removal has committed steps down."""
        if (
            self.state == State.LEADER
            and not self.is_voter
            and self.high_watermark > self.voter_history.last_offset
        ):
            self._become_resigned()
