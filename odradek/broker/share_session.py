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
is evicted when a new one needs its place, and when a new session of the same
group opens; the records its member held are released by their acquisition
locks.

A session belongs to the connection that opened it: when that connection
closes, its sessions end and their members' records are released at once
(Kafka's share session cache listens for disconnects the same way), so a
consumer that died gives its records back without waiting for their locks.

When the last session of a group on this broker ends (closed with the final
epoch or by the member's removal, evicted; not when the member opens it again),
`on_group_empty(group)` is called: the broker then
drops its cached share partitions of the group, so that the next ShareFetch
reads their state again (Kafka's ShareGroupListener.onGroupEmpty). That is how
an AlterShareGroupOffsets or DeleteShareGroupOffsets, which needs the group
empty, reaches a share-partition leader that still holds the old state.
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
    connection_id: int = -1  # the connection that opened it (-1: none)
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
                 clock_ms: Callable[[], int] = _monotonic_ms,
                 on_group_empty: Callable[[str], None] | None = None) -> None:
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self.clock_ms = clock_ms
        self.on_group_empty = on_group_empty
        self.sessions: dict[SessionKey, ShareSession] = {}
        self._per_group: dict[str, int] = {}
        self._by_connection: dict[int, set[SessionKey]] = {}

    def _add(self, session: ShareSession) -> None:
        self.sessions[session.key] = session
        if session.connection_id >= 0:
            self._by_connection.setdefault(session.connection_id, set()).add(session.key)
        group = session.key[0]
        self._per_group[group] = self._per_group.get(group, 0) + 1

    def _remove(self, key: SessionKey, notify: bool = True) -> ShareSession | None:
        session = self.sessions.pop(key, None)
        if session is None:
            return None
        keys = self._by_connection.get(session.connection_id)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_connection[session.connection_id]
        group = key[0]
        left = self._per_group.get(group, 1) - 1
        if left > 0:
            self._per_group[group] = left
        else:
            self._per_group.pop(group, None)
            if notify and self.on_group_empty is not None:
                self.on_group_empty(group)
        return session

    def members_here(self, group: str) -> int:
        """The sessions of `group` on this broker."""
        return self._per_group.get(group, 0)

    def of_connection(self, connection_id: int) -> list[SessionKey]:
        """The sessions the connection opened (and that are still open)."""
        return list(self._by_connection.get(connection_id, ()))

    def open(self, key: SessionKey, connection_id: int = -1) -> ShareSession:
        now = self.clock_ms()
        full = len(self.sessions) >= self.max_sessions
        for k in [k for k, s in self.sessions.items()
                  if (full or k[0] == key[0]) and now - s.last_used_ms >= self.idle_ms]:
            self._remove(k)
        self._remove(key, notify=False)  # replaced by the member itself: as Kafka, no news
        if len(self.sessions) >= self.max_sessions:
            raise SessionError(SHARE_SESSION_LIMIT_REACHED,
                               "The limit of share sessions has been reached.")
        session = ShareSession(key, last_used_ms=now, connection_id=connection_id)
        self._add(session)
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
        return self._remove(key)

    @staticmethod
    def update(session: ShareSession, added: list[TopicPartition],
               forgotten: list[TopicPartition]) -> None:
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            if len(session.partitions) >= MAX_SESSION_PARTITIONS:
                break
            session.partitions[tp] = None
