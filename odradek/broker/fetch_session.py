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
`max.incremental.fetch.session.cache.slots`, default 1000), so its memory is
bounded by the slots times the partitions a request can name. A new session
in a full cache evicts one only as KIP-227 says (Kafka's FetchSessionCache):
1. the least recently used session, if it was last used more than
   `eviction_ms` ago (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS, 120 s);
2. else the smallest evictable session by (privileged, partitions, id), if
   the newcomer's (privileged, partitions, 0) is not smaller. Evictable by
   anyone: sessions created more than `eviction_ms` ago; by a privileged
   newcomer (a follower's fetch) also any unprivileged session.
Otherwise the newcomer gets no session (session id 0, a full answer), so a
flood of new sessions can neither grow the cache nor push out the sessions
consumers are using. Finding the session to evict scans the cache (bounded by
the slots), and only when it is full.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
MAX_SESSIONS_DEFAULT = 1000
SESSION_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS


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
    privileged: bool = False  # opened by a follower's fetch
    created_ms: int = 0
    last_used_ms: int = 0

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, len(self.partitions), self.session_id)


class SessionError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS_DEFAULT,
                 eviction_ms: int = SESSION_EVICTION_MS,
                 clock_ms: Callable[[], int] = _monotonic_ms) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self.clock_ms = clock_ms
        self.evictions = 0
        # least recently used first
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

    def open(self, partitions: int = 0, privileged: bool = False) -> FetchSession | None:
        """A new session for a fetch naming `partitions` partitions, or None when
        the cache is full and holds nothing this newcomer may evict."""
        now = self.clock_ms()
        if len(self._sessions) >= self.max_sessions and not self._try_evict(
                privileged, partitions, now):
            return None
        assert len(self._sessions) < self.max_sessions
        session = FetchSession(self._new_id(), 1, privileged=privileged, created_ms=now,
                               last_used_ms=now)
        self._sessions[session.session_id] = session
        return session

    def _try_evict(self, privileged: bool, partitions: int, now: int) -> bool:
        oldest = next(iter(self._sessions.values()), None)
        if oldest is None:
            return False
        victim: FetchSession | None = oldest
        if now - oldest.last_used_ms <= self.eviction_ms:
            victim = min(
                (s for s in self._sessions.values()
                 if now - s.created_ms > self.eviction_ms or (privileged and not s.privileged)),
                key=FetchSession.evictable_key, default=None,
            )
            if victim is None or (privileged, partitions, 0) < victim.evictable_key():
                return False
        assert victim is not None
        del self._sessions[victim.session_id]
        self.evictions += 1
        return True

    def lookup(self, session_id: int, epoch: int) -> FetchSession:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(INVALID_FETCH_SESSION_EPOCH)
        self._sessions.move_to_end(session_id)
        session.last_used_ms = self.clock_ms()
        return session
