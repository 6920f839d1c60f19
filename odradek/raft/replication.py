"""Replication: both sides of the pull-based Fetch, the high watermark, check quorum.

The leader validates a follower's (fetch offset, last fetched epoch) against its
log and answers with records, a diverging epoch or a snapshot id, parks a
caught-up fetch up to its max wait, and moves the high watermark to what a
majority of voters has; it resigns without fetches from a majority for 1.5 x
the fetch timeout. The follower keeps one Fetch in flight, truncates on a
diverging epoch and appends what the leader sends. A part of `RaftCore` over
the shared state in node.py.
"""

from __future__ import annotations

from . import messages as M
from .leader_state import LeaderState, ParkedFetch
from .node import RaftNode
from .state import State
from .voters import ZERO_UUID

FETCH_RETRY_BACKOFF_MS = 50  # after an error answer, before the next Fetch
CHECK_QUORUM_FACTOR = 1.5  # Kafka's leader resigns after 1.5 x fetch timeout without a majority


class Replication(RaftNode):
    # -- the leader's side of Fetch ---------------------------------------------------------
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
            if self._is_voter_key(envelope.src, req.replica_directory_id):
                leader.heard_from(envelope.src, self.now_ms)
            self._reply(envelope, answer)
            return
        leader.update_replica(
            envelope.src, req.fetch_offset, self.now_ms, self.log.log_end_offset,
            req.replica_directory_id, self._is_voter_key(envelope.src, req.replica_directory_id),
        )
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

    def _is_voter_key(self, node_id: int, directory_id: str) -> bool:
        """KIP-853's voter key: a voter's fetch counts only from the directory
        the voter set names (a node that lost its disk has a new one)."""
        known = self.voters.directory_ids.get(node_id, ZERO_UUID)
        return node_id in self.voters and (
            not directory_id or known in (ZERO_UUID, directory_id))

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

    def _discover_leader(self) -> None:
        """An observer that knows no leader (a node being added, a removed
        leader) asks a voter: the answer names the leader (Kafka's observers
        fetch from controller.quorum.bootstrap.servers the same way)."""
        self._reset_election_timer()
        others = sorted(self.voters.ids - {self.node_id}) or list(self.config.bootstrap_ids)
        if not others:
            return
        body = M.FetchRequest(
            self.node_id, self.epoch, self.log.log_end_offset, self.log.last_fetched_epoch(), 0,
            self.config.directory_id,
        )
        self._send(self.rng.choice(others), body)

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
                self.config.directory_id,
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
            self._log_truncated()
        elif resp.snapshot_id is not None:
            self._snapshot_fetch = (resp.snapshot_id, bytearray())
        elif (
            resp.records is not None
            and resp.records.base_offset == expected_offset == log.log_end_offset
        ):
            if resp.records.next_offset > resp.records.base_offset:
                log.append_as_follower(resp.records)
                log.flush()
                self._log_appended(resp.records.base_offset)
            if resp.high_watermark >= 0:
                self._advance_high_watermark(min(resp.high_watermark, log.log_end_offset))
        self._send_fetch()
