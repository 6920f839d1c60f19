"""Fetch, ListOffsets, OffsetForLeaderEpoch: reading the log.

Fetch serves file bytes: whole batches from the one holding the fetch offset,
up to the high watermark, within the partition and response byte budgets (the
first partition with data always gets at least one whole batch, as Kafka does,
so a batch larger than max_bytes still makes progress).

Fetch sessions (KIP-227) live in broker/fetch_session.py; an incremental
answer holds only the partitions with news for the client.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import TYPE_CHECKING, Any

from ...protocol import errors as E
from ...protocol.entities import ms
from ...protocol.records import iter_batch_headers
from ...security.resources import AclOperation as Op
from ...storage.log import OffsetOutOfRange
from ..context import RequestContext
from ..fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    SessionError,
    SessionPartition,
)
from ..services import FetchServices
from . import authz
from .remote_fetch import TIERED_OFFSETS, RemoteWanted, read_remote, tiered_offset

if TYPE_CHECKING:
    from ...replication.replica_manager import Partition

ZERO_UUID = uuid.UUID(int=0)
MAX_WAIT_CAP_MS = 60_000  # a bound on how long one fetch may park


def _check_epoch(part: Partition, current_leader_epoch: int) -> int:
    if current_leader_epoch == -1 or current_leader_epoch == part.leader_epoch:
        return 0
    if current_leader_epoch < part.leader_epoch:
        return E.FENCED_LEADER_EPOCH
    return E.UNKNOWN_LEADER_EPOCH


def _partition_answer(index: int, code: int, hw: int = -1, lso: int = -1, lso_start: int = -1,
                      records: bytes = b"") -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": lso,
        "log_start_offset": lso_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": records,
    }


def _request_partitions(req: Any, use_ids: bool) -> list[SessionPartition]:
    out = []
    for t in req.topics:
        key = t.topic_id if use_ids else t.topic
        for p in t.partitions:
            out.append(
                SessionPartition(
                    key, p.partition, p.fetch_offset, p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),
                )
            )
    return out


def _replica_id(req: Any) -> int:
    """The fetching follower's id (v15+ in replica_state), -1 for a consumer."""
    state = getattr(req, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(req, "replica_id", -1))


