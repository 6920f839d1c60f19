"""Election state: the part of a Raft node that must survive a crash.

`ElectionState` is what KRaft keeps in its ``quorum-state`` file: the current
epoch, whom this node voted for in it, and the leader it knows of. The core
never writes the file; it emits `PersistElectionState` and the shell writes
and fsyncs it before it sends anything that comes after in the same effect
list (a granted vote must not be forgotten by a crash, or a voter could vote
twice in one epoch).

File format (``<metadata.log.dir>/__cluster_metadata-0/quorum-state``), JSON as
Kafka's ``QuorumStateData`` version 0::

    {"clusterId":"","leaderId":2,"leaderEpoch":7,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

Written to ``quorum-state.tmp``, fsynced, renamed over ``quorum-state``, and the
directory fsynced.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path

QUORUM_STATE_FILE = "quorum-state"
NO_ID = -1


class State(enum.Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int = 0
    voted_id: int = NO_ID
    leader_id: int = NO_ID

    def __post_init__(self) -> None:
        assert self.epoch >= 0
        # A node learns a leader only in an epoch where the leader won; its own
        # vote in that epoch may be kept alongside.


def encode_quorum_state(state: ElectionState, voters: list[int], cluster_id: str = "") -> bytes:
    data = {
        "clusterId": cluster_id,
        "leaderId": state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(voters)],
        "data_version": 0,
    }
    return json.dumps(data, separators=(",", ":")).encode()


def decode_quorum_state(raw: bytes) -> ElectionState:
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("quorum-state is not a JSON object")  # noqa: TRY004 - bad file content
    return ElectionState(
        epoch=int(data.get("leaderEpoch", 0)),
        voted_id=int(data.get("votedId", NO_ID)),
        leader_id=int(data.get("leaderId", NO_ID)),
    )


def write_quorum_state(dir: Path, state: ElectionState, voters: list[int]) -> None:
    path = dir / QUORUM_STATE_FILE
    tmp = dir / (QUORUM_STATE_FILE + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode_quorum_state(state, voters))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_quorum_state(dir: Path) -> ElectionState:
    try:
        raw = (dir / QUORUM_STATE_FILE).read_bytes()
    except FileNotFoundError:
        return ElectionState()
    return decode_quorum_state(raw)
