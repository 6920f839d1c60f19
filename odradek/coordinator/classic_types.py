"""The plain data of the classic group protocol: requests, members, effects, error answers.

Split from `classic.py` (the state machine) so that each stays small; `classic`
re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Token = int

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupLimits:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


@dataclass(slots=True)
class Effects:
    replies: list[tuple[Token, dict[str, Any]]] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)  # groups whose metadata must be written

    def reply(self, token: Token | None, response: dict[str, Any]) -> None:
        if token is not None:
            self.replies.append((token, response))


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    api_version: int


@dataclass(slots=True)
class SyncRequest:
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: Token | None = None
    sync_token: Token | None = None
    heartbeat_deadline_ms: int = 0

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


def join_error(code: int, member_id: str = "") -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_error(code: int) -> dict[str, Any]:
    return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}
