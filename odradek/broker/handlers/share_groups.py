"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe on the group
coordinator; ShareFetch, ShareAcknowledge on the partition leaders.

The heartbeat and describe translate to `coordinator/share_group.py`. ShareFetch
and ShareAcknowledge run on the leader of each partition: the share session
(broker/share_session.py) says which partitions the member fetches, the share
partition (coordinator/share_partition.py) which records it may acquire and what
its acknowledgements do, and its durable state is written to the share
coordinator (`__share_group_state`, through coordinator/share_persister.py)
before the answer goes out. Records are served as ShareFetch carries them: whole
batches from the log, with the acquired offset runs beside them; the client
delivers only the acquired records.

Authorization: READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and
READ on each topic (per partition TOPIC_AUTHORIZATION_FAILED) for ShareFetch and
ShareAcknowledge; READ on the group and DESCRIBE on the subscribed topics for
the heartbeat; DESCRIBE on each group for the describe.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

from ...coordinator import errors as CE
from ...coordinator.share_coordinator import FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH
from ...coordinator.share_group import ShareHeartbeat, heartbeat_error
from ...coordinator.share_partition import INVALID_REQUEST, SharePartition
from ...protocol import errors as E
from ...protocol.batch_format import iter_batch_headers
from ...protocol.entities import ms
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ...storage.log import OffsetOutOfRange
from ..context import RequestContext
from ..services import ShareServices
from ..share_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SHARE_SESSION_EPOCH,
    SessionError,
    ShareSession,
    ShareSessionCache,
)
from . import authz
from .consumer_groups import heartbeat_checks
from .groups import _client_host, _may_read, _ready

UNKNOWN_TOPIC_ID = 100
REQUEST_TIMED_OUT = 7
INVALID_GROUP_ID = 24
MAX_WAIT_CAP_MS = 60_000
LOCK_POLL_S = 0.25  # a parked ShareFetch looks again this often (locks run out)
DEFAULT_MAX_RECORDS = 500
RECORD_LIMIT = 1  # ShareFetch v2 share_acquire_mode (KIP-1206); 0 is batch_optimized


# -- ShareGroupHeartbeat / ShareGroupDescribe ---------------------------------------------


