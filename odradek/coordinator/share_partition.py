"""One share partition (KIP-932): which records of a topic partition a share
group has delivered, to whom, how often, and what became of them.

A sans-I/O state machine: the clock is an argument, reading the log and
writing the durable state are the caller's (broker/handlers/share_groups.py,
coordinator/share_partitions.py, through the share coordinator).

Theory of operation. The share-partition start offset (SPSO) is the first
offset not yet finished with; the end offset (SPEO) the first never
acquired. Every offset in [SPSO, SPEO) has an entry in `records`:

    AVAILABLE  -- may be acquired (again); its delivery count says how often it was
    ACQUIRED   -- locked to one member until `deadline_ms` (the acquisition lock,
                  `group.share.record.lock.duration.ms`)
    ACKNOWLEDGED, ARCHIVED -- finished (accepted; or rejected, or delivered
                  `group.share.delivery.count.limit` times, or a control record)

Transitions (acknowledge types are Kafka's: 0 gap, 1 accept, 2 release, 3 reject,
4 renew -- KIP-1222, ShareFetch/ShareAcknowledge v2 only):

    AVAILABLE  --acquire-->          ACQUIRED (delivery count + 1)
    ACQUIRED   --accept-->           ACKNOWLEDGED
    ACQUIRED   --reject, gap-->      ARCHIVED
    ACQUIRED   --release, lock expiry, session closed-->
                                     AVAILABLE, or ARCHIVED at the delivery count limit
    ACQUIRED   --renew-->            ACQUIRED by the same member, its lock deadline
                                     moved to now + the lock duration (count unchanged)

The SPSO moves past finished records at the front of the window; the window
[SPSO, SPEO) holds at most `max_in_flight` offsets
(`group.share.partition.max.record.locks`), so memory is bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4

# acknowledge types (ShareFetch/ShareAcknowledge AcknowledgementBatch.AcknowledgeTypes)
GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
RENEW = 4  # KIP-1222: extend the acquisition lock, acknowledge nothing

# error codes (the protocol guide's numbers; the handler copies them out)
NONE = 0
INVALID_REQUEST = 42
INVALID_RECORD_STATE = 121


@dataclass(slots=True)
class Rec:
    state: int = AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class ShareLimits:
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000


@dataclass(slots=True)
class SharePartition:
    start_offset: int  # SPSO
    limits: ShareLimits = field(default_factory=ShareLimits)
    end_offset: int = -1  # SPEO; -1: equal to start_offset
    records: dict[int, Rec] = field(default_factory=dict)
    state_epoch: int = 0
    dirty: bool = False  # changed since the durable state was last written

    def __post_init__(self) -> None:
        self.end_offset = max(self.end_offset, self.start_offset)

    # -- invariants ------------------------------------------------------------------

    def check(self) -> None:
        assert self.start_offset <= self.end_offset
        assert all(self.start_offset <= o < self.end_offset for o in self.records)
        assert len(self.records) == self.end_offset - self.start_offset

    # -- acquiring -------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose acquisition lock ran out; how many."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.deadline_ms <= now_ms:
                self._release(rec)
                n += 1
        if n:
            self._advance()
        return n

    def first_acquirable(self, high_watermark: int) -> int | None:
        """The lowest offset a fetch could acquire now, or None."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == AVAILABLE:
                return offset
        if self.end_offset < high_watermark and self._window_room() > 0:
            return self.end_offset
        return None

    def _window_room(self) -> int:
        return self.limits.max_in_flight - (self.end_offset - self.start_offset)

    def acquire(self, member_id: str, batches: Iterable[tuple[int, int, bool]],
                max_records: int, now_ms: int, record_limit: bool = False,
                ) -> list[tuple[int, int, int]]:
        """Acquire for `member_id` records among the log's `batches` (base offset,
        last offset, is_control), in offset order: whole batches until
        `max_records` are taken (a batch is not split for it: the limit "can be
        exceeded for alignment of batch boundaries", as Kafka's ShareFetch says,
        so a batch's bytes are not sent again and again), within the window.
        With `record_limit` (ShareFetch v2's share_acquire_mode 1, KIP-1206)
        `max_records` is a strict limit: a batch is split at it.
        Returns the acquired runs (first, last, delivery count)."""
        runs: list[tuple[int, int, int]] = []
        taken = 0
        deadline = now_ms + self.limits.lock_duration_ms
        for base, last, control in batches:
            if taken >= max_records:
                break
            for offset in range(max(base, self.start_offset), last + 1):
                if record_limit and taken >= max_records:
                    break
                if offset >= self.end_offset:
                    if self._window_room() <= offset - self.end_offset:
                        break
                    while self.end_offset < offset:  # compacted away: nothing to deliver
                        self.records[self.end_offset] = Rec(ARCHIVED)
                        self.end_offset += 1
                    self.records[offset] = Rec()
                    self.end_offset += 1
                    if control:  # transaction markers are never delivered
                        self.records[offset].state = ARCHIVED
                        continue
                rec = self.records[offset]
                if rec.state != AVAILABLE:
                    continue
                if control:
                    rec.state = ARCHIVED
                    continue
                rec.state = ACQUIRED
                rec.delivery_count += 1
                rec.member_id = member_id
                rec.deadline_ms = deadline
                taken += 1
                if runs and runs[-1][1] == offset - 1 and runs[-1][2] == rec.delivery_count:
                    runs[-1] = (runs[-1][0], offset, rec.delivery_count)
                else:
                    runs.append((offset, offset, rec.delivery_count))
        self._advance()
        return runs

    # -- acknowledging ---------------------------------------------------------------

    def acknowledge(self, member_id: str,
                    batches: list[tuple[int, int, tuple[int, ...]]],
                    now_ms: int = 0, renew: bool = False) -> int:
        """Apply a member's acknowledgement batches (first, last, types), all or
        nothing: INVALID_REQUEST for malformed batches, INVALID_RECORD_STATE when
        a record is not acquired by this member; NONE once applied. RENEW is a
        valid type only when `renew` (requests of version 2 and later); it moves
        the lock deadline to `now_ms` + the lock duration."""
        kinds = (GAP, ACCEPT, RELEASE, REJECT, RENEW) if renew else (GAP, ACCEPT, RELEASE, REJECT)
        previous_last = -1
        plan: list[tuple[Rec, int]] = []
        for first, last, types in batches:
            if first > last or first <= previous_last or first < 0:
                return INVALID_REQUEST
            if len(types) not in (1, last - first + 1):
                return INVALID_REQUEST
            if any(t not in kinds for t in types):
                return INVALID_REQUEST
            previous_last = last
            for i, offset in enumerate(range(first, last + 1)):
                rec = self.records.get(offset)
                if rec is None or rec.state != ACQUIRED or rec.member_id != member_id:
                    return INVALID_RECORD_STATE
                plan.append((rec, types[0] if len(types) == 1 else types[i]))
        for rec, kind in plan:
            if kind == RENEW:
                rec.deadline_ms = now_ms + self.limits.lock_duration_ms
                continue  # still acquired by this member; nothing to persist
            if kind == ACCEPT:
                rec.state = ACKNOWLEDGED
            elif kind == RELEASE:
                self._release(rec)
            else:  # REJECT, GAP
                rec.state = ARCHIVED
            rec.member_id = ""
            self.dirty = True
        self._advance()
        return NONE

    def release_member(self, member_id: str) -> int:
        """A member's share session closed: its acquired records become
        available again (Kafka's behaviour when a member leaves)."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member_id == member_id:
                self._release(rec)
                n += 1
        if n:
            self._advance()
        return n

    def _release(self, rec: Rec) -> None:
        rec.member_id = ""
        if rec.delivery_count >= self.limits.delivery_count_limit:
            rec.state = ARCHIVED
        else:
            rec.state = AVAILABLE
        self.dirty = True

    def _advance(self) -> None:
        moved = False
        while self.start_offset < self.end_offset:
            rec = self.records[self.start_offset]
            if rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1
            moved = True
        if moved:
            self.dirty = True

    # -- offsets (Describe/Alter/DeleteShareGroupOffsets) ------------------------------

    def reset(self, start_offset: int) -> None:
        """Start again at `start_offset` (AlterShareGroupOffsets; the log start
        moved past the window): every record below it is finished."""
        self.records.clear()
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1
        self.dirty = True

    def skip_below(self, log_start_offset: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) are finished."""
        if log_start_offset <= self.start_offset:
            return
        if log_start_offset >= self.end_offset:
            self.reset(log_start_offset)
            return
        for offset in range(self.start_offset, log_start_offset):
            del self.records[offset]
        self.start_offset = log_start_offset
        self.dirty = True

    def in_flight(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)

    # -- the durable form (the share coordinator's state batches) --------------------------

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The window as runs (first, last, delivery count, state), as Kafka's
        WriteShareGroupState carries it; acquired records are written as
        AVAILABLE (their lock does not survive a restart, their count does)."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in range(self.start_offset, self.end_offset):
            rec = self.records[offset]
            state = AVAILABLE if rec.state == ACQUIRED else rec.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (rec.delivery_count, state):
                runs[-1] = (runs[-1][0], offset, rec.delivery_count, state)
            else:
                runs.append((offset, offset, rec.delivery_count, state))
        return runs

    @classmethod
    def restore(cls, start_offset: int, state_epoch: int,
                runs: list[tuple[int, int, int, int]], limits: ShareLimits) -> SharePartition:
        sp = cls(start_offset=start_offset, limits=limits, state_epoch=state_epoch)
        for first, last, count, state in sorted(runs):
            for offset in range(max(first, sp.end_offset), last + 1):
                while sp.end_offset < offset:  # a hole: never delivered
                    sp.records[sp.end_offset] = Rec()
                    sp.end_offset += 1
                sp.records[offset] = Rec(state if state != ACQUIRED else AVAILABLE, count)
                sp.end_offset += 1
        sp._advance()
        sp.dirty = False
        return sp
