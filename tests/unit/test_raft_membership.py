"""KIP-853 changes in the Raft core, one rule a test: Kafka's errors, one change
at a time, the new voter caught up, directory ids, the removed leader resigning."""

from __future__ import annotations

import random

import pytest

from odradek.raft import messages as M
from odradek.raft.config import RaftConfig, VoterAddress, VoterSet
from odradek.raft.core import RaftCore, VoterChangeError
from odradek.raft.effects import Send
from odradek.raft.log import InMemoryRaftLog
from odradek.raft.state import ElectionState, State

D1, D2, D3 = "J8aAPcfLQt2bqs1JT_rMgQ", "b3w6nfvIR_Gq3a6sIoXJzw", "AAAAAAAAAAAAAAAAAAAABw"
ADDR2 = VoterAddress(2, "127.0.0.1", 9002)


def leader(kraft_version: int = 1) -> RaftCore:
    """Node 1 alone, leading (it elects itself at start)."""
    voters = VoterSet(frozenset({1}), {1: VoterAddress(1, "127.0.0.1", 9001)}, {1: D1})
    config = RaftConfig(voters=voters, kraft_version=kraft_version, election_timeout_ms=100,
                        fetch_timeout_ms=200)
    core = RaftCore(1, config, InMemoryRaftLog(), ElectionState(), random.Random(1))
    core.start(0)
    assert core.state == State.LEADER and core.high_watermark == core.log.log_end_offset
    return core


def observer_fetch(core: RaftCore, node: int, directory: str, offset: int, now: int = 10):
    body = M.FetchRequest(node, core.epoch, offset, core.log.last_fetched_epoch(), 0, directory)
    return core.handle(M.Envelope(node, 1, 0, body), now)


def code(call) -> int:
    with pytest.raises(VoterChangeError) as e:
        call()
    return e.value.error_code


def test_static_quorum_cannot_change():
    core = leader(kraft_version=0)
    assert code(lambda: core.add_voter(2, D2, ADDR2, 1)) == M.UNSUPPORTED_VERSION


def test_the_leader_writes_the_voters_into_the_log_at_its_epoch_start():
    core = leader()
    assert core.voter_history.last_offset >= 0  # KRaftVersion + Voters after LeaderChange


def test_add_needs_a_caught_up_observer_with_that_directory():
    core = leader()
    assert code(lambda: core.add_voter(1, D1, None, 1)) == M.DUPLICATE_VOTER
    assert code(lambda: core.add_voter(2, D2, ADDR2, 1)) == M.REQUEST_TIMED_OUT  # never fetched
    observer_fetch(core, 2, D2, 0)
    assert code(lambda: core.add_voter(2, D2, ADDR2, 11)) == M.REQUEST_TIMED_OUT  # behind
    observer_fetch(core, 2, D2, core.log.log_end_offset, 12)
    assert code(lambda: core.add_voter(2, D3, ADDR2, 13)) == M.REQUEST_TIMED_OUT  # other dir
    offset, _ = core.add_voter(2, D2, ADDR2, 14)
    assert core.voters.ids == {1, 2} and core.voters.directory_ids[2] == D2
    # the new set counts at once: one voter of two has it, not committed
    assert core.high_watermark <= offset
    # one change at a time
    assert code(lambda: core.remove_voter(2, D2, 15)) == M.REQUEST_TIMED_OUT
    observer_fetch(core, 2, D2, core.log.log_end_offset, 16)
    assert core.high_watermark > offset


def test_a_wiped_voter_does_not_count_and_remove_checks_the_directory():
    core = leader()
    observer_fetch(core, 2, D2, core.log.log_end_offset)
    core.add_voter(2, D2, ADDR2, 11)
    observer_fetch(core, 2, D2, core.log.log_end_offset, 12)
    hw = core.high_watermark
    core.propose([b"x"], 13)
    observer_fetch(core, 2, D3, core.log.log_end_offset, 14)  # same id, new disk
    assert core.high_watermark == hw  # not counted for voter (2, D2)
    assert code(lambda: core.remove_voter(2, D3, 15)) == M.VOTER_NOT_FOUND
    assert code(lambda: core.remove_voter(9, D3, 15)) == M.VOTER_NOT_FOUND


def test_a_removed_leader_resigns_once_the_removal_commits():
    core = leader()
    observer_fetch(core, 2, D2, core.log.log_end_offset)
    core.add_voter(2, D2, ADDR2, 11)
    observer_fetch(core, 2, D2, core.log.log_end_offset, 12)
    offset, _ = core.remove_voter(1, D1, 13)
    assert core.state == State.LEADER and core.voters.ids == {2}
    effects = observer_fetch(core, 2, D2, core.log.log_end_offset, 14)
    assert core.high_watermark > offset and core.state == State.RESIGNED
    ends = [e.envelope for e in effects if isinstance(e, Send)
            and isinstance(e.envelope.body, M.EndQuorumEpochRequest)]
    assert [e.dst for e in ends] == [2]
    assert code(lambda: core.add_voter(3, D3, None, 15)) == M.NOT_LEADER_OR_FOLLOWER