async def handle_share_group_heartbeat(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = await _ready(broker)
    if not req.group_id:
        return heartbeat_error(CE.INVALID_REQUEST, "GroupId can't be empty.")
    if not req.member_id:
        return heartbeat_error(CE.INVALID_REQUEST, "MemberId can't be empty.")
    bad = heartbeat_checks(ctx, req, min_epoch=-1)
    if bad is not None:
        return heartbeat_error(*bad)
    code = service.core.check(req.group_id)
    if code != CE.NONE:
        return heartbeat_error(code, None)
    if req.group_id in service.core.groups:
        return heartbeat_error(CE.GROUP_ID_NOT_FOUND,
                               f"Group {req.group_id} is not a share group.")
    hb = ShareHeartbeat(
        member_id=req.member_id, member_epoch=req.member_epoch, rack_id=req.rack_id,
        subscribed_topic_names=tuple(req.subscribed_topic_names)
        if req.subscribed_topic_names is not None else None,
        client_id=ctx.client_id or "", client_host=_client_host(ctx))
    return service.share_groups.heartbeat(req.group_id, hb, service.topics(), service.clock_ms())


async def handle_share_group_describe(
    broker: ShareServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = await _ready(broker)
    names = {tid: t.name for tid, t in broker.image.topics_by_id.items()}
    described = authz.allowed(ctx, Op.DESCRIBE, ResourceType.GROUP, req.group_ids)
    groups = []
    for g in req.group_ids:
        empty = {"group_id": g, "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                 "assignor_name": "", "members": [], "error_message": None,
                 "authorized_operations": E.AUTHORIZED_OPERATIONS_OMITTED}
        if g not in described:
            groups.append({**empty, "error_code": E.GROUP_AUTHORIZATION_FAILED})
            continue
        code = service.core.check(g)
        if code != CE.NONE:
            groups.append({**empty, "error_code": code})
            continue
        if g in service.core.groups:
            groups.append({**empty, "error_code": CE.GROUP_ID_NOT_FOUND,
                           "error_message": f"Group {g} is not a share group."})
            continue
        entry = service.share_groups.describe(g, names)
        entry["authorized_operations"] = authz.operations(
            ctx, ResourceType.GROUP, g,
            req.include_authorized_operations and entry["error_code"] == E.NONE)
        groups.append(entry)
    return {"groups": groups}


# -- ShareFetch / ShareAcknowledge ---------------------------------------------------------


def _leader(part: Any) -> dict[str, int]:
    if part is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": part.leader, "leader_epoch": part.leader_epoch}


def _fetch_partition(index: int, code: int = 0, ack_code: int = 0, part: Any = None,
                     records: bytes = b"", acquired: list[tuple[int, int, int]] | None = None,
                     ) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "error_message": None,
            "acknowledge_error_code": ack_code, "acknowledge_error_message": None,
            "current_leader": _leader(part), "records": records,
            "acquired_records": [{"first_offset": a, "last_offset": b, "delivery_count": c}
                                 for a, b, c in (acquired or [])]}


def _top_error(code: int, message: str | None, fetch: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": code, "error_message": message, "responses": [],
                           "node_endpoints": []}
    out["acquisition_lock_timeout"] = 0  # ShareFetch; ShareAcknowledge from v2
    return out


def _request_check(ctx: RequestContext, req: Any) -> tuple[int, str | None] | None:
    if not req.group_id:
        return INVALID_GROUP_ID, "The group id is empty."
    if not req.member_id:
        return CE.INVALID_REQUEST, "The member id is empty."
    if not _may_read(ctx, req.group_id):
        return E.GROUP_AUTHORIZATION_FAILED, None
    return None


class _Target:
    """One requested partition, resolved: its topic name, whether it may be
    read, and its local replica."""

    __slots__ = ("error", "index", "name", "part", "topic_id")

    def __init__(self, broker: ShareServices, readable: set[str], topic_id: uuid.UUID,
                 index: int) -> None:
        self.topic_id = topic_id
        self.index = index
        topic = broker.image.topics_by_id.get(topic_id)
        self.name = topic.name if topic is not None else None
        self.part: Any = None
        self.error = E.NONE
        if self.name is None:
            self.error = UNKNOWN_TOPIC_ID
        elif self.name not in readable:
            self.error = E.TOPIC_AUTHORIZATION_FAILED
        else:
            self.part = broker.replica_manager.partitions.get((self.name, index))
            if self.part is None:
                self.error = E.UNKNOWN_TOPIC_OR_PARTITION
            elif self.part.leader != broker.node_id:
                self.error = E.NOT_LEADER_OR_FOLLOWER
            elif self.part.log.offline:
                self.error = E.KAFKA_STORAGE_ERROR


def _readable(broker: ShareServices, ctx: RequestContext, topic_ids: list[uuid.UUID]) -> set[str]:
    names = [t.name for t in (broker.image.topics_by_id.get(i) for i in topic_ids) if t]
    return authz.topics_allowed(ctx, Op.READ, names)


def _state_error(code: int) -> int:
    """A share-state error as a ShareFetch/ShareAcknowledge partition can carry it:
    a deposed leader (fenced by its successor's read) is NOT_LEADER_OR_FOLLOWER,
    so the client looks for the new one; a coordinator that cannot be reached is
    COORDINATOR_NOT_AVAILABLE."""
    if code in (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH):
        return E.NOT_LEADER_OR_FOLLOWER
    if code in (CE.NOT_COORDINATOR, CE.COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT):
        return CE.COORDINATOR_NOT_AVAILABLE
    return code


async def _share_partition(broker: ShareServices, group: str,
                           target: _Target) -> tuple[int, SharePartition | None]:
    plog = target.part.log
    reset = broker.share.group_config(group).auto_offset_reset

    def initial() -> int:
        return plog.log_start_offset if reset == "earliest" else plog.high_watermark

    code, sp = await broker.share.partitions.get(
        (group, target.topic_id, target.index), initial, target.part.leader_epoch)
    if code != E.NONE:
        return _state_error(code), None
    return (E.NONE, sp) if sp is not None else (E.UNKNOWN_SERVER_ERROR, None)


async def _acknowledge(broker: ShareServices, group: str, member: str, target: _Target,
                       batches: Any, renew: bool) -> int:
    """Apply one partition's acknowledgement batches; RENEW (type 4, KIP-1222)
    is valid only in requests of version 2 and later (`renew`), INVALID_REQUEST
    below."""
    if target.error:
        return target.error
    code, sp = await _share_partition(broker, group, target)
    if sp is None:
        return code
    plan = [(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]
    if any(not types for _, _, types in plan):
        return INVALID_REQUEST
    code = sp.acknowledge(member, plan, broker.share.clock_ms(), renew)
    written = await broker.share.partitions.persist((group, target.topic_id, target.index), sp)
    return code if code != E.NONE else _state_error(written)


def _session(cache: ShareSessionCache, key: tuple[str, str], epoch: int,
             connection_id: int) -> ShareSession:
    if epoch == INITIAL_EPOCH:
        return cache.open(key, connection_id)
    return cache.lookup(key, epoch)


def _close(broker: ShareServices, key: tuple[str, str]) -> None:
    # released first: the group's last session closing drops its share partitions
    broker.share.partitions.release_member(key[0], key[1])
    broker.share.sessions.close(key)


async def handle_share_fetch(broker: ShareServices, ctx: RequestContext,
                             req: Any) -> dict[str, Any]:
    bad = _request_check(ctx, req)
    if bad is not None:
        return _top_error(*bad, fetch=True)
    group, member = req.group_id, req.member_id
    epoch = req.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    if epoch == INITIAL_EPOCH and has_acks:
        return _top_error(CE.INVALID_REQUEST,
                          "Acknowledge data present on initial fetch request.", fetch=True)
    v2 = ctx.api_version >= 2
    # KIP-1222: a renewing ShareFetch fetches nothing (whatever its fetch limits
    # say: not refused, the lenient reading, as no rule of Kafka's broker was found)
    renew_only = v2 and req.is_renew_ack
    if v2 and req.share_acquire_mode not in (0, RECORD_LIMIT):
        return _top_error(CE.INVALID_REQUEST, "Unknown share acquire mode.", fetch=True)
    record_limit = v2 and req.share_acquire_mode == RECORD_LIMIT
    key = (group, member)
    try:
        session = _session(broker.share.sessions, key, epoch, ctx.connection_id)
    except SessionError as e:
        return _top_error(e.code, e.message, fetch=True)
    readable = _readable(broker, ctx, [t.topic_id for t in req.topics])
    answers: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    requested: list[tuple[uuid.UUID, int]] = []
    for t in req.topics:
        for p in t.partitions:
            target = _Target(broker, readable, t.topic_id, p.partition_index)
            requested.append((t.topic_id, p.partition_index))
            if p.acknowledgement_batches:
                code = await _acknowledge(broker, group, member, target,
                                          p.acknowledgement_batches, v2)
                answers[(t.topic_id, p.partition_index)] = _fetch_partition(
                    p.partition_index, ack_code=code, part=target.part)
    settings = broker.share.group_config(group)
    lock_ms = settings.lock_duration_ms
    if epoch == FINAL_EPOCH:
        _close(broker, key)
        return _fetch_answer(answers, lock_ms)
    forgotten = [(t.topic_id, i) for t in req.forgotten_topics_data for i in t.partitions]
    ShareSessionCache.update(session, requested, forgotten)
    if renew_only:  # KIP-1222: the acknowledgements only, no records acquired
        return _fetch_answer(answers, lock_ms)

    max_records = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    max_wait_ms = min(ms(req.max_wait), MAX_WAIT_CAP_MS)
    deadline = time.monotonic() + max_wait_ms / 1000.0
    targets = [_Target(broker, _readable(broker, ctx, [tp[0] for tp in session.partitions]),
                       tid, idx) for tid, idx in session.partitions]
    memory = broker.fetch_memory
    while True:
        if memory.limited and memory.available() <= 0:
            # The fetch memory budget, shared with consumer fetches
            # (fetch_memory.py), is spent: wait for some of it; with none, the
            # answer holds one batch.
            await memory.wait_for_room(deadline - time.monotonic())
        got, keys = await _acquire_all(broker, group, member, targets, answers, max_records,
                                       max(1, min(max_bytes, memory.available())),
                                       settings.read_committed, record_limit)
        remaining = deadline - time.monotonic()
        if got or answers or remaining <= 0 or not keys:
            break
        if broker.share.sessions.sessions.get(key) is not session:
            break  # closed or replaced meanwhile
        await broker.replica_manager.purgatory.wait_for_any(keys, min(remaining, LOCK_POLL_S))
    if memory.limited:  # one sum per answer, not per record
        held = sum(len(a["records"]) for a in answers.values() if a.get("records"))
        if held:
            memory.reserve(held)
            ctx.release_after_write = functools.partial(memory.release, held)
    return _fetch_answer(answers, lock_ms)


def _fetch_answer(answers: dict[tuple[uuid.UUID, int], dict[str, Any]],
                  lock_ms: int) -> dict[str, Any]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (tid, _), answer in answers.items():
        by_topic.setdefault(tid, []).append(answer)
    return {"error_code": E.NONE, "error_message": None, "acquisition_lock_timeout": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts}
                          for tid, parts in by_topic.items()],
            "node_endpoints": []}


