"""Single transitions of the Raft core, a few lines each (h11 style)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from odradek.raft import messages as M
from odradek.raft.config import InvalidVoters, RaftConfig, VoterSet, parse_voters
from odradek.raft.core import InvalidSnapshotId, NotLeaderError, RaftCore
from odradek.raft.effects import (
    Effect,
    HighWatermarkAdvanced,
    LeaderChanged,
    PersistElectionState,
    Send,
    SnapshotInstalled,
)
from odradek.raft.log import (
    InMemoryRaftLog,
    OffsetAndEpoch,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from odradek.raft.state import (
    ElectionState,
    State,
    decode_quorum_state,
    encode_quorum_state,
    read_quorum_state,
    write_quorum_state,
)

CONFIG = RaftConfig(voters=VoterSet.of(1, 2, 3))


def make(
    node_id: int = 1,
    election: ElectionState | None = None,
    log: InMemoryRaftLog | None = None,
    config: RaftConfig = CONFIG,
    now_ms: int = 0,
) -> tuple[RaftCore, list[Effect]]:
    core = RaftCore(
        node_id, config, log or InMemoryRaftLog(), election or ElectionState(), random.Random(1)
    )
    return core, core.start(now_ms)


def sends(effects: list[Effect]) -> list[M.Envelope]:
    return [e.envelope for e in effects if isinstance(e, Send)]


def bodies(effects: list[Effect], kind: type) -> list:
    return [env.body for env in sends(effects) if isinstance(env.body, kind)]


def deliver(core: RaftCore, src: int, body: M.Body, now_ms: int = 0, cid: int = 0) -> list[Effect]:
    return core.handle(M.Envelope(src, core.node_id, cid, body), now_ms)


def elect(core: RaftCore, now_ms: int = 5000) -> list[Effect]:
    """Drive node `core` (fresh, epoch 0) to Leader of epoch 1 with node 2's votes."""
    core.tick(now_ms)
    assert core.state == State.PROSPECTIVE
    deliver(core, 2, M.VoteResponse(M.NONE, -1, core.epoch, True, pre_vote=True), now_ms)
    assert core.state == State.CANDIDATE
    return deliver(core, 2, M.VoteResponse(M.NONE, -1, core.epoch, True), now_ms)


def follower_of_2(log: InMemoryRaftLog | None = None) -> RaftCore:
    core, _ = make(election=ElectionState(1, leader_id=2), log=log)
    assert core.state == State.FOLLOWER
    return core


def fetch_cid(effects: list[Effect]) -> int:
    return [e for e in sends(effects) if isinstance(e.body, M.FetchRequest)][-1].correlation_id


# -- elections ----------------------------------------------------------------------------
def test_unattached_voter_turns_prospective_after_election_timeout_without_new_epoch() -> None:
    core, _ = make()
    assert core.tick(999) == [] and core.state == State.UNATTACHED
    effects = core.tick(2001)
    assert core.state == State.PROSPECTIVE and core.epoch == 0
    assert not any(isinstance(e, PersistElectionState) for e in effects)
    votes = bodies(effects, M.VoteRequest)
    assert len(votes) == 2 and all(v.pre_vote and v.replica_epoch == 0 for v in votes)


def test_prospective_with_a_majority_of_pre_votes_becomes_candidate_and_persists_first() -> None:
    core, _ = make()
    core.tick(5000)
    effects = deliver(core, 3, M.VoteResponse(M.NONE, -1, 0, True, pre_vote=True), 5000)
    assert core.state == State.CANDIDATE and core.epoch == 1
    assert effects[0] == PersistElectionState(ElectionState(1, voted_id=1))
    votes = bodies(effects, M.VoteRequest)
    assert {v.pre_vote for v in votes} == {False} and {v.replica_epoch for v in votes} == {1}


def test_candidate_with_a_majority_becomes_leader_and_writes_leader_change() -> None:
    core, _ = make()
    effects = elect(core)
    assert core.state == State.LEADER and core.leader_id == 1
    assert core.log.log_end_offset == 1
    assert LeaderChanged(1, 1) in effects
    assert len(bodies(effects, M.BeginQuorumEpochRequest)) == 2


