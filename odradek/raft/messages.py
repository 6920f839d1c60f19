"""The messages the Raft core consumes and produces, named as in KIP-595/996.

These are the fields of Kafka's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch
and FetchSnapshot RPCs that the quorum protocol uses, one partition
(``__cluster_metadata-0``) only. The shell translates them to and from kio's
wire types; the simulator passes them as they are. Every request travels in
an `Envelope` with a correlation id; a response carries the id of the request
it answers, so late and duplicated answers can be told from current ones.

Records in a Fetch response are opaque to the core: whatever the log's
`read` returned, handed to the follower's log as it is (`RecordsSlice`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import VoterAddress
from .log import OffsetAndEpoch, RecordsSlice

NO_LEADER = -1
NO_EPOCH = -1

# Kafka error codes (the protocol guide's numbers).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INVALID_VOTER_KEY = 125
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127


@dataclass(frozen=True, slots=True)
class VoteRequest:
    replica_epoch: int  # the candidate's epoch; a pre-vote sends its current epoch
    replica_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False
    # KIP-853 (Vote v1+): the voter the request is meant for, as the sender's
    # voter set knows it; a receiver with another id or directory id answers
    # INVALID_VOTER_KEY. -1: not sent (an older sender); "" : no directory id.
    voter_id: int = NO_LEADER
    voter_directory_id: str = ""
    candidate_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    voter_id: int = NO_LEADER  # KIP-853, as in VoteRequest
    voter_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    # KIP-853 (Fetch v17): the fetcher's metadata log dir, so a leader does not
    # take a wiped and re-formatted node for the voter it replaced
    replica_directory_id: str = ""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1  # -1: the leader does not know it yet
    log_start_offset: int = 0
    records: RecordsSlice | None = None
    diverging_epoch: OffsetAndEpoch | None = None  # (end_offset, epoch) to truncate to
    snapshot_id: OffsetAndEpoch | None = None  # fetch this snapshot instead


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch | None = None
    size: int = 0
    position: int = 0
    unaligned_records: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """KIP-853's UpdateRaftVoter, sent by a voter to its leader: the endpoint
    (and kraft.version range, always 0-1 here) this node has now."""
    voter_id: int
    voter_directory_id: str
    current_leader_epoch: int
    address: VoterAddress


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | UpdateVoterRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | UpdateVoterResponse
)
Body = Request | Response
REQUEST_TYPES = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    UpdateVoterRequest,
)


@dataclass(frozen=True, slots=True)
class Envelope:
    src: int
    dst: int
    correlation_id: int
    body: Body

    @property
    def is_request(self) -> bool:
        return isinstance(self.body, REQUEST_TYPES)