async def _acquire_all(broker: ShareServices, group: str, member: str, targets: list[_Target],
                 answers: dict[tuple[uuid.UUID, int], dict[str, Any]], max_records: int,
                 max_bytes: int, read_committed: bool = False, record_limit: bool = False
                 ) -> tuple[int, list[tuple[str, int]]]:
    """Acquire records on every session partition this node leads; the records
    acquired, and the partitions to wait on when there were none. Under
    `share.isolation.level=read_committed` a share partition reads up to the last
    stable offset and archives the records of aborted transactions, as it does
    transaction markers: they are never delivered (Kafka's SharePartition)."""
    now = broker.share.clock_ms()
    got = 0
    total_bytes = 0
    keys: list[tuple[str, int]] = []
    for target in targets:
        tp = (target.topic_id, target.index)
        if target.error:
            if tp not in answers:
                answers[tp] = _fetch_partition(target.index, target.error, part=target.part)
            else:
                answers[tp]["error_code"] = target.error
            continue
        assert target.name is not None
        if got >= max_records or total_bytes >= max_bytes:
            break
        code, sp = await _share_partition(broker, group, target)
        if sp is None:
            if tp not in answers:
                answers[tp] = _fetch_partition(target.index, code, part=target.part)
            else:
                answers[tp]["error_code"] = code
            continue
        share_key = (group, target.topic_id, target.index)
        plog = target.part.log
        sp.skip_below(plog.log_start_offset)
        sp.expire_locks(now)
        hw = plog.last_stable_offset if read_committed else plog.high_watermark
        keys.append((target.name, target.index))
        first = sp.first_acquirable(hw)
        data = b""
        runs: list[tuple[int, int, int]] = []
        if first is not None:
            try:
                data = plog.read(first, max(max_bytes - total_bytes, 1), hw, True).records
            except OSError:
                answers[tp] = _fetch_partition(target.index, E.KAFKA_STORAGE_ERROR,
                                               part=target.part)
                continue
            except OffsetOutOfRange:  # retention moved the log start meanwhile
                data = b""
            headers = list(iter_batch_headers(data))
            skip = (aborted_batches(headers, plog.collect_aborted_txns(first, hw))
                    if read_committed else frozenset())
            runs = sp.acquire(member, [(h.base_offset, h.last_offset,
                                        h.is_control or h.position in skip)
                                       for h in headers], max_records - got, now,
                               record_limit)
            if runs:
                last = runs[-1][1]
                end = next((h.position + h.size for h in headers if h.last_offset >= last),
                           len(data))
                data = bytes(data[:end])
        # expired locks, a moved log start: no acquisition waits for them
        broker.share.partitions.persist_later(share_key, sp)
        if not runs:
            continue
        got += sum(b - a + 1 for a, b, _ in runs)
        total_bytes += len(data)
        answer = answers.get(tp)
        if answer is None:
            answers[tp] = _fetch_partition(target.index, part=target.part, records=data,
                                           acquired=runs)
        else:
            answer["records"] = data
            answer["acquired_records"] = _fetch_partition(0, acquired=runs)["acquired_records"]
    return got, keys


