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


def _voter(node: int, directory: str, voters: VoterSet) -> RaftCore:
    config = RaftConfig(voters=voters, kraft_version=1, election_timeout_ms=100,
                        fetch_timeout_ms=200, directory_id=directory)
    core = RaftCore(node, config, InMemoryRaftLog(), ElectionState(), random.Random(node))
    core.start(0)
    return core


def _answers(effects) -> list:
    return [e.envelope.body for e in effects if isinstance(e, Send)]


def test_vote_and_begin_quorum_epoch_check_the_voter_key():
    voters = VoterSet(frozenset({1, 2, 3}), {}, {1: D1, 2: D2, 3: D3})
    wiped = _voter(2, "Zm9ybWF0dGVkQWdhaW4xMQ", voters)  # node 2, re-formatted
    vote = M.VoteRequest(1, 1, 0, 0, voter_id=2, voter_directory_id=D2,
                         candidate_directory_id=D1)
    [answer] = _answers(wiped.handle(M.Envelope(1, 2, 0, vote), 1))
    assert (answer.error_code, answer.vote_granted) == (M.INVALID_VOTER_KEY, False)
    assert wiped.election.voted_id == -1  # no vote cast
    # a request meant for another node id is refused the same way; no key: as before
    other = M.VoteRequest(1, 1, 0, 0, voter_id=3, voter_directory_id=D3)
    assert _answers(wiped.handle(M.Envelope(1, 2, 1, other), 2))[0].error_code == (
        M.INVALID_VOTER_KEY)
    keyless = M.VoteRequest(1, 1, 0, 0)
    [answer] = _answers(wiped.handle(M.Envelope(1, 2, 2, keyless), 3))
    assert (answer.error_code, answer.vote_granted) == (M.NONE, True)
    # the node with the right directory votes; the candidate sends each voter its key
    node3 = _voter(3, D3, voters)
    ok = M.VoteRequest(2, 1, 0, 0, voter_id=3, voter_directory_id=D3)
    [answer] = _answers(node3.handle(M.Envelope(1, 3, 0, ok), 1))
    assert (answer.error_code, answer.vote_granted) == (M.NONE, True)
    node1 = _voter(1, D1, voters)
    sent = [e.envelope for e in node1.tick(10_000) if isinstance(e, Send)]
    assert {(s.dst, s.body.voter_id, s.body.voter_directory_id) for s in sent} == {
        (2, 2, D2), (3, 3, D3)}
    # BeginQuorumEpoch: the wiped node follows the leader but answers INVALID_VOTER_KEY
    begin = M.BeginQuorumEpochRequest(1, 5, voter_id=2, voter_directory_id=D2)
    answers = _answers(wiped.handle(M.Envelope(1, 2, 3, begin), 4))
    assert [a.error_code for a in answers if isinstance(a, M.BeginQuorumEpochResponse)] == [
        M.INVALID_VOTER_KEY]
    assert wiped.leader_id == 1 and wiped.epoch == 5


def test_a_voter_whose_endpoint_changed_sends_update_raft_voter_and_the_leader_applies_it():
    moved = VoterAddress(2, "127.0.0.1", 9102)
    voters = VoterSet(frozenset({1, 2}), {1: VoterAddress(1, "127.0.0.1", 9001), 2: ADDR2},
                      {1: D1, 2: D2})
    config = RaftConfig(voters=voters, kraft_version=1, election_timeout_ms=100,
                        fetch_timeout_ms=200, directory_id=D2, local_address=moved)
    follower = RaftCore(2, config, InMemoryRaftLog(), ElectionState(), random.Random(2))
    follower.start(0)
    pending = follower.handle(M.Envelope(1, 2, 0, M.BeginQuorumEpochRequest(1, 1, 2, D2)), 1)
    assert follower.state == State.FOLLOWER

    def run_until(node: RaftCore, end_ms: int, start_ms: int) -> list[M.Envelope]:
        """Tick every 50 ms, the leader answering each Fetch (empty, hw 0)."""
        nonlocal pending
        sent = []
        for now in range(start_ms, end_ms + 1, 50):
            effects, pending = pending + node.tick(now), []
            for e in effects:
                if not isinstance(e, Send):
                    continue
                if isinstance(e.envelope.body, M.FetchRequest):
                    pending += node.handle(M.Envelope(1, 2, e.envelope.correlation_id,
                                                      M.FetchResponse(M.NONE, 1, 1, 0, 0)), now)
                elif isinstance(e.envelope.body, M.UpdateVoterRequest):
                    sent.append(e.envelope)
            assert node.state == State.FOLLOWER
        return sent

    assert run_until(follower, 550, 50) == []  # a few fetch rounds first (3 fetch timeouts)
    [sent] = run_until(follower, 650, 600)
    assert sent.dst == 1 and sent.body == M.UpdateVoterRequest(2, D2, 1, moved)
    assert run_until(follower, 1150, 700) == []  # once a period

    # the leader appends the new entry and answers at once
    core = leader()
    observer_fetch(core, 2, D2, core.log.log_end_offset)
    core.add_voter(2, D2, ADDR2, 11)
    observer_fetch(core, 2, D2, core.log.log_end_offset, 12)
    request = M.UpdateVoterRequest(2, D2, core.epoch, moved)
    [answer] = _answers(core.handle(M.Envelope(2, 1, 5, request), 13))
    assert answer == M.UpdateVoterResponse(M.NONE, 1, core.epoch)
    assert core.voters.addresses[2] == moved
    stale = M.UpdateVoterRequest(2, D2, core.epoch - 1, moved)
    [answer] = _answers(core.handle(M.Envelope(2, 1, 6, stale), 14))
    assert answer.error_code == M.FENCED_LEADER_EPOCH
    # a voter whose entry is current sends nothing
    same = RaftCore(2, RaftConfig(voters=voters, kraft_version=1, election_timeout_ms=100,
                                  fetch_timeout_ms=200, directory_id=D2, local_address=ADDR2),
                    InMemoryRaftLog(), ElectionState(), random.Random(2))
    same.start(0)
    pending = same.handle(M.Envelope(1, 2, 0, M.BeginQuorumEpochRequest(1, 1)), 1)
    assert run_until(same, 1000, 50) == []
