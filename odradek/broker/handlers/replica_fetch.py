"""Fetch from a follower: the leader's side of replication.

A follower's Fetch (replica id >= 0) reads up to the log end offset, not the
high watermark. Each partition is checked as Kafka checks it:

* this node must lead it (NOT_LEADER_OR_FOLLOWER, with the current leader)
  in the follower's leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH);
* KIP-320: the follower's (fetch_offset, last_fetched_epoch) must agree with
  the leader's epoch cache, else the answer is the diverging epoch and where
  the leader's copy of that epoch ends, so the follower truncates exactly the
  part that diverges (KIP-101/279) and never blindly to its high watermark;
* the fetch offset moves the follower's state (`replication/leader_replication.py`):
  ISR expansion and the high watermark, which the answer carries.
* a follower out of the ISR whose partition the topic's
  `leader.replication.throttled.replicas` names for this broker gets only
  what the leader's replication throttle holds (`replication_quota.py`).

A follower with nothing to read parks until an append or its max wait. Fetch
sessions are not used by followers (odradek's fetcher sends full fetches).
The answer's last stable offset is the high watermark: followers replicate
transaction markers as records and never read it. A partition's records of
64 KiB or more go into the answer as a range of the segment file, which the
connection sends with sendfile (storage/file_slice.py, network.py).
"""

from __future__ import annotations

import time
from typing import Any

from ...protocol import errors as E
from ...protocol.entities import ms
from ...replication.follower import diverging_epoch
from ...storage.file_slice import FileSlice
from ...storage.log import OffsetOutOfRange
from ..context import RequestContext
from ..services import ReplicaFetchServices

MAX_WAIT_CAP_MS = 30_000


def _answer(index: int, code: int, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition_index": index, "error_code": code, "high_watermark": -1,
        "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
        "preferred_read_replica": -1, "records": b"",
    }
    out.update(extra)
    return out


def _read(broker: ReplicaFetchServices, replica_id: int, topic: str, p: Any,
          budget: int) -> tuple[dict[str, Any], int, bool]:
    """(answer, bytes, had_error)"""
    rm = broker.replica_manager
    index = p.partition
    part = rm.partitions.get((topic, index))
    if part is None:
        return _answer(index, E.UNKNOWN_TOPIC_OR_PARTITION), 0, True
    if part.log.offline:
        return _answer(index, E.KAFKA_STORAGE_ERROR), 0, True
    if part.leader != broker.node_id:
        return _answer(index, E.NOT_LEADER_OR_FOLLOWER, current_leader={
            "leader_id": part.leader, "leader_epoch": part.leader_epoch}), 0, True
    current = getattr(p, "current_leader_epoch", -1)
    if current != -1 and current < part.leader_epoch:
        return _answer(index, E.FENCED_LEADER_EPOCH), 0, True
    if current > part.leader_epoch:
        return _answer(index, E.UNKNOWN_LEADER_EPOCH), 0, True
    plog = part.log
    offset = p.fetch_offset
    diverging = diverging_epoch(
        plog.leader_epoch_cache, plog.log_start_offset, plog.log_end_offset, offset,
        getattr(p, "last_fetched_epoch", -1))
    if diverging is not None:
        return _answer(
            index, 0, high_watermark=plog.high_watermark,
            last_stable_offset=plog.high_watermark,
            log_start_offset=plog.log_start_offset,
            diverging_epoch={"epoch": diverging[0], "end_offset": diverging[1]},
        ), 0, False
    if offset < plog.log_start_offset or offset > plog.log_end_offset:
        return _answer(index, E.OFFSET_OUT_OF_RANGE, high_watermark=plog.high_watermark,
                       log_start_offset=plog.log_start_offset), 0, True
    broker.replication.on_follower_fetch(part, replica_id, offset)
    limit = min(p.partition_max_bytes, budget)
    quota, image, now_s = broker.replication.quota, broker.image, time.monotonic()
    throttled = replica_id not in part.isr and quota.is_throttled(image, topic, index)
    if throttled:
        limit = min(limit, quota.available(image, now_s))
    data: bytes | FileSlice = b""
    if offset < plog.log_end_offset and limit > 0:
        try:
            # a large range goes out with sendfile (storage/file_slice.py)
            data = plog.read_to_send(offset, limit, plog.log_end_offset, True)
        except (OffsetOutOfRange, OSError):
            return _answer(index, E.OFFSET_OUT_OF_RANGE, high_watermark=plog.high_watermark,
                           log_start_offset=plog.log_start_offset), 0, True
    if throttled:
        quota.record(image, len(data), now_s)
    return _answer(
        index, 0, high_watermark=plog.high_watermark,
        last_stable_offset=plog.high_watermark, log_start_offset=plog.log_start_offset,
        records=data,
    ), len(data), False


async def handle_follower_fetch(
    broker: ReplicaFetchServices, ctx: RequestContext, req: Any, replica_id: int
) -> dict[str, Any]:
    use_ids = ctx.api_version >= 13
    image = broker.image
    max_bytes = getattr(req, "max_bytes", 0x7FFFFFFF) or 0x7FFFFFFF
    max_wait_ms = min(ms(req.max_wait), MAX_WAIT_CAP_MS)
    deadline = time.monotonic() + max_wait_ms / 1000
    while True:
        responses = []
        total = 0
        had_error = False
        keys: list[tuple[str, int]] = []
        for t in req.topics:
            if use_ids:
                topic_image = image.topics_by_id.get(t.topic_id)
                name = topic_image.name if topic_image else None
            else:
                name = t.topic
            parts = []
            for p in t.partitions:
                if name is None:
                    parts.append(_answer(p.partition, E.UNKNOWN_TOPIC_ID))
                    had_error = True
                    continue
                answer, size, error = _read(broker, replica_id, name, p, max_bytes - total)
                parts.append(answer)
                total += size
                had_error = had_error or error or "diverging_epoch" in answer
                keys.append((name, p.partition))
            responses.append({("topic_id" if use_ids else "topic"):
                              (t.topic_id if use_ids else t.topic), "partitions": parts})
        if total >= max(req.min_bytes, 1) or had_error:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if not await broker.replica_manager.purgatory.wait_for_any(keys, remaining,
                                                                   replica=True):
            # timed out: answer once more with the latest state (no records)
            continue
    return {"error_code": 0, "session_id": 0, "responses": responses}
