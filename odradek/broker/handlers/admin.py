"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Sequence
from typing import Any

from ...metadata import records as R
from ...metadata.controller import Admit, NewTopic, Result
from ...protocol import errors as E
from ...security.resources import AclOperation as Op
from ..context import RequestContext
from ..log_precreate import commit_with_logs
from ..services import AdminServices
from . import authz

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)


async def _within_timeout(
    work: Awaitable[dict[str, Result]], timeout: Any, names: Sequence[str], what: str,
) -> dict[str, Result]:
    """`work`'s results, or REQUEST_TIMED_OUT for `names` once the request's timeout_ms
    has passed (Kafka: the controller's deadline). The work goes on to the end either
    way: the topics may still be created, as Kafka's message says."""
    task = asyncio.ensure_future(work)
    # kio reads the request's timeout_ms as a timedelta
    timeout_ms = int(timeout.total_seconds() * 1000) if hasattr(timeout, "total_seconds") \
        else int(timeout)
    if timeout_ms <= 0:
        return await task
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout_ms / 1000)
    except TimeoutError:
        message = (f"{what} did not complete within the request's timeout_ms={timeout_ms}; "
                   "it goes on and may still complete")
        return {name: Result(E.REQUEST_TIMED_OUT, message) for name in names}


def _admit(ctx: RequestContext) -> Admit | None:
    """The request's controller mutation quota (KIP-599), if one applies."""
    return ctx.mutation_quota.admit if ctx.mutation_quota is not None else None


async def create_topics(
    broker: AdminServices, topics: Sequence[NewTopic], validate_only: bool,
    admit: Admit | None = None,
) -> dict[str, Result]:
    if broker.lifecycle is not None and not broker.is_active_controller:
        # a broker-only node, or a standby voter: the active controller decides
        return await broker.lifecycle.create_topics(topics, validate_only)
    async with broker.metadata_lock:
        image = broker.image
        results, records = broker.controller.create_topics(image, topics, validate_only, admit)
        # this node's new logs made off the event loop first (log_precreate.py)
        await commit_with_logs(broker.node_id, broker.replica_manager, image, records,
                               broker.quorum.commit)
    return results