def test_a_granted_vote_is_persisted_before_the_answer_is_sent() -> None:
    core, _ = make(node_id=2)
    effects = deliver(core, 1, M.VoteRequest(1, 1, 0, 0))
    assert isinstance(effects[-1], Send) and effects[-1].envelope.body.vote_granted  # type: ignore[union-attr]
    persist = [i for i, e in enumerate(effects) if isinstance(e, PersistElectionState)]
    assert persist and persist[-1] < len(effects) - 1
    assert core.election == ElectionState(1, voted_id=1) and core.state == State.VOTED


def test_one_vote_per_epoch() -> None:
    core, _ = make(node_id=2)
    deliver(core, 1, M.VoteRequest(1, 1, 0, 0))
    (answer,) = bodies(deliver(core, 3, M.VoteRequest(1, 3, 0, 0)), M.VoteResponse)
    assert not answer.vote_granted
    (again,) = bodies(deliver(core, 1, M.VoteRequest(1, 1, 0, 0)), M.VoteResponse)
    assert again.vote_granted  # the same candidate asking twice (a duplicate) is fine


def test_vote_refused_to_a_candidate_with_a_shorter_log() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader([b"a", b"b"], epoch=1)
    core, _ = make(node_id=2, election=ElectionState(1), log=log)
    (answer,) = bodies(deliver(core, 1, M.VoteRequest(2, 1, 1, 1)), M.VoteResponse)
    assert not answer.vote_granted and core.epoch == 2
    (pre,) = bodies(deliver(core, 3, M.VoteRequest(2, 3, 1, 1, pre_vote=True)), M.VoteResponse)
    assert not pre.vote_granted


def test_pre_vote_changes_no_state() -> None:
    core, _ = make(node_id=2)
    effects = deliver(core, 1, M.VoteRequest(0, 1, 0, 0, pre_vote=True))
    (answer,) = bodies(effects, M.VoteResponse)
    assert answer.vote_granted and answer.pre_vote
    assert core.election == ElectionState() and core.state == State.UNATTACHED


def test_follower_that_fetched_from_its_leader_refuses_pre_votes() -> None:
    core = follower_of_2()
    (before,) = bodies(deliver(core, 3, M.VoteRequest(1, 3, 0, 0, pre_vote=True)), M.VoteResponse)
    assert before.vote_granted  # KIP-996: no fetch yet, the leader may be gone
    cid = core._in_flight[0]  # type: ignore[index]
    deliver(core, 2, M.FetchResponse(M.NONE, 2, 1, 0, 0, records=core.log.read(0, 100)), cid=cid)
    (after,) = bodies(deliver(core, 3, M.VoteRequest(1, 3, 0, 0, pre_vote=True)), M.VoteResponse)
    assert not after.vote_granted and after.leader_id == 2


def test_prospective_told_of_a_leader_follows_it() -> None:
    core, _ = make()
    core.tick(5000)
    deliver(core, 2, M.VoteResponse(M.NONE, 3, 0, False, pre_vote=True), 5000)
    assert core.state == State.FOLLOWER and core.leader_id == 3


def test_prospective_that_timed_out_on_its_leader_is_not_pulled_back_by_a_pre_vote_answer() -> None:
    core = follower_of_2()
    core.tick(CONFIG.fetch_timeout_ms)
    assert core.state == State.PROSPECTIVE and core.leader_id == 2
    # Node 3 has not timed out on node 2 yet: it refuses and names it.
    now = CONFIG.fetch_timeout_ms
    deliver(core, 3, M.VoteResponse(M.NONE, 2, 1, False, pre_vote=True), now)
    assert core.state == State.PROSPECTIVE
    # A newer epoch's leader still wins.
    deliver(core, 3, M.VoteResponse(M.NONE, 3, 2, False, pre_vote=True), now)
    assert core.state == State.FOLLOWER and core.leader_id == 3 and core.epoch == 2


