"""Fetch, ListOffsets, OffsetForLeaderEpoch: reading the log.

Fetch serves file bytes: whole batches from the one holding the fetch offset,
up to the high watermark, within the partition and response byte budgets (the
first partition with data always gets at least one whole batch, as Kafka does,
so a batch larger than max_bytes still makes progress).

Fetch sessions (KIP-227): odradek does not create sessions yet. A request for
a new session (id 0, epoch 0) is answered with session id 0, which tells the
client no session was made and that it keeps sending full fetches; a request
naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from ...protocol import api
from ...protocol.entities import ms
from ...storage.log import OffsetOutOfRange
from ..context import RequestContext
from . import errors as E

if TYPE_CHECKING:
    from ..broker import Broker
    from ..replica_manager import Partition

ZERO_UUID = uuid.UUID(int=0)
FINAL_EPOCH = -1
INITIAL_EPOCH = 0
MAX_WAIT_CAP_MS = 60_000  # a bound on how long one fetch may park


def _check_epoch(part: "Partition", current_leader_epoch: int) -> int:
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


async def handle_fetch(broker: "Broker", ctx: RequestContext, req: Any) -> dict[str, Any]:
    version = ctx.api_version
    session_id = getattr(req, "session_id", 0)
    session_epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    if session_id != 0:
        return {"error_code": E.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    if session_epoch not in (FINAL_EPOCH, INITIAL_EPOCH):
        return {"error_code": E.INVALID_FETCH_SESSION_EPOCH, "session_id": 0, "responses": []}

    rm = broker.replica_manager
    image = broker.image
    use_ids = version >= 13
    # Resolve the request once: (topic name or None, topic key for the answer, partitions)
    wanted: list[tuple[str | None, Any, Any]] = []
    for t in req.topics:
        if use_ids:
            topic = image.topics_by_id.get(t.topic_id)
            wanted.append((topic.name if topic else None, t.topic_id, t.partitions))
        else:
            wanted.append((t.topic, t.topic, t.partitions))

    max_wait_ms = min(ms(req.max_wait), MAX_WAIT_CAP_MS)
    min_bytes = req.min_bytes
    max_bytes = getattr(req, "max_bytes", 0x7FFFFFFF)
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    deadline = time.monotonic() + max_wait_ms / 1000.0

    while True:
        responses, total_bytes, had_error, keys = _read_all(rm, wanted, max_bytes, use_ids)
        if total_bytes >= min_bytes or had_error or max_wait_ms <= 0:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not await rm.purgatory.wait_for_any(keys, remaining):
            responses, *_ = _read_all(rm, wanted, max_bytes, use_ids)
            break
    return {"error_code": 0, "session_id": 0, "responses": responses}


def _read_all(
    rm: Any, wanted: list[tuple[str | None, Any, Any]], max_bytes: int, use_ids: bool
) -> tuple[list[dict[str, Any]], int, bool, list[tuple[str, int]]]:
    responses = []
    total = 0
    had_error = False
    keys: list[tuple[str, int]] = []
    for name, topic_key, partitions in wanted:
        parts = []
        for p in partitions:
            index = p.partition
            if name is None:
                parts.append(_partition_answer(index, E.UNKNOWN_TOPIC_ID))
                had_error = True
                continue
            part = rm.partitions.get((name, index))
            if part is None:
                parts.append(_partition_answer(index, E.UNKNOWN_TOPIC_OR_PARTITION))
                had_error = True
                continue
            plog = part.log
            code = _check_epoch(part, getattr(p, "current_leader_epoch", -1))
            if code:
                parts.append(_partition_answer(index, code))
                had_error = True
                continue
            hw = plog.high_watermark
            budget = min(p.partition_max_bytes, max_bytes - total)
            data = b""
            if p.fetch_offset < hw and budget > 0 or (p.fetch_offset < hw and total == 0):
                try:
                    info = plog.read(p.fetch_offset, max(budget, 1), hw, total == 0)
                except OffsetOutOfRange:
                    parts.append(
                        _partition_answer(index, E.OFFSET_OUT_OF_RANGE, hw, hw,
                                          plog.log_start_offset)
                    )
                    had_error = True
                    continue
                data = info.records
            elif p.fetch_offset > plog.log_end_offset or p.fetch_offset < plog.log_start_offset:
                parts.append(
                    _partition_answer(index, E.OFFSET_OUT_OF_RANGE, hw, hw, plog.log_start_offset)
                )
                had_error = True
                continue
            total += len(data)
            keys.append((name, index))
            parts.append(_partition_answer(index, 0, hw, hw, plog.log_start_offset, data))
        if use_ids:
            responses.append({"topic_id": topic_key, "partitions": parts})
        else:
            responses.append({"topic": topic_key, "partitions": parts})
    return responses, total, had_error, keys


EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


async def handle_list_offsets(broker: "Broker", ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = broker.replica_manager
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
            if part is None:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
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
                entry["offset"] = plog.high_watermark
                entry["leader_epoch"] = part.leader_epoch
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                entry["offset"] = plog.log_start_offset
                entry["leader_epoch"] = part.leader_epoch
            elif ts == MAX_TIMESTAMP:
                found = plog.max_timestamp_offset()
                if found is not None and found[0] >= 0:
                    entry["offset"], entry["timestamp"] = found
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
    broker: "Broker", ctx: RequestContext, req: Any
) -> dict[str, Any]:
    rm = broker.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part = rm.partitions.get((t.topic, p.partition))
            entry = {"error_code": 0, "partition": p.partition, "leader_epoch": -1,
                     "end_offset": -1}
            if part is None:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif code := _check_epoch(part, p.current_leader_epoch):
                entry["error_code"] = code
            elif p.leader_epoch <= part.leader_epoch:
                # Only one leader epoch has existed on a single node so far: every
                # epoch up to the current one ends at the log end offset.
                entry["leader_epoch"] = part.leader_epoch if p.leader_epoch >= 0 else -1
                entry["end_offset"] = part.log.log_end_offset
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"topics": topics}


HANDLERS = {
    api.ApiKey.FETCH: handle_fetch,
    api.ApiKey.LIST_OFFSETS: handle_list_offsets,
    api.ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
}