def aborted_batches(headers: list[Any], aborted: list[Any]) -> frozenset[int]:
    """The positions of the batches in `headers` (in offset order) that belong to
    the `aborted` transactions (producer id, first offset): a transactional
    batch of a producer whose aborted transaction began at or before it, until
    that producer's marker, as a read_committed consumer filters them."""
    if not aborted:
        return frozenset()
    pending = sorted(aborted, key=lambda t: t.first_offset)
    active: set[int] = set()
    out: set[int] = set()
    i = 0
    for h in headers:
        while i < len(pending) and pending[i].first_offset <= h.last_offset:
            active.add(pending[i].producer_id)
            i += 1
        if h.is_control:
            active.discard(h.producer_id)  # the abort marker ends the transaction
        elif h.is_transactional and h.producer_id in active:
            out.add(h.position)
    return frozenset(out)


async def handle_share_acknowledge(broker: ShareServices, ctx: RequestContext,
                                   req: Any) -> dict[str, Any]:
    bad = _request_check(ctx, req)
    if bad is not None:
        return _top_error(*bad, fetch=False)
    group, member = req.group_id, req.member_id
    epoch = req.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return _top_error(INVALID_SHARE_SESSION_EPOCH,
                          "A share session cannot be opened by ShareAcknowledge.", fetch=False)
    key = (group, member)
    try:
        broker.share.sessions.lookup(key, epoch)
    except SessionError as e:
        return _top_error(e.code, e.message, fetch=False)
    readable = _readable(broker, ctx, [t.topic_id for t in req.topics])
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            target = _Target(broker, readable, t.topic_id, p.partition_index)
            code = await _acknowledge(broker, group, member, target,
                                      p.acknowledgement_batches, ctx.api_version >= 2)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": None, "current_leader": _leader(target.part)})
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    if epoch == FINAL_EPOCH:
        _close(broker, key)
    return {"error_code": E.NONE, "error_message": None, "responses": responses,
            "node_endpoints": [],
            "acquisition_lock_timeout": broker.share.group_config(group).lock_duration_ms}
