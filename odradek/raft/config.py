"""Raft configuration: Kafka's `controller.quorum.*` keys, verbatim.

`controller.quorum.voters` is a static voter set, as in KIP-595
(``1@host1:9093,2@host2:9093,3@host3:9093``): kraft.version 0. With
kraft.version 1 (KIP-853) the voter set is kept in the log instead
(`voters.py`); a `VoterSet` then also knows each voter's directory id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

ELECTION_TIMEOUT_MS = "controller.quorum.election.timeout.ms"
FETCH_TIMEOUT_MS = "controller.quorum.fetch.timeout.ms"
ELECTION_BACKOFF_MAX_MS = "controller.quorum.election.backoff.max.ms"
REQUEST_TIMEOUT_MS = "controller.quorum.request.timeout.ms"
VOTERS = "controller.quorum.voters"
FETCH_MAX_WAIT_MS = "controller.quorum.fetch.max.wait.ms"  # odradek's name; Kafka hard-codes 500
FETCH_MAX_BYTES = "controller.quorum.fetch.max.bytes"  # odradek's name; Kafka uses 8 MiB
FETCH_SNAPSHOT_MAX_BYTES = "controller.quorum.fetch.snapshot.max.bytes"  # odradek's name


class InvalidVoters(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class VoterAddress:
    node_id: int
    host: str
    port: int
    listener: str = "CONTROLLER"


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters of the quorum; every other node is an observer."""

    ids: frozenset[int]
    addresses: Mapping[int, VoterAddress] = field(default_factory=dict)
    directory_ids: Mapping[int, str] = field(default_factory=dict)  # KIP-853; none when static

    @classmethod
    def of(cls, *ids: int) -> VoterSet:
        return cls(frozenset(ids))

    @property
    def majority(self) -> int:
        return len(self.ids) // 2 + 1

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def with_voter(
        self, node_id: int, directory_id: str, address: VoterAddress | None
    ) -> VoterSet:
        addresses = dict(self.addresses)
        if address is not None:
            addresses[node_id] = address
        return VoterSet(self.ids | {node_id}, addresses, {**self.directory_ids, node_id: directory_id})

    def without_voter(self, node_id: int) -> VoterSet:
        return VoterSet(
            self.ids - {node_id},
            {k: v for k, v in self.addresses.items() if k != node_id},
            {k: v for k, v in self.directory_ids.items() if k != node_id},
        )


def parse_voters(text: str) -> VoterSet:
    """``controller.quorum.voters``: ``id@host:port`` separated by commas."""
    addresses: dict[int, VoterAddress] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, at, rest = item.partition("@")
        host, colon, port = rest.rpartition(":")
        if not at or not colon or not host:
            raise InvalidVoters(f"{VOTERS}: expected id@host:port, got {item!r}")
        try:
            node_id, port_number = int(node), int(port)
        except ValueError:
            raise InvalidVoters(f"{VOTERS}: expected id@host:port, got {item!r}") from None
        if node_id < 0 or node_id in addresses:
            raise InvalidVoters(f"{VOTERS}: bad or repeated node id in {item!r}")
        addresses[node_id] = VoterAddress(node_id, host.strip("[]"), port_number)
    if not addresses:
        raise InvalidVoters("the voter set is empty")
    return VoterSet(frozenset(addresses), addresses)


@dataclass(frozen=True, slots=True)
class RaftConfig:
    voters: VoterSet
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    fetch_snapshot_max_bytes: int = 1024 * 1024
    # Bounds (STYLE: every queue has one). Proposals the leader accepts into
    # one append; entries returned by one in-memory read.
    max_records_per_append: int = 10_000
    # KIP-853: 1 when the voters live in the log (formatted with --standalone
    # or --initial-controllers); a log's own KRaftVersionRecord also says so.
    kraft_version: int = 0
    # KIP-853: controller.quorum.bootstrap.servers, addressed as -1, -2, ...
    # (their node ids are unknown) by an observer looking for the leader.
    bootstrap_ids: tuple[int, ...] = ()
    directory_id: str = ""  # this node's metadata log dir (meta.properties), KIP-853
    # KIP-853: this node's controller endpoint; a voter whose entry in the voter
    # set differs sends UpdateRaftVoter to its leader (membership.py)
    local_address: VoterAddress | None = None

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.election_backoff_max_ms < 0 or self.fetch_max_wait_ms < 0:
            raise ValueError("backoff and wait must not be negative")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RaftConfig:
        def get(key: str, default: int) -> int:
            return int(props[key]) if key in props else default

        return cls(
            voters=parse_voters(props.get(VOTERS, "")),
            election_timeout_ms=get(ELECTION_TIMEOUT_MS, 1000),
            fetch_timeout_ms=get(FETCH_TIMEOUT_MS, 2000),
            election_backoff_max_ms=get(ELECTION_BACKOFF_MAX_MS, 1000),
            request_timeout_ms=get(REQUEST_TIMEOUT_MS, 2000),
            fetch_max_wait_ms=get(FETCH_MAX_WAIT_MS, 500),
            fetch_max_bytes=get(FETCH_MAX_BYTES, 8 * 1024 * 1024),
            fetch_snapshot_max_bytes=get(FETCH_SNAPSHOT_MAX_BYTES, 1024 * 1024),
        )
