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
by the request guard and MAX_SESSION_PARTITIONS.
"""

from __future__ import annotations

import uuid
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
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


class SessionError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(self, key: SessionKey) -> ShareSession:
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            raise SessionError(SHARE_SESSION_LIMIT_REACHED,
                               "The limit of share sessions has been reached.")
        session = self.sessions[key] = ShareSession(key)
        return session

    def lookup(self, key: SessionKey, epoch: int) -> ShareSession:
        """The session for a request of `epoch` (> 0, or FINAL_EPOCH), moved on."""
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(SHARE_SESSION_NOT_FOUND,
                               f"Share session not found for member {key[1]}.")
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