async def handle_create_topics(broker: AdminServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    new_topics = [
        NewTopic(
            name=t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
            configs={c.name: c.value for c in t.configs},
        )
        for t in req.topics
    ]
    # CREATE on the cluster, else on each topic
    creatable = ({t.name for t in new_topics} if authz.cluster_allows(ctx, Op.CREATE)
                 else authz.topics_allowed(ctx, Op.CREATE, [t.name for t in new_topics]))
    over_budget = _over_fd_budget(broker, [
        (t.name, t.num_partitions if t.num_partitions > 0 else broker.config.num_partitions,
         t.replication_factor if t.replication_factor > 0
         else broker.config.get("default.replication.factor"),
         list(t.assignments.values()) or None)
        for t in new_topics if t.name in creatable])
    wanted = [t for t in new_topics if t.name in creatable and t.name not in over_budget]
    results = await _within_timeout(
        create_topics(broker, wanted, req.validate_only, _admit(ctx)), req.timeout,
        [t.name for t in wanted], "creating the topic")
    results.update(over_budget)
    for t in new_topics:
        if t.name not in creatable:
            results[t.name] = Result(E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    image = broker.image
    describable = authz.topics_allowed(ctx, Op.DESCRIBE_CONFIGS, [t.name for t in new_topics])
    out = []
    for t in new_topics:
        res = results[t.name]
        entry: dict[str, Any] = {
            "name": t.name,
            "topic_id": res.topic_id or ZERO_UUID,
            "error_code": res.error_code,
            "error_message": res.error_message,
            "num_partitions": res.num_partitions,
            "replication_factor": res.replication_factor,
            "configs": None,
        }
        if res.error_code == 0 and ctx.api_version >= 5:
            if t.name in describable:
                entry["configs"] = _created_topic_configs(broker, image, t)
            else:  # Kafka: the topic is created, its configs are not shown
                entry["topic_config_error_code"] = E.TOPIC_AUTHORIZATION_FAILED
        out.append(entry)
    return {"topics": out}


def _created_topic_configs(broker: AdminServices, image: Any, t: NewTopic) -> list[dict[str, Any]]:
    from ...topic_config import describe_topic_config

    overrides = {k: v for k, v in t.configs.items() if v is not None}
    return [
        {
            "name": e.name,
            "value": e.value,
            "read_only": e.read_only,
            "config_source": e.source,
            "is_sensitive": e.is_sensitive,
        }
        for e in describe_topic_config(broker.config, overrides,
                                       image.broker_configs(broker.node_id),
                                       image.configs.get((R.RESOURCE_BROKER, ""), {}))
    ]


def _over_fd_budget(
    broker: AdminServices,
    creations: Sequence[tuple[str, int, int, Sequence[Sequence[int]] | None]],
) -> dict[str, Result]:
    """The creations (name, new partitions, replication factor, assignments)
    refused for want of file descriptors here (broker/fd_budget.py), in order:
    each one accepted counts against the next. The replicas this node gets:
    those the assignments name, else an even share over the live brokers."""
    budget = broker.fd_budget
    if budget is None:
        return {}
    live = sum(1 for b in broker.image.brokers.values() if not b.fenced) or 1
    refused: dict[str, Result] = {}
    total = 0
    for name, partitions, rf, assignments in creations:
        if assignments:
            here = sum(1 for a in assignments if broker.node_id in a)
        else:
            here = -(-partitions * max(rf, 1) // live)
        why = budget.refusal(total + here)
        if why is not None:
            refused[name] = Result(E.POLICY_VIOLATION, why)
        else:
            total += here
    return refused


async def handle_delete_topics(broker: AdminServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id for t in req.topics if t.name is None]
    else:
        names = list(req.topic_names)
        ids = []
    # DELETE on each topic (by id: on the topic the id names; unknown ids look alike)
    image0 = broker.image
    named = {i: image0.topics_by_id[i].name for i in ids if i in image0.topics_by_id}
    deletable = authz.topics_allowed(ctx, Op.DELETE, names + list(named.values()))
    denied_names = [n for n in names if n not in deletable]
    denied_ids = [i for i in ids if named.get(i) not in deletable]
    names = [n for n in names if n in deletable]
    ids = [i for i in ids if named.get(i) in deletable]
    if not broker.config.get("delete.topic.enable"):
        return {
            "responses": [
                {"name": n, "topic_id": ZERO_UUID, "error_code": 73,  # TOPIC_DELETION_DISABLED
                 "error_message": "Topic deletion is disabled."}
                for n in names
            ]
            + [{"name": None, "topic_id": i, "error_code": 73,
                "error_message": "Topic deletion is disabled."} for i in ids]
        }
    async with broker.metadata_lock:
        image = broker.image
        by_name, by_id, records = broker.controller.delete_topics(image, names, ids,
                                                                  _admit(ctx))
        await broker.quorum.commit(records)
    responses = []
    for n in names:
        r = by_name[n]
        responses.append(
            {"name": n, "topic_id": r.topic_id or ZERO_UUID, "error_code": r.error_code,
             "error_message": r.error_message}
        )
    for i in ids:
        r = by_id[i]
        t = image.topics_by_id.get(i)
        responses.append(
            {"name": t.name if t else None, "topic_id": i, "error_code": r.error_code,
             "error_message": r.error_message}
        )
    responses += [{"name": n, "topic_id": ZERO_UUID, "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                   "error_message": "Authorization failed."} for n in denied_names]
    responses += [{"name": None, "topic_id": i, "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                   "error_message": "Authorization failed."} for i in denied_ids]
    return {"responses": responses}


async def handle_create_partitions(
    broker: AdminServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    requests = [
        (
            t.name,
            t.count,
            [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
        )
        for t in req.topics
    ]
    alterable = authz.topics_allowed(ctx, Op.ALTER, [name for name, _, _ in requests])
    image = broker.image
    growth = []
    for name, count, assignments in requests:
        topic = image.topics_by_name.get(name)
        if name in alterable and topic is not None and count > len(topic.partitions):
            rf = len(topic.partitions[0].replicas) if topic.partitions else 1
            growth.append((name, count - len(topic.partitions), rf, assignments))
    over_budget = _over_fd_budget(broker, growth)
    wanted = [r for r in requests if r[0] in alterable and r[0] not in over_budget]

    async def create() -> dict[str, Result]:
        async with broker.metadata_lock:
            image = broker.image
            results, records = broker.controller.create_partitions(
                image, wanted, req.validate_only, _admit(ctx))
            await commit_with_logs(broker.node_id, broker.replica_manager, image, records,
                                   broker.quorum.commit)
        return results

    results = await _within_timeout(create(), req.timeout, [r[0] for r in wanted],
                                    "creating the partitions")
    results.update(over_budget)
    for name, _, _ in requests:
        if name not in alterable:
            results[name] = Result(E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    return {
        "results": [
            {"name": name, "error_code": results[name].error_code,
             "error_message": results[name].error_message}
            for name, _, _ in requests
        ]
    }


async def handle_delete_records(broker: AdminServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    deletable = authz.topics_allowed(ctx, Op.DELETE, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part = broker.replica_manager.get(t.name, p.partition_index)
            if t.name not in deletable:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": E.TOPIC_AUTHORIZATION_FAILED})
                continue
            if part is None:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": E.UNKNOWN_TOPIC_OR_PARTITION})
                continue
            plog = part.log
            if plog.offline:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": E.KAFKA_STORAGE_ERROR})
                continue
            offset = p.offset
            if offset == -1:
                offset = plog.high_watermark
            if offset < 0 or offset > plog.high_watermark:
                parts.append({"partition_index": p.partition_index,
                              "low_watermark": plog.log_start_offset,
                              "error_code": E.OFFSET_OUT_OF_RANGE})
                continue
            # the remote tier's part: the offset is stored in the remote tier before the
            # answer (a restart must not bring the records back), the segments wholly
            # below it go asynchronously (tiered/remote_log_manager.py)
            plog.remote_deleted_before = max(plog.remote_deleted_before, offset)
            tier = broker.remote_tier
            if tier is not None and plog.config.remote_storage_enable:
                try:
                    await tier.rlm.store_start_offset(part)
                except Exception as e:  # noqa: BLE001 - any store error: retried
                    log.warning("%s-%d: cannot store the log start offset %d in the remote "
                                "tier: %r", t.name, p.partition_index, offset, e)
                    parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                                  "error_code": E.KAFKA_STORAGE_ERROR})
                    continue
            if offset > plog.log_start_offset:
                try:
                    plog.delete_records_before(offset)
                except OSError:  # the dir went offline (logged by the log manager)
                    parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                                  "error_code": E.KAFKA_STORAGE_ERROR})
                    continue
            parts.append({"partition_index": p.partition_index,
                          "low_watermark": plog.start_offset_with_remote, "error_code": 0})
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}
