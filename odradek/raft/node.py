"""The state a Raft node's parts share, and the plumbing they all use.

`RaftCore` (core.py) is one state machine written in parts, each a class over
`RaftNode`: `election.py` (the states and their transitions, Vote,
BeginQuorumEpoch, EndQuorumEpoch), `replication.py` (both sides of Fetch, the
high watermark, check quorum), `snapshots.py` (creating a snapshot and both
sides of FetchSnapshot). `RaftNode` holds every field of the node's state, the
effects being collected, time, sending and persisting; where one part calls
into another, the method is declared here (raising NotImplementedError) and
defined by the part that owns it, so each part imports only this module.

Nothing here reads a clock, a socket or a random source of its own (see
core.py's theory of operation).
"""

from __future__ import annotations

import random

from . import messages as M
from .config import RaftConfig, VoterSet
from .effects import Effect, HighWatermarkAdvanced, PersistElectionState, Send
from .leader_state import LeaderState
from .log import OffsetAndEpoch, RaftLog
from .state import ElectionState, State
from .voters import ZERO_UUID, VoterHistory, base_of_snapshot


class RaftNode:
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
        self.log = log
        # KIP-853: the voters are the latest VotersRecord in the log (or its
        # snapshot), else the configured static set (voters.py).
        self.voter_history = VoterHistory(config.voters, config.kraft_version)
        self._load_voters()
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
        # Follower voter: when it next compares its voter set entry with its
        # own endpoint (KIP-853 UpdateRaftVoter, membership.py)
        self._update_voter_due_ms = 0

    @property
    def voters(self) -> VoterSet:
        """The latest voter set in the log, with one exception: a node (not
        leading) that the latest, uncommitted as far as it knows, VotersRecord
        removed still takes part in elections under the set before it. A
        removed leader that crashed before its removal committed may hold the
        longest log, and the voters left need it to elect one of them; the
        two sets differ by one voter, so their majorities intersect."""
        history = self.voter_history
        latest = history.latest()
        if self.node_id in latest or self.state == State.LEADER:
            return latest
        previous = history.at(history.last_offset - 1)
        if self.node_id in previous and history.last_offset >= self.high_watermark:
            return previous
        return latest

    def _load_voters(self) -> None:
        """The voter history from the snapshot the log starts at and the log."""
        log = self.log
        snapshot_id = log.latest_snapshot_id()
        if snapshot_id is not None:
            base, version = base_of_snapshot(
                log.snapshot_control_entries(snapshot_id), self.config.voters
            )
            self.voter_history.reset(base, max(version, self.config.kraft_version))
        self.voter_history.add_entries(
            log.control_entries(log.log_start_offset, log.log_end_offset)
        )

    def _log_appended(self, start: int) -> None:
        """Entries from `start` were appended: learn the VotersRecords among them."""
        self.voter_history.add_entries(self.log.control_entries(start, self.log.log_end_offset))

    def _log_truncated(self) -> None:
        self.voter_history.truncate(self.log.log_end_offset)

    @property
    def epoch(self) -> int:
        return self.election.epoch

    @property
    def leader_id(self) -> int:
        return self.election.leader_id

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    # -- time and plumbing ------------------------------------------------------------
    def _set_time(self, now_ms: int) -> None:
        assert now_ms >= self.now_ms, f"time went back: {now_ms} < {self.now_ms}"
        self.now_ms = now_ms

    def _drain(self) -> list[Effect]:
        self._resign_if_removed()
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

    def _is_local_key(self, voter_id: int, directory_id: str) -> bool:
        """A request's voter key (KIP-853) names this replica: no key (an
        older sender), or this node's id and no or this node's directory id."""
        if voter_id < 0:
            return True
        if voter_id != self.node_id:
            return False
        return directory_id in ("", ZERO_UUID) or directory_id == self.config.directory_id

    def _leader_error(self, current_leader_epoch: int) -> int:
        """The error a leader-only request gets here, NONE if this node may serve it."""
        if current_leader_epoch < self.epoch:
            return M.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.epoch:
            return M.UNKNOWN_LEADER_EPOCH
        if self.state != State.LEADER:
            return M.NOT_LEADER_OR_FOLLOWER
        return M.NONE

    # -- what one part asks of another (each is defined by the part named) -------------
    def _observe(self, epoch: int, leader_id: int) -> bool:  # election.py
        raise NotImplementedError

    def _become_resigned(self) -> None:  # election.py
        raise NotImplementedError

    def _send_begin_quorum_epoch(self, voter: int) -> None:  # election.py
        raise NotImplementedError

    def _send_fetch(self) -> None:  # replication.py
        raise NotImplementedError

    def _resign_if_removed(self) -> None:  # membership.py
        raise NotImplementedError

    def _schedule_update_voter(self) -> None:  # membership.py
        raise NotImplementedError

    def _reset_check_quorum(self, leader: LeaderState) -> None:  # replication.py
        raise NotImplementedError

    def _leader_log_grew(self) -> None:  # replication.py
        raise NotImplementedError

    def _take_in_flight(self, envelope: M.Envelope, leader_epoch: int) -> bool:  # replication.py
        raise NotImplementedError

    def _retry_fetch_later(self) -> None:  # replication.py
        raise NotImplementedError
