"""Produce: validate record batches as bytes and append them to partition logs.

No record is decoded here: the batch headers are checked (magic, lengths, CRC)
and the bytes go to the log with base offset and leader epoch patched in place.
The one exception is a topic whose cleanup.policy has ``compact``: its records
are walked up to their keys, since a record without a key is refused there.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ...metadata import features as F
from ...protocol import errors as E
from ...protocol.entities import ms
from ...protocol.record_scan import check_records
from ...protocol.records import InvalidRecords, decompression_bound, validate_produce_records
from ...security.resources import AclOperation as Op
from ...security.resources import ResourceType
from ...storage.log_config import LONG_MAX
from ..context import Later, RequestContext
from ..producer_checks import check_producer_batch
from ..services import ProduceServices
from . import authz

log = logging.getLogger(__name__)


def _partition_error(index: int, code: int, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def _timestamp_problem(headers: Any, config: Any) -> str | None:
    """KIP-937 bounds on CreateTime timestamps, checked per batch.

    Records are not decoded: a batch's first record timestamp (its base
    timestamp) and its max timestamp stand for its records. Kafka checks every
    record; a batch whose middle records alone are out of bounds passes here.
    """
    before_ms = config.message_timestamp_before_max_ms
    after_ms = config.message_timestamp_after_max_ms
    if before_ms >= LONG_MAX and after_ms >= LONG_MAX:
        return None
    now_ms = int(time.time() * 1000)
    for h in headers:
        earliest = min(h.base_timestamp, h.max_timestamp)
        if earliest >= 0 and now_ms - earliest > before_ms:
            return (
                f"Timestamp {earliest} of a record is out of range: it is more than "
                f"message.timestamp.before.max.ms={before_ms} before the broker's time {now_ms}"
            )
        if h.max_timestamp - now_ms > after_ms:
            return (
                f"Timestamp {h.max_timestamp} of a record is out of range: it is more than "
                f"message.timestamp.after.max.ms={after_ms} after the broker's time {now_ms}"
            )
    return None


# Record errors listed in one answer (Kafka lists them all; the count is exact).
MAX_RECORD_ERRORS = 100


def _keyless_record_error(keyless: list[int], topic: str, index: int) -> dict[str, Any]:
    """Kafka's ``LogValidator.validateKey``: a compacted topic needs a key on every record."""
    why = f"Compacted topic cannot accept message without key in topic partition {topic}-{index}"
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in keyless[:3])
    answer = _partition_error(
        index,
        E.INVALID_RECORD,
        f"One or more records have been rejected due to {len(keyless)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
    )
    answer["record_errors"] = [
        {"batch_index": i, "batch_index_error_message": why}
        for i in keyless[:MAX_RECORD_ERRORS]
    ]
    return answer


@dataclass(frozen=True, slots=True)
class _NamedTopic:
    name: str | None  # None: no topic has the id (answered UNKNOWN_TOPIC_ID)
    topic_id: uuid.UUID | None
    partition_data: Any


@dataclass(frozen=True, slots=True)
class _NamedRequest:
    transactional_id: str | None
    acks: int
    timeout: Any
    topic_data: tuple[_NamedTopic, ...]


def _by_name(req: Any, image: Any) -> _NamedRequest:
    """Produce v13 names topics by id (KIP-516): the request with each topic's
    name from the metadata image, so the rest of the handler reads names."""
    topics = []
    for t in req.topic_data:
        found = image.topics_by_id.get(t.topic_id) if t.topic_id is not None else None
        topics.append(_NamedTopic(found.name if found is not None else None, t.topic_id,
                                  t.partition_data))
    return _NamedRequest(req.transactional_id, req.acks, req.timeout, tuple(topics))


