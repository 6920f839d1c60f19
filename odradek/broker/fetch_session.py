"""Incremental fetch sessions (KIP-227).

A client that fetches many partitions opens a session with a full fetch
(session id 0, epoch 0); the broker remembers the partitions and their fetch
positions under a new session id. Later requests (epoch 1, 2, ...) name only
the partitions whose position changed and list the ones to forget; the answer
holds only the partitions with something to say (records, a changed high
watermark, last stable offset or log start offset, or an error).

Rules, as in Kafka's FetchSession:
- epoch -1 (FINAL): close the named session (if any), answer as a sessionless
  full fetch with session id 0.
- epoch 0 (INITIAL): close the named session (if any), open a new one for the
  request's partitions; if the cache is full the answer has session id 0.
- epoch > 0: the session must exist (FETCH_SESSION_ID_NOT_FOUND) and the
  epoch must be the one expected (INVALID_FETCH_SESSION_EPOCH).
The cache holds at most `max_sessions` sessions (Kafka's
`max.incremental.fetch.session.cache.slots`, default 1000), evicting the least
recently used.
"""

from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field
from typing import Any, Hashable

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
MAX_SESSIONS_DEFAULT = 1000


@dataclass(slots=True)
class SessionPartition:
    topic_key: Any  # topic name (v<13) or topic id (v13+), as the client names it
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    # What the client was last told, to decide what an incremental answer includes.
    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[tuple[Hashable, int], SessionPartition] = field(default_factory=dict)


class SessionError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS_DEFAULT) -> None:
        self.max_sessions = max_sessions
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self._sessions:
                return sid

    def open(self) -> FetchSession | None:
        if self.max_sessions <= 0:
            return None
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session = FetchSession(self._new_id(), 1)
        self._sessions[session.session_id] = session
        return session

    def lookup(self, session_id: int, epoch: int) -> FetchSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        return session
