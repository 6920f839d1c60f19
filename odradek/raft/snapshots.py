"""Snapshots in the Raft core: creating one, and both sides of FetchSnapshot (KIP-630).

A follower told by a Fetch answer that its offset is below the leader's log
start fetches the snapshot in chunks (replication.py sends the requests while
a snapshot fetch is pending), installs it and fetches on from its end. A part
of `RaftCore` over the shared state in node.py.
"""

from __future__ import annotations

from . import messages as M
from .effects import SnapshotInstalled
from .log import OffsetAndEpoch
from .node import RaftNode


class InvalidSnapshotId(ValueError):
    pass


class Snapshots(RaftNode):
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

    # -- the leader's side of FetchSnapshot ---------------------------------------------
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

    # -- the follower's side of FetchSnapshot -------------------------------------------
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
            self._load_voters()
            self._out.append(SnapshotInstalled(snapshot_id))
            self._advance_high_watermark(snapshot_id.offset)
        self._send_fetch()