async def handle_produce(broker: ProduceServices, ctx: RequestContext,
                         req: Any) -> dict[str, Any] | Later | None:
    if ctx.api_version >= 13:
        req = _by_name(req, broker.image)
    acks = req.acks
    rm = broker.replica_manager
    node_id = broker.node_id
    responses = []
    # Appends whose flush policy asks for an fsync: answered once the flusher
    # (storage/flusher.py) has synced them, many appends to one fsync.
    flushes: list[tuple[dict[str, Any], Any]] = []
    # acks=all appends the ISR has not all fetched yet: they wait (the produce
    # purgatory) for the high watermark to pass them, or the request timeout.
    replicated: list[tuple[dict[str, Any], Any, int]] = []
    # KIP-890 with a coordinator on another broker: asked once, before the appends.
    # WRITE on the transactional id (all partitions fail without it), then on each topic
    txn_denied = req.transactional_id is not None and not ctx.authorize(
        Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    writable = set() if txn_denied else authz.topics_allowed(
        ctx, Op.WRITE, [t.name for t in req.topic_data if t.name is not None])
    # Transactions v2 (KIP-890 part 2): Produce v12+ adds the partitions itself.
    implicit_add = (ctx.api_version >= 12 and broker.image.feature_level(
        F.TRANSACTION_VERSION) >= F.TV2)
    verified = (await broker.txn_coordinator.verifier.verify(req, implicit_add)
                if req.transactional_id and not txn_denied else {})
    for topic in req.topic_data:
        name = topic.name
        parts = []
        for pd in topic.partition_data:
            index = pd.index
            if name is None:
                parts.append(_partition_error(index, E.UNKNOWN_TOPIC_ID))
                continue
            if txn_denied:
                parts.append(_partition_error(index, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                continue
            if name not in writable:
                parts.append(_partition_error(index, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            if acks not in (0, 1, -1):
                parts.append(_partition_error(index, E.INVALID_REQUIRED_ACKS))
                continue
            part = rm.partitions.get((name, index))
            if part is None:
                parts.append(_partition_error(index, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if part.log.offline:  # its log dir is offline (storage/log_manager.py)
                parts.append(_partition_error(index, E.KAFKA_STORAGE_ERROR))
                continue
            if part.leader != node_id:
                parts.append(_partition_error(index, E.NOT_LEADER_OR_FOLLOWER))
                continue
            plog = part.log
            refused = rm.log_manager.write_refused(plog)
            if refused is not None:  # below the free-space floor (storage/free_space.py)
                parts.append(_partition_error(index, E.NOT_ENOUGH_REPLICAS, refused))
                continue
            records = pd.records
            if not records:
                parts.append(_partition_error(index, E.CORRUPT_MESSAGE, "empty record set"))
                continue
            buf = bytearray(records)
            try:
                headers = validate_produce_records(buf, plog.config.max_message_bytes)
            except InvalidRecords as e:
                parts.append(_partition_error(index, e.error_code, e.message))
                continue
            if not plog.config.log_append_time:
                problem = _timestamp_problem(headers, plog.config)
                if problem:
                    parts.append(_partition_error(index, E.INVALID_TIMESTAMP, problem))
                    continue
            if len(headers) != 1:
                # Kafka's rule for Produce v3+: exactly one batch per partition.
                parts.append(
                    _partition_error(
                        index,
                        E.INVALID_RECORD,
                        f"Produce requests with version {ctx.api_version} must contain exactly "
                        f"one record batch per partition, got {len(headers)}",
                    )
                )
                continue
            try:  # every record decodes (Kafka's LogValidator); which have no key
                keyless = check_records(buf, headers[0], decompression_bound(
                    headers[0].size, plog.config.max_message_bytes))
            except InvalidRecords as e:
                if e.error_code == E.MESSAGE_TOO_LARGE and headers[0].compression:
                    log.warning("refused a batch for %s-%d from %s (client %r): %d bytes "
                                "with codec %d: %s", name, index, ctx.peer, ctx.client_id,
                                headers[0].size, headers[0].compression, e.message)
                parts.append(_partition_error(index, e.error_code, e.message))
                continue
            if keyless and "compact" in plog.config.cleanup_policy.split(","):
                parts.append(_keyless_record_error(keyless, name, index))
                continue
            if acks == -1 and len(part.isr) < plog.config.min_insync_replicas:
                parts.append(
                    _partition_error(
                        index,
                        E.NOT_ENOUGH_REPLICAS,
                        f"The size of the current ISR {list(part.isr)} is insufficient to "
                        f"satisfy the min.isr requirement of {plog.config.min_insync_replicas}",
                    )
                )
                continue
            if headers[0].producer_id >= 0:
                # Idempotence, fencing and KIP-890 verification (broker/producer_checks.py).
                verdict = check_producer_batch(
                    broker.txn_coordinator, plog, headers[0], req.transactional_id, name, index,
                    verified.get((name, index)),
                )
                if verdict is not None:
                    error = verdict.error
                    if error and error[0] == E.TRANSACTION_ABORTABLE and ctx.api_version < 11:
                        # KIP-890: Produce v11 brought the code; before, INVALID_TXN_STATE
                        error = (E.INVALID_TXN_STATE, error[1])
                    parts.append(_partition_error(index, *error) if error else {
                        **_partition_error(index, 0),
                        "base_offset": verdict.first_offset,
                        "log_start_offset": plog.log_start_offset,
                    })
                    # A duplicate's first copy may not be replicated yet: acks=all
                    # waits for it as for a new append (Kafka does too).
                    required = verdict.first_offset + headers[0].last_offset_delta + 1
                    if acks == -1 and not verdict.error and plog.high_watermark < required:
                        replicated.append((parts[-1], part, required))
                    continue
            try:
                info = plog.append_as_leader(buf, headers, part.leader_epoch)
            except OSError as e:
                if not plog.offline:
                    log.error("append to %s-%d failed: %s", name, index, e)
                parts.append(_partition_error(index, E.KAFKA_STORAGE_ERROR, str(e)))
                continue
            rm.log_manager.appended(plog, len(buf))
            # The high watermark: the smallest log end offset over the ISR
            # (with the leader alone in it, its own) (replication/leader_replication.py).
            broker.replication.on_leader_append(part)
            rm.purgatory.notify((name, index))
            answer = {
                "index": index,
                "error_code": 0,
                "base_offset": info.first_offset,
                "log_append_time": info.log_append_time_ms
                if info.log_append_time_ms >= 0
                else None,
                "log_start_offset": info.log_start_offset,
                "record_errors": [],
                "error_message": None,
            }
            parts.append(answer)
            if info.flush_needed and rm.log_manager.flusher is not None:
                flushes.append((answer, rm.log_manager.flusher.request_flush(plog)))
            if acks == -1 and plog.high_watermark <= info.last_offset:
                replicated.append((answer, part, info.last_offset + 1))
        responses.append({"name": name, "topic_id": getattr(topic, "topic_id", None),
                          "partition_responses": parts})
    if not flushes and not replicated:
        return None if acks == 0 else {"responses": responses}
    if acks == 0:  # no answer, but the appends are flushed before the next request
        await _wait(broker, responses, flushes, replicated, req.timeout)
        return None
    if ctx.may_answer_later:
        # The appends are done, in the connection's order: the waiting may
        # overlap the connection's next requests (network.py keeps the answers
        # in order), so that one client's acks=all requests share the
        # followers' rounds instead of taking one round each.
        return Later(asyncio.ensure_future(
            _wait(broker, responses, flushes, replicated, req.timeout)))
    return await _wait(broker, responses, flushes, replicated, req.timeout)


async def _wait(broker: ProduceServices, responses: list[dict[str, Any]],
                flushes: list[tuple[dict[str, Any], Any]],
                replicated: list[tuple[dict[str, Any], Any, int]],
                timeout: Any) -> dict[str, Any]:
    """The produce purgatory: the fsyncs the flush policy asked for, then the
    high watermark past every acks=all append (or the request timeout)."""
    for answer, flushed in flushes:
        try:
            await flushed
        except OSError as e:
            answer.update(_partition_error(answer["index"], E.KAFKA_STORAGE_ERROR, str(e)))
    if replicated:
        deadline = time.monotonic() + max(ms(timeout), 0) / 1000
        for answer, part, required in replicated:
            if answer["error_code"]:
                continue
            code = await broker.replication.wait_for_high_watermark(part, required, deadline)
            if code:
                answer.update(_partition_error(answer["index"], code))
    return {"responses": responses}
