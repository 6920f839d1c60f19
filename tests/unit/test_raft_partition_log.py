"""The Raft core over real partition logs (metadata/raft_log.py): three voters
elect a leader and replicate proposals into identical batches, with every
message delivered in order by a small pump and time driven by hand."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

from odradek.metadata.raft_log import PartitionRaftLog
from odradek.protocol import records as batches
from odradek.raft.config import RaftConfig, VoterSet
from odradek.raft.core import RaftCore
from odradek.raft.effects import Send
from odradek.raft.state import ElectionState
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

VOTERS = (1, 2, 3)
MAX_STEPS = 10_000


def _log(path: Path) -> PartitionRaftLog:
    return PartitionRaftLog(PartitionLog.open(path, "__cluster_metadata", 0, LogConfig(),
                                              uuid.UUID(int=1)))


class Pump:
    def __init__(self, tmp: Path, seed: int) -> None:
        config = RaftConfig(voters=VoterSet.of(*VOTERS))
        self.logs = {n: _log(tmp / f"node-{n}") for n in VOTERS}
        self.cores = {n: RaftCore(n, config, self.logs[n], ElectionState(), random.Random(seed + n))
                      for n in VOTERS}
        self.down: set[int] = set()
        self.now_ms = 0
        self.queue: list[Send] = []
        for core in self.cores.values():
            self._take(core.start(self.now_ms))

    def _take(self, effects: list[object]) -> None:
        self.queue += [e for e in effects if isinstance(e, Send)]

    def run(self, until: object, step_ms: int = 10) -> None:
        for _ in range(MAX_STEPS):
            if until():  # type: ignore[operator]
                return
            while self.queue:
                send = self.queue.pop(0)
                dst = send.envelope.dst
                if dst in self.down or send.envelope.src in self.down:
                    continue
                self._take(self.cores[dst].handle(send.envelope, self.now_ms))
            self.now_ms += step_ms
            for n, core in self.cores.items():
                if n not in self.down:
                    self._take(core.tick(self.now_ms))
        raise AssertionError("did not get there")

    def leader(self) -> int | None:
        leaders = [n for n, c in self.cores.items()
                   if n not in self.down and c.state.name == "LEADER"]
        return leaders[0] if leaders else None


def _values(log: PartitionRaftLog) -> list[bytes]:
    data = log.read(0, 1 << 20).payload
    assert isinstance(data, bytes)
    return [r.value or b"" for h in batches.iter_batch_headers(data) if not h.is_control
            for r in batches.decode_batch_records(data, h)]


def test_three_voters_elect_a_leader_and_replicate_proposals(tmp_path: Path) -> None:
    pump = Pump(tmp_path, 1)
    pump.run(lambda: pump.leader() is not None)
    leader = pump.leader()
    assert leader is not None
    last, effects = pump.cores[leader].propose([b"a", b"b"], pump.now_ms)
    pump._take(effects)
    pump.run(lambda: all(c.high_watermark > last for c in pump.cores.values()))
    for log in pump.logs.values():
        assert _values(log) == [b"a", b"b"]
    ends = {log.log_end_offset for log in pump.logs.values()}
    assert len(ends) == 1


def test_kip853_voters_are_read_back_from_the_log_and_the_snapshot(tmp_path):
    """A standalone voter (bootstrap snapshot 0-0) adds voter 2; a new core over
    the same files knows {1, 2} from the log, and after a snapshot that carries
    the voters and a cut log, from the snapshot."""
    from odradek.cli.storage import write_bootstrap_snapshot
    from odradek.metadata import image as img
    from odradek.metadata import snapshots as S
    from odradek.raft.config import VoterAddress
    from odradek.raft.log import OffsetAndEpoch
    from odradek.raft.messages import Envelope, FetchRequest
    from odradek.raft.voters import KRAFT_VERSION, KRAFT_VOTERS, encode_kraft_version, encode_voters

    d1, d2 = "J8aAPcfLQt2bqs1JT_rMgQ", "b3w6nfvIR_Gq3a6sIoXJzw"
    one = VoterSet(frozenset({1}), {1: VoterAddress(1, "127.0.0.1", 9001)}, {1: d1})
    write_bootstrap_snapshot(tmp_path, one)
    path = tmp_path / "__cluster_metadata-0"
    unknown = RaftConfig(voters=VoterSet(frozenset()), kraft_version=1)

    def open_core() -> RaftCore:
        core = RaftCore(1, unknown, _log(path), ElectionState(), random.Random(1))
        core.start(0)
        return core

    core = open_core()
    assert core.voters.ids == {1} and core.voters.directory_ids == {1: d1}
    leo = core.log.log_end_offset
    core.handle(Envelope(2, 1, 0, FetchRequest(2, core.epoch, leo, core.epoch, 0, d2)), 1)
    offset, _ = core.add_voter(2, d2, VoterAddress(2, "127.0.0.1", 9002), 2)
    core.handle(Envelope(2, 1, 1, FetchRequest(2, core.epoch, offset + 1, core.epoch, 0, d2)), 3)
    assert core.high_watermark > offset
    core.log.flush()

    again = open_core()  # a restart: the VotersRecord is read back from the log
    assert again.voters.ids == {1, 2} and again.voters.directory_ids[2] == d2
    assert again.voters.addresses[2].port == 9002

    end = again.log.log_end_offset
    snap = OffsetAndEpoch(end, again.log.last_fetched_epoch())
    controls = [(KRAFT_VERSION, encode_kraft_version(1)),
                (KRAFT_VOTERS, encode_voters(again.voter_history.at(end - 1)))]
    again.log.create_snapshot(snap, S.encode(img.MetadataImage(), snap, controls))
    plog = again.log.plog  # type: ignore[attr-defined]
    plog.truncate_fully_and_start_at(end)  # only the snapshot is left
    third = RaftCore(1, unknown, _log(path), ElectionState(), random.Random(1))
    assert third.voters.ids == {1, 2} and third.voter_history.kraft_version == 1