def test_prospective_that_timed_out_on_its_leader_counts_a_grant_naming_it() -> None:
    core = follower_of_2()
    core.tick(CONFIG.fetch_timeout_ms)
    effects = deliver(
        core, 3, M.VoteResponse(M.NONE, 2, 1, True, pre_vote=True), CONFIG.fetch_timeout_ms
    )
    assert core.state == State.CANDIDATE and core.epoch == 2
    assert len(bodies(effects, M.VoteRequest)) == 2


def test_lost_election_backs_off_then_runs_a_pre_vote_again() -> None:
    core, _ = make()
    core.tick(5000)
    deliver(core, 2, M.VoteResponse(M.NONE, -1, 0, True, pre_vote=True), 5000)
    deliver(core, 2, M.VoteResponse(M.NONE, -1, 1, False), 5000)
    deliver(core, 3, M.VoteResponse(M.NONE, -1, 1, False), 5000)
    assert core.state == State.CANDIDATE
    assert core.next_deadline_ms() <= 5000 + CONFIG.election_backoff_max_ms
    core.tick(core.next_deadline_ms())
    assert core.state == State.PROSPECTIVE and core.epoch == 1


def test_a_higher_epoch_in_any_answer_makes_a_leader_step_down() -> None:
    core, _ = make()
    elect(core)
    deliver(core, 2, M.BeginQuorumEpochResponse(M.NONE, 3, 4), 5000)
    assert core.state == State.FOLLOWER and core.epoch == 4 and core.leader_id == 3


def test_single_voter_elects_itself_at_start() -> None:
    core, effects = make(config=RaftConfig(voters=VoterSet.of(1)))
    assert core.state == State.LEADER and core.epoch == 1
    assert HighWatermarkAdvanced(1) in effects


def test_restarted_leader_resumes_resigned() -> None:
    core, _ = make(election=ElectionState(3, voted_id=1, leader_id=1))
    assert core.state == State.RESIGNED
    with pytest.raises(NotLeaderError):
        core.propose([b"x"], 0)


# -- replication ------------------------------------------------------------------------
def test_high_watermark_needs_a_majority_and_an_entry_of_the_leaders_epoch() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader([b"old"], epoch=0 + 1)  # offset 0, epoch 1, never committed
    core, _ = make(election=ElectionState(1), log=log)
    # Elect in epoch 2: LeaderChange lands at offset 1.
    core.tick(5000)
    deliver(core, 2, M.VoteResponse(M.NONE, -1, 1, True, pre_vote=True), 5000)
    deliver(core, 2, M.VoteResponse(M.NONE, -1, 2, True), 5000)
    assert core.state == State.LEADER and core.high_watermark == 0
    # Node 2 has offset 0 only: a majority holds it, but it is epoch 1's.
    deliver(core, 2, M.FetchRequest(2, 2, 1, 1), 5000)
    assert core.high_watermark == 0
    effects = deliver(core, 2, M.FetchRequest(2, 2, 2, 2), 5000)
    assert core.high_watermark == 2 and HighWatermarkAdvanced(2) in effects


def test_fetch_that_diverges_gets_the_diverging_epoch() -> None:
    core, _ = make()
    elect(core)  # leader of epoch 1, log [LeaderChange@1]
    (answer,) = bodies(deliver(core, 2, M.FetchRequest(2, 1, 3, 0), 5000), M.FetchResponse)
    assert answer.diverging_epoch == OffsetAndEpoch(0, -1)


