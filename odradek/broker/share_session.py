"""Share sessions (KIP-932): a share consumer's incremental ShareFetch state on
one broker, as fetch_session.py is for Fetch.

A session is keyed by (group id, member id). Epoch 0 opens it (replacing an
older one of the same member), -1 closes it (the member's acquired records are
then released by the caller), any other epoch must be the one the broker
expects (SHARE_SESSION_NOT_FOUND when there is no session,
INVALID_SHARE_SESSION_EPOCH when the epoch is not the next) and moves it on.
The session holds the partitions the member fetches: a request adds its
topics' partitions and removes its forgotten ones. At most
`group.share.max.share.sessions` sessions; partitions per session are bounded
by the request guard and MAX_SESSION_PARTITIONS. A session unused for
`idle_ms` (the share session timeout: its member is gone from the group by then)
is evicted when a new one needs its place; the records its member held are
released by their acquisition locks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSION_PARTITIONS = 10_000

SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
SHARE_SESSION_LIMIT_REACHED = 133

SessionKey = tuple[str, str]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int = 1  # the epoch the next request must carry
    last_used_ms: int = 0
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


class SessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ShareSessionCache:
    def __init__(self, max_sessions: int, idle_ms: int = 45_000,
                 clock_ms: Callable[[], int] = _monotonic_ms) -> None:
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self.clock_ms = clock_ms
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(self, key: SessionKey) -> ShareSession:
        self.sessions.pop(key, None)
        now = self.clock_ms()
        if len(self.sessions) >= self.max_sessions:
            for k in [k for k, s in self.sessions.items()
                      if now - s.last_used_ms >= self.idle_ms]:
                del self.sessions[k]
        if len(self.sessions) >= self.max_sessions:
            raise SessionError(SHARE_SESSION_LIMIT_REACHED,
                               "The limit of share sessions has been reached.")
        session = self.sessions[key] = ShareSession(key, last_used_ms=now)
        return session

    def lookup(self, key: SessionKey, epoch: int) -> ShareSession:
        """The session for a request of `epoch` (> 0, or FINAL_EPOCH), moved on."""
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(SHARE_SESSION_NOT_FOUND,
                               f"Share session not found for member {key[1]}.")
        session.last_used_ms = self.clock_ms()
        if epoch == FINAL_EPOCH:
            return session
        if epoch != session.epoch:
            raise SessionError(
                INVALID_SHARE_SESSION_EPOCH,
                f"Share session epoch {epoch} is not the expected {session.epoch}.")
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        return session

    def close(self, key: SessionKey) -> ShareSession | None:
        return self.sessions.pop(key, None)

    @staticmethod
    def update(session: ShareSession, added: list[TopicPartition],
               forgotten: list[TopicPartition]) -> None:
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            if len(session.partitions) >= MAX_SESSION_PARTITIONS:
                break
            session.partitions[tp] = None