async def handle_fetch(broker: FetchServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    use_ids = version >= 13
    session_id = getattr(req, "session_id", 0)
    session_epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    cache = broker.fetch_sessions
    requested = _request_partitions(req, use_ids)
    session: FetchSession | None = None
    incremental = False
    if version >= 7:
        if session_epoch == FINAL_EPOCH:
            if session_id:
                cache.close(session_id)
        elif session_epoch == INITIAL_EPOCH:
            if session_id:
                cache.close(session_id)
            session = cache.open(len(requested), privileged=_replica_id(req) >= 0)
            if session is not None:
                session.partitions = {(sp.topic_key, sp.partition): sp for sp in requested}
        else:
            try:
                session = cache.lookup(session_id, session_epoch)
            except SessionError as e:
                return {"error_code": e.error_code, "session_id": 0, "responses": []}
            incremental = True
            for sp in requested:
                old = session.partitions.get((sp.topic_key, sp.partition))
                if old is None:
                    session.partitions[(sp.topic_key, sp.partition)] = sp
                else:
                    old.fetch_offset = sp.fetch_offset
                    old.partition_max_bytes = sp.partition_max_bytes
                    old.current_leader_epoch = sp.current_leader_epoch
            for t in req.forgotten_topics_data:
                key = t.topic_id if use_ids else t.topic
                for index in t.partitions:
                    session.partitions.pop((key, index), None)
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
    entries = list(session.partitions.values()) if session is not None else requested

    max_wait_ms = min(ms(req.max_wait), MAX_WAIT_CAP_MS)
    min_bytes = req.min_bytes
    max_bytes = getattr(req, "max_bytes", 0x7FFFFFFF)
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    # KIP-541: the broker's fetch.max.bytes bounds every answer, whatever the
    # client asks (Kafka's default, 55 MiB, is above the clients' 50 MiB).
    max_bytes = min(max_bytes, broker.config.fetch_max_bytes)
    min_bytes = min(min_bytes, max_bytes)
    quota = ctx.fetch_quota
    if quota is not None:  # Kafka: no more than one quota window's worth
        max_bytes = min(max_bytes, quota.window_bytes)
        min_bytes = min(min_bytes, max_bytes)
    deadline = time.monotonic() + max_wait_ms / 1000.0
    rm = broker.replica_manager
    read_committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    readable = _readable(ctx, broker.image, entries, use_ids)
    if entries and not readable:
        # Kafka (KafkaApis: nothing "interesting"): no partition may be read,
        # so answer the TOPIC_AUTHORIZATION_FAILED at once instead of waiting
        max_wait_ms = 0

    tiered = broker.remote_tier is not None
    remote: list[RemoteWanted] | None = None
    memory = broker.fetch_memory
    while True:
        remote = [] if tiered else None
        if memory.limited and memory.available() <= 0:
            # The fetch memory budget is spent (fetch_memory.py): wait for some of
            # it; with none, the answer holds one batch (Kafka's minimum).
            await memory.wait_for_room(deadline - time.monotonic())
        answers, total_bytes, had_error, keys = _read_all(
            rm, broker.image, entries, min(max_bytes, memory.available()), use_ids,
            read_committed, readable, remote
        )
        if total_bytes >= min_bytes or had_error or max_wait_ms <= 0 or remote:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not await rm.purgatory.wait_for_any(keys, remaining):
            answers, total_bytes, *_ = _read_all(
                rm, broker.image, entries, min(max_bytes, memory.available()), use_ids,
                read_committed, readable, remote
            )
            break
    if remote and broker.remote_tier is not None:  # remote: the partitions to read there
        await read_remote(broker.remote_tier.reader, answers, remote, read_committed)

    if quota is not None and quota.record(total_bytes):
        # Over consumer_byte_rate: Kafka's throttled response, empty, the session's
        # partition states untouched; a session this request would have made is not
        # made (INVALID_SESSION_ID), an incremental one keeps its id.
        if session is not None and not incremental:
            cache.close(session.session_id)
        return {"error_code": 0, "responses": [],
                "session_id": session.session_id if incremental and session else 0}

    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for sp, answer in zip(entries, answers):
        if incremental and not (
            answer["records"]
            or answer["error_code"]
            or answer["high_watermark"] != sp.high_watermark
            or answer["last_stable_offset"] != sp.last_stable_offset
            or answer["log_start_offset"] != sp.log_start_offset
        ):
            continue
        sp.high_watermark = answer["high_watermark"]
        sp.last_stable_offset = answer["last_stable_offset"]
        sp.log_start_offset = answer["log_start_offset"]
        by_topic.setdefault(sp.topic_key, []).append(answer)
    key_field = "topic_id" if use_ids else "topic"
    responses = [{key_field: key, "partitions": parts} for key, parts in by_topic.items()]
    if memory.limited:
        held = sum(len(a["records"]) for parts in by_topic.values() for a in parts
                   if a["records"])
        if held:
            memory.reserve(held)
            ctx.release_after_write = functools.partial(memory.release, held)
    return {
        "error_code": 0,
        "session_id": session.session_id if session is not None else 0,
        "responses": responses,
    }


def _readable(ctx: RequestContext, image: Any, entries: list[SessionPartition],
              use_ids: bool) -> set[str]:
    """The topics of the fetch the principal may READ (one authorizer call)."""
    if use_ids:
        names = [t.name for t in (image.topics_by_id.get(sp.topic_key) for sp in entries) if t]
    else:
        names = [sp.topic_key for sp in entries]
    return authz.topics_allowed(ctx, Op.READ, names)


def _read_all(
    rm: Any, image: Any, entries: list[SessionPartition], max_bytes: int, use_ids: bool,
    read_committed: bool = False, readable: set[str] | None = None,
    remote: list[RemoteWanted] | None = None,
) -> tuple[list[dict[str, Any]], int, bool, list[tuple[str, int]]]:
    """Local reads; offsets below the local log start offset that the remote tier
    holds are added to `remote` (answered by read_remote) with an empty answer."""
    answers = []
    total = 0
    had_error = False
    keys: list[tuple[str, int]] = []
    names: dict[Any, str | None] = {}
    for sp in entries:
        index = sp.partition
        if use_ids:
            if sp.topic_key not in names:
                topic = image.topics_by_id.get(sp.topic_key)
                names[sp.topic_key] = topic.name if topic else None
            name = names[sp.topic_key]
            if name is None:
                answers.append(_partition_answer(index, E.UNKNOWN_TOPIC_ID))
                had_error = True
                continue
        else:
            name = sp.topic_key
        if readable is not None and name not in readable:
            # not had_error: the fetch still waits for the partitions it may read
            answers.append(_partition_answer(index, E.TOPIC_AUTHORIZATION_FAILED))
            continue
        part = rm.partitions.get((name, index))
        if part is None:
            answers.append(_partition_answer(index, E.UNKNOWN_TOPIC_OR_PARTITION))
            had_error = True
            continue
        if part.log.offline:  # its log dir is offline (storage/log_manager.py)
            answers.append(_partition_answer(index, E.KAFKA_STORAGE_ERROR))
            had_error = True
            continue
        if part.leader != rm.node_id:
            # Consumers read from the leader; the tag tells them where it is now.
            answer = _partition_answer(index, E.NOT_LEADER_OR_FOLLOWER)
            answer["current_leader"] = {"leader_id": part.leader,
                                        "leader_epoch": part.leader_epoch}
            answers.append(answer)
            had_error = True
            continue
        code = _check_epoch(part, sp.current_leader_epoch)
        if code:
            answers.append(_partition_answer(index, code))
            had_error = True
            continue
        plog = part.log
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        # read_committed stops at the last stable offset (the oldest open txn).
        upper = lso if read_committed else hw
        offset = sp.fetch_offset
        start = plog.start_offset_with_remote
        if offset < start and plog.config.remote_storage_enable \
                and not plog.remote_view_loaded and remote is not None:
            # the remote tier's view is not loaded yet (just started): no answer yet
            answers.append(_partition_answer(index, 0, hw, lso, start))
            keys.append((name, index))
            continue
        if offset < start or offset > plog.log_end_offset:
            answers.append(_partition_answer(index, E.OFFSET_OUT_OF_RANGE, hw, hw, start))
            had_error = True
            continue
        data = b""
        budget = min(sp.partition_max_bytes, max_bytes - total)
        if offset < plog.log_start_offset and remote is not None:
            # in the remote tier: read asynchronously once the local reads are done
            remote.append(RemoteWanted(len(answers), name, index, offset, max(budget, 1)))
            answers.append(_partition_answer(index, 0, hw, lso, start))
            keys.append((name, index))
            continue
        if offset < upper and (budget > 0 or total == 0):
            try:
                data = plog.read(offset, max(budget, 1), upper, total == 0).records
            except OffsetOutOfRange:
                answers.append(
                    _partition_answer(index, E.OFFSET_OUT_OF_RANGE, hw, hw, plog.log_start_offset)
                )
                had_error = True
                continue
            except OSError:  # the dir just went offline (logged by the log manager)
                answers.append(_partition_answer(index, E.KAFKA_STORAGE_ERROR))
                had_error = True
                continue
        total += len(data)
        keys.append((name, index))
        answer = _partition_answer(index, 0, hw, lso, start, data)
        if read_committed:
            answer["aborted_transactions"] = _aborted(plog, offset, data)
        answers.append(answer)
    return answers, total, had_error, keys


def _aborted(plog: Any, offset: int, data: bytes) -> list[dict[str, int]]:
    """The aborted transactions overlapping the fetched batches (headers only)."""
    if not data:
        return []
    end = offset
    for h in iter_batch_headers(data):
        end = h.next_offset
    return [
        {"producer_id": t.producer_id, "first_offset": t.first_offset}
        for t in plog.collect_aborted_txns(offset, end)
    ]


READ_COMMITTED = 1
LATEST = -1
MAX_TIMESTAMP = -3


async def handle_list_offsets(broker: FetchServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = broker.replica_manager
    described = authz.topics_allowed(ctx, Op.DESCRIBE, [t.name for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            index = p.partition_index
            part = rm.partitions.get((t.name, index))
            entry: dict[str, Any] = {
                "partition_index": index, "error_code": 0, "timestamp": -1, "offset": -1,
                "leader_epoch": -1, "old_style_offsets": [],
            }
            if t.name not in described:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            if part is None:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
                parts.append(entry)
                continue
            if part.log.offline:
                entry["error_code"] = E.KAFKA_STORAGE_ERROR
                parts.append(entry)
                continue
            if part.leader != broker.node_id:
                entry["error_code"] = E.NOT_LEADER_OR_FOLLOWER
                parts.append(entry)
                continue
            code = _check_epoch(part, getattr(p, "current_leader_epoch", -1))
            if code:
                entry["error_code"] = code
                parts.append(entry)
                continue
            plog = part.log
            ts = p.timestamp
            if ts == LATEST:
                read_committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
                entry["offset"] = plog.last_stable_offset if read_committed else plog.high_watermark
                entry["leader_epoch"] = part.leader_epoch
            elif ts in TIERED_OFFSETS:
                offset, epoch = tiered_offset(plog, ts, ctx.api_version, part.leader_epoch)
                if offset is None:
                    entry["error_code"] = E.UNSUPPORTED_VERSION
                else:
                    entry["offset"], entry["leader_epoch"] = offset, epoch
            elif ts == MAX_TIMESTAMP:
                newest = plog.max_timestamp_offset()  # (-1, -1) for an empty log
                if newest[0] >= 0:
                    entry["offset"], entry["timestamp"] = newest
                    entry["leader_epoch"] = part.leader_epoch
            elif ts < 0:
                entry["error_code"] = E.UNSUPPORTED_VERSION
            else:
                found = plog.offset_for_timestamp(ts)
                if found is not None:
                    entry["offset"], entry["timestamp"] = found
                    entry["leader_epoch"] = part.leader_epoch
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}


async def handle_offset_for_leader_epoch(
    broker: FetchServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    rm = broker.replica_manager
    # a follower (replica_id >= 0) needs CLUSTER_ACTION; a consumer DESCRIBE on each topic
    follower_denied = (getattr(req, "replica_id", -1) >= 0
                       and not authz.cluster_allows(ctx, Op.CLUSTER_ACTION))
    described = authz.topics_allowed(ctx, Op.DESCRIBE, [t.topic for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part = rm.partitions.get((t.topic, p.partition))
            entry = {"error_code": 0, "partition": p.partition, "leader_epoch": -1,
                     "end_offset": -1}
            if follower_denied:
                entry["error_code"] = E.CLUSTER_AUTHORIZATION_FAILED
            elif t.topic not in described:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif part.log.offline:
                entry["error_code"] = E.KAFKA_STORAGE_ERROR
            elif part.leader != broker.node_id:
                entry["error_code"] = E.NOT_LEADER_OR_FOLLOWER
            elif code := _check_epoch(part, p.current_leader_epoch):
                entry["error_code"] = code
            else:
                # The leader epoch cache (storage/leader_epoch.py): the largest
                # epoch <= the requested one and where the next epoch starts (or
                # the log end offset for the latest), as Kafka answers.
                epoch, end_offset = part.log.leader_epoch_cache.end_offset_for(
                    p.leader_epoch, part.log.log_end_offset
                )
                entry["leader_epoch"] = epoch
                entry["end_offset"] = end_offset
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"topics": topics}