def test_follower_truncates_to_the_diverging_epoch_and_fetches_again() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader([b"a"], epoch=1)
    log.append_as_leader([b"b", b"c"], epoch=2)
    log.flush()
    core, effects = make(election=ElectionState(3, leader_id=2), log=log)
    diverging = M.FetchResponse(M.NONE, 2, 3, -1, 0, diverging_epoch=OffsetAndEpoch(1, 1))
    effects = deliver(core, 2, diverging, cid=fetch_cid(effects))
    assert log.log_end_offset == 1
    (again,) = bodies(effects, M.FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (1, 1)


def test_follower_appends_and_takes_high_watermark_capped_by_its_log() -> None:
    leader_log = InMemoryRaftLog()
    leader_log.append_as_leader([b"a", b"b", b"c"], epoch=1)
    core = follower_of_2()
    cid = core._in_flight[0]  # type: ignore[index]
    records = leader_log.read(0, 2)  # a small max: 2 bytes, two entries
    effects = deliver(core, 2, M.FetchResponse(M.NONE, 2, 1, 3, 0, records=records), cid=cid)
    assert core.log.log_end_offset == 2 and core.high_watermark == 2
    assert HighWatermarkAdvanced(2) in effects


def test_answer_to_an_old_fetch_is_ignored() -> None:
    core = follower_of_2()
    leader_log = InMemoryRaftLog()
    leader_log.append_as_leader([b"a"], epoch=1)
    deliver(core, 2, M.FetchResponse(M.NONE, 2, 1, 1, 0, records=leader_log.read(0, 9)), cid=99)
    assert core.log.log_end_offset == 0


def test_caught_up_fetch_waits_until_the_leader_appends() -> None:
    core, _ = make()
    elect(core)
    deliver(core, 2, M.FetchRequest(2, 1, 1, 1, max_wait_ms=500), 5000)
    assert bodies(
        deliver(core, 3, M.FetchRequest(3, 1, 1, 1, max_wait_ms=500), 5000), M.FetchResponse
    )
    assert not bodies(
        deliver(core, 2, M.FetchRequest(2, 1, 1, 1, max_wait_ms=500), 5001), M.FetchResponse
    )
    _, effects = core.propose([b"x"], 5002)
    (answer,) = bodies(effects, M.FetchResponse)
    assert answer.records is not None and answer.records.next_offset == 2


def test_follower_without_news_from_its_leader_turns_prospective() -> None:
    core = follower_of_2()
    core.tick(CONFIG.fetch_timeout_ms - 1)
    assert core.state == State.FOLLOWER
    core.tick(CONFIG.fetch_timeout_ms)
    assert core.state == State.PROSPECTIVE and core.epoch == 1


def test_leader_without_a_majority_fetching_resigns_and_ends_its_epoch() -> None:
    core, _ = make()
    elect(core)
    effects = core.tick(5000 + int(1.5 * CONFIG.fetch_timeout_ms) + 1)
    assert core.state == State.RESIGNED
    assert len(bodies(effects, M.EndQuorumEpochRequest)) == 2


def test_end_quorum_epoch_makes_the_first_successor_run_at_once() -> None:
    core = follower_of_2()
    deliver(core, 2, M.EndQuorumEpochRequest(2, 1, (1, 3)), 10)
    core.tick(10)
    assert core.state == State.PROSPECTIVE


def test_fetch_from_an_older_epoch_is_fenced() -> None:
    core, _ = make()
    elect(core)
    (answer,) = bodies(deliver(core, 2, M.FetchRequest(2, 0, 0, 0), 5000), M.FetchResponse)
    assert answer.error_code == M.FENCED_LEADER_EPOCH and answer.leader_id == 1


# -- snapshots -------------------------------------------------------------------------------
def committed_leader() -> RaftCore:
    core, _ = make()
    elect(core)
    core.propose([b"a", b"b", b"c"], 5000)
    deliver(core, 2, M.FetchRequest(2, 1, 4, 1), 5000)
    assert core.high_watermark == 4
    return core


def test_snapshot_must_be_at_or_below_the_high_watermark_and_in_its_epoch() -> None:
    core = committed_leader()
    with pytest.raises(InvalidSnapshotId):
        core.create_snapshot(OffsetAndEpoch(5, 1), b"")
    with pytest.raises(InvalidSnapshotId):
        core.create_snapshot(OffsetAndEpoch(3, 2), b"")
    core.create_snapshot(OffsetAndEpoch(3, 1), b"state")
    assert core.log.log_start_offset == 3


def test_follower_behind_the_log_start_fetches_the_snapshot_in_chunks() -> None:
    core = committed_leader()
    core.create_snapshot(OffsetAndEpoch(3, 1), b"0123456789")
    (answer,) = bodies(deliver(core, 3, M.FetchRequest(3, 1, 0, 0), 5000), M.FetchResponse)
    assert answer.snapshot_id == OffsetAndEpoch(3, 1)

    follower = follower_of_2()
    snap_cfg = RaftConfig(voters=CONFIG.voters, fetch_snapshot_max_bytes=4)
    leader_chunks = RaftCore(1, snap_cfg, core.log, core.election, random.Random(0))
    cid = follower._in_flight[0]  # type: ignore[index]
    effects = deliver(
        follower, 2, M.FetchResponse(M.NONE, 2, 1, 4, 3, snapshot_id=answer.snapshot_id), cid=cid
    )
    for _ in range(3):
        (request,) = bodies(effects, M.FetchSnapshotRequest)
        data = core.log.read_snapshot(request.snapshot_id)
        assert data is not None and leader_chunks.config.fetch_snapshot_max_bytes == 4
        chunk = data[request.position : request.position + 4]
        reply = M.FetchSnapshotResponse(
            M.NONE, 2, 1, request.snapshot_id, len(data), request.position, chunk
        )
        effects = deliver(follower, 2, reply, cid=follower._in_flight[0])  # type: ignore[index]
    assert SnapshotInstalled(OffsetAndEpoch(3, 1)) in effects
    assert follower.log.log_start_offset == 3 and follower.high_watermark == 3
    (fetch,) = bodies(effects, M.FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (3, 1)


def test_fetch_at_the_snapshot_boundary_with_its_epoch_is_valid() -> None:
    core = committed_leader()
    core.create_snapshot(OffsetAndEpoch(3, 1), b"s")
    (answer,) = bodies(deliver(core, 3, M.FetchRequest(3, 1, 3, 1), 5000), M.FetchResponse)
    assert answer.records is not None and answer.records.base_offset == 3


def test_fetch_past_the_snapshot_in_an_epoch_older_than_the_snapshot_gets_the_snapshot() -> None:
    # Found by simulation seed 220: the follower's epoch 0 ends somewhere inside
    # the snapshot, so a diverging epoch would send it below its high watermark.
    core = committed_leader()
    core.create_snapshot(OffsetAndEpoch(3, 1), b"s")
    (answer,) = bodies(deliver(core, 3, M.FetchRequest(3, 1, 4, 0), 5000), M.FetchResponse)
    assert answer.snapshot_id == OffsetAndEpoch(3, 1) and answer.diverging_epoch is None


# -- formats ---------------------------------------------------------------------------------
def test_snapshot_files_are_named_as_kafka_names_them() -> None:
    name = snapshot_file_name(OffsetAndEpoch(1234, 7))
    assert name == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_file_name(name) == OffsetAndEpoch(1234, 7)
    assert parse_snapshot_file_name("00000000000000001234.log") is None


def test_controller_quorum_voters_parse() -> None:
    voters = parse_voters("1@localhost:9093, 2@[::1]:9094,3@h:1")
    assert voters.ids == {1, 2, 3} and voters.majority == 2
    assert voters.addresses[2].host == "::1" and voters.addresses[2].port == 9094
    for bad in ("", "1@h", "x@h:1", "1@h:1,1@h:2"):
        with pytest.raises(InvalidVoters):
            parse_voters(bad)


def test_quorum_state_file_round_trips(tmp_path: Path) -> None:
    state = ElectionState(7, voted_id=2, leader_id=2)
    assert decode_quorum_state(encode_quorum_state(state, [1, 2, 3])) == state
    assert read_quorum_state(tmp_path) == ElectionState()
    write_quorum_state(tmp_path, state, [1, 2, 3])
    assert read_quorum_state(tmp_path) == state
    assert b'"leaderEpoch":7' in (tmp_path / "quorum-state").read_bytes()


def test_in_memory_log_crash_keeps_only_flushed_entries() -> None:
    log = InMemoryRaftLog()
    log.append_as_leader([b"a"], 1)
    log.flush()
    log.append_as_leader([b"b"], 2)
    log.crash()
    assert log.log_end_offset == 1 and log.end_offset_for_epoch(2) == OffsetAndEpoch(1, 1)
