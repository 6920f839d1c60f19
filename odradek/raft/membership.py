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
