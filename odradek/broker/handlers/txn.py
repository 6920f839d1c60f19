"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
WriteTxnMarkers, DescribeProducers, DescribeTransactions, ListTransactions, and
InitProducerId for transactional ids.

Thin translations to the transaction coordinator (coordinator/transaction*.py),
the group coordinator (TxnOffsetCommit) and the partition logs' producer state
(DescribeProducers, WriteTxnMarkers). Writes are answered once the ISR has
them (coordinator/replicated.py).
"""

from __future__ import annotations

import re
from typing import Any

from ...clock import steady_ms
from ...coordinator.core import OFFSETS_TOPIC
from ...coordinator.records import OffsetValue, offset_key, offset_value
from ...coordinator.replicated import OFFSET_COMMIT_ERRORS, mapped
from ...coordinator.transaction import TxnOut
from ...coordinator.transaction_service import TransactionCoordinatorService
from ...coordinator.txn_markers import advance_high_watermark, write_markers
from ...metadata import features as F
from ...protocol import errors as E
from ...protocol import records as batches
from ...protocol.entities import ms
from ...security.resources import CLUSTER_NAME, AclOperation, ResourceType
from ..context import RequestContext
from ..services import TxnServices
from . import authz


def _service(broker: TxnServices) -> TransactionCoordinatorService:
    service: TransactionCoordinatorService | None = getattr(broker, "txn_coordinator", None)
    assert service is not None, "the broker wires the transaction coordinator in start()"
    return service


def _now() -> int:
    # The transaction coordinator's clock (see odradek/clock.py).
    return steady_ms()


async def init_transactional_producer_id(broker: TxnServices, req: Any) -> dict[str, Any]:
    service = _service(broker)
    code, pid, epoch = await service.init_producer_id(
        req.transactional_id, ms(req.transaction_timeout),
        getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1))
    return {"error_code": code, "producer_id": pid, "producer_epoch": epoch}


# -- AddPartitionsToTxn -------------------------------------------------------------------


def _may_write_txn(ctx: RequestContext, tid: str | None) -> bool:
    return tid is not None and ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                             tid)


async def _add_partitions(broker: TxnServices, ctx: RequestContext, tid: str, pid: int,
                          epoch: int, topics: Any, verify_only: bool) -> list[dict[str, Any]]:
    service = _service(broker)
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    image = broker.image
    writable = authz.topics_allowed(ctx, AclOperation.WRITE, [t for t, _ in wanted])
    for topic, p in wanted:  # any broker may lead it: the metadata image knows
        t = image.topics_by_name.get(topic)
        if not _may_write_txn(ctx, tid):
            errors[(topic, p)] = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif topic not in writable:
            errors[(topic, p)] = E.TOPIC_AUTHORIZATION_FAILED
        elif t is None or p not in t.partitions:
            errors[(topic, p)] = E.UNKNOWN_TOPIC_OR_PARTITION
    if verify_only:
        for tp in wanted:
            if tp not in errors:
                errors[tp] = (service.core.coordinator_error(tid)
                              or service.core.verify_partition(tid, pid, epoch, tp))
    elif errors:
        for tp in wanted:
            errors.setdefault(tp, E.OPERATION_NOT_ATTEMPTED)
    else:
        out = TxnOut()
        code = service.write_refused(tid)
        if code == E.NONE:
            code = service.core.add_partitions(tid, pid, epoch, wanted, _now(), out)
        if code == E.NONE:
            code = await service.apply(out, tid)
        errors = {tp: code for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": parts} for t, parts in by_topic.items()]


async def handle_add_partitions_to_txn(broker: TxnServices, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    await _service(broker).ensure_topic()
    if ctx.api_version <= 3:
        results = await _add_partitions(
            broker, ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
        return {"results_by_topic_v3_and_below": results}
    if not authz.cluster_allows(ctx, AclOperation.CLUSTER_ACTION):
        # v4+ batches come from brokers (KIP-890 verification): CLUSTER_ACTION
        return {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "results_by_transaction": []}
    return {
        "error_code": E.NONE,
        "results_by_transaction": [
            {"transactional_id": t.transactional_id,
             "topic_results": await _add_partitions(
                 broker, ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                 t.verify_only)}
            for t in req.transactions
        ],
    }


# -- AddOffsetsToTxn / TxnOffsetCommit -------------------------------------------------------


async def handle_add_offsets_to_txn(broker: TxnServices, ctx: RequestContext, req: Any
                                    ) -> dict[str, Any]:
    if not _may_write_txn(ctx, req.transactional_id):
        return {"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED}
    service = _service(broker)
    groups = broker.group_coordinator
    if await groups.ensure_offsets_topic() != E.NONE:
        return {"error_code": E.COORDINATOR_NOT_AVAILABLE}
    tp = (OFFSETS_TOPIC, groups.core.partition_for(req.group_id))
    out = TxnOut()
    code = service.write_refused(req.transactional_id)
    if code == E.NONE:
        code = service.core.add_partitions(req.transactional_id, req.producer_id,
                                           req.producer_epoch, [tp], _now(), out)
    if code == E.NONE:
        code = await service.apply(out, req.transactional_id)
    return {"error_code": code}


# the transaction coordinator's conditions a TxnOffsetCommit v5 client retries on
_COORDINATOR_BUSY = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE,
                               E.CONCURRENT_TRANSACTIONS})


async def handle_txn_offset_commit(broker: TxnServices, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    groups = broker.group_coordinator
    await groups.ensure_offsets_topic()
    core = groups.core
    now = _now()
    code = core.check(req.group_id)
    if not _may_write_txn(ctx, req.transactional_id):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        code = E.GROUP_AUTHORIZATION_FAILED
    readable = authz.topics_allowed(ctx, AclOperation.READ, [t.name for t in req.topics])
    generation = getattr(req, "generation_id", -1)
    if code == E.NONE and generation >= 0:
        code = core._validate_commit(req.group_id, getattr(req, "member_id", ""),
                                     getattr(req, "group_instance_id", None), generation, 9, now)
    offsets_tp = (OFFSETS_TOPIC, core.partition_for(req.group_id))
    if code == E.NONE and ctx.api_version >= 5 and broker.image.feature_level(
            F.TRANSACTION_VERSION) >= F.TV2:
        # Transactions v2: TxnOffsetCommit v5 adds the group's partition itself
        # (no AddOffsetsToTxn), with this node's or a remote transaction coordinator.
        added = await _service(broker).verifier.add(
            req.transactional_id, req.producer_id, req.producer_epoch, [offsets_tp])
        code = added[offsets_tp]
        if code in _COORDINATOR_BUSY:
            code = E.COORDINATOR_LOAD_IN_PROGRESS  # retried; not the group's coordinator
    elif code == E.NONE:
        # The producer must have added the group's partition (AddOffsetsToTxn).
        code = _service(broker).core.verify_partition(
            req.transactional_id, req.producer_id, req.producer_epoch, offsets_tp)
    if code == E.NONE:
        # acks=all: below min.insync.replicas nothing is written.
        code = mapped(OFFSET_COMMIT_ERRORS, groups.write_refused(req.group_id))
    results = []
    records: list[batches.Record] = []
    pending: list[tuple[tuple[str, int], OffsetValue]] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            pcode = code
            if pcode == E.NONE and t.name not in readable:
                pcode = E.TOPIC_AUTHORIZATION_FAILED
            metadata = p.committed_metadata or ""
            if pcode == E.NONE and len(metadata.encode()) > core.config.offset_metadata_max_bytes:
                pcode = 12  # OFFSET_METADATA_TOO_LARGE
            if pcode == E.NONE:
                value = OffsetValue(p.committed_offset,
                                    getattr(p, "committed_leader_epoch", -1), metadata, now)
                pending.append(((t.name, p.partition_index), value))
                records.append(batches.Record(
                    offset=-1, timestamp=now,
                    key=offset_key(req.group_id, t.name, p.partition_index),
                    value=offset_value(value)))
            parts.append({"partition_index": p.partition_index, "error_code": pcode})
        results.append({"name": t.name, "partitions": parts})
    if records and not _append_txn_offsets(broker, core.partition_for(req.group_id),
                                           req.producer_id, req.producer_epoch, records):
        for r in results:
            for p in r["partitions"]:
                p["error_code"] = E.COORDINATOR_NOT_AVAILABLE
        return {"topics": results}
    for tp, value in pending:
        core.txn_offsets.add(req.producer_id, req.group_id, tp, value)
    if records:
        # Answered once the ISR has the offsets (as OffsetCommit).
        code = mapped(OFFSET_COMMIT_ERRORS, await groups.replicated(req.group_id))
        for r in results:
            for p in r["partitions"]:
                if p["error_code"] == E.NONE:
                    p["error_code"] = code
    return {"topics": results}


def _append_txn_offsets(broker: TxnServices, partition: int, pid: int, epoch: int,
                        records: list[batches.Record]) -> bool:
    part = broker.replica_manager.get(OFFSETS_TOPIC, partition)
    if part is None:
        return False
    batch = bytearray(batches.build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True))
    headers = list(batches.iter_batch_headers(batch))
    try:
        part.log.append_as_leader(batch, headers, part.leader_epoch)
    except OSError:
        return False
    advance_high_watermark(broker, part)
    return True


# -- EndTxn / WriteTxnMarkers ----------------------------------------------------------------


async def handle_end_txn(broker: TxnServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not _may_write_txn(ctx, req.transactional_id):
        return {"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    # transactions v2 (KIP-890 part 2): EndTxn v5 on a cluster at transaction.version 2
    bump = ctx.api_version >= 5 and broker.image.feature_level(F.TRANSACTION_VERSION) >= F.TV2
    code, pid, epoch = await _service(broker).end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, bump)
    return {"error_code": code, "producer_id": pid, "producer_epoch": epoch}  # v5+


async def handle_write_txn_markers(broker: TxnServices, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    # Kafka appends markers with acks=-1 and request.timeout.ms.
    timeout_ms: int = broker.config.get("request.timeout.ms")
    # Only brokers write markers: CLUSTER_ACTION, answered per partition (the
    # response has no top-level error code).
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    markers = []
    for m in req.markers:
        if not allowed:
            codes = {(t.name, p): E.CLUSTER_AUTHORIZATION_FAILED
                     for t in m.topics for p in t.partition_indexes}
        else:
            codes = await write_markers(
                broker, [(t.name, p) for t in m.topics for p in t.partition_indexes],
                m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                timeout_ms, int(getattr(m, "transaction_version", 0)))  # v2: KIP-890
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p, "error_code": codes[(t.name, p)]}
                            for p in t.partition_indexes]}
            for t in m.topics
        ]
        markers.append({"producer_id": m.producer_id, "topics": topics})
    return {"markers": markers}


# -- admin ----------------------------------------------------------------------------------


async def handle_describe_producers(broker: TxnServices, ctx: RequestContext, req: Any
                                    ) -> dict[str, Any]:
    topics = []
    readable = authz.topics_allowed(ctx, AclOperation.READ, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            part = broker.replica_manager.get(t.name, p)
            entry: dict[str, Any] = {"partition_index": p, "error_code": E.NONE,
                                     "error_message": None, "active_producers": []}
            if t.name not in readable:
                entry["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                entry["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif part.leader != broker.node_id:
                entry["error_code"] = E.NOT_LEADER_OR_FOLLOWER
            else:
                entry["active_producers"] = [
                    {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                     "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": e.coordinator_epoch,
                     "current_txn_start_offset": e.current_txn_first_offset}
                    for e in part.log.producer_state.producers.values()
                ]
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}


async def handle_describe_transactions(broker: TxnServices, ctx: RequestContext, req: Any
                                       ) -> dict[str, Any]:
    core = _service(broker).core
    states = []
    described = authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                              req.transactional_ids)
    for tid in req.transactional_ids:
        code, txn = core.describe(tid) if tid in described else (
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        entry: dict[str, Any] = {"error_code": code, "transactional_id": tid,
                                 "transaction_state": "", "transaction_timeout": 0,
                                 "transaction_start_time": 0, "producer_id": -1,
                                 "producer_epoch": -1, "topics": []}
        if txn is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(p)
            entry.update(
                transaction_state=txn.state.kafka_name, transaction_timeout=txn.timeout_ms,
                transaction_start_time=txn.start_ms, producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        states.append(entry)
    return {"transaction_states": states}


KNOWN_STATES = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                "CompleteAbort", "PrepareEpochFence", "Dead"}


async def handle_list_transactions(broker: TxnServices, ctx: RequestContext, req: Any
                                   ) -> dict[str, Any]:
    core = _service(broker).core
    filters = set(req.state_filters)
    unknown = sorted(filters - KNOWN_STATES)
    pattern = getattr(req, "transactional_id_pattern", None)
    try:
        txns = core.list(filters & KNOWN_STATES if filters else set(),
                         set(req.producer_id_filters), getattr(req, "duration_filter", -1),
                         pattern, _now())
    except re.error:  # a pattern that is not a regular expression
        return {"error_code": E.INVALID_REQUEST, "unknown_state_filters": unknown,
                "transaction_states": []}
    if filters and not filters & KNOWN_STATES:
        txns = []
    visible = authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                            [t.transactional_id for t in txns])
    txns = [t for t in txns if t.transactional_id in visible]
    return {
        "error_code": E.NONE,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id,
             "transaction_state": t.state.kafka_name}
            for t in txns
        ],
    }
