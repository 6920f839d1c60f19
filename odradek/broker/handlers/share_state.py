"""The share coordinator's inter-broker APIs (KIP-932): InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
ReadShareGroupStateSummary.

Sent by share-partition leaders (coordinator/share_persister.py) to the leader
of the key's `__share_group_state` partition, which answers through its share
coordinator (coordinator/share_coordinator_service.py). Cluster-internal, as in
Kafka: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every
partition. A key this broker does not coordinate is NOT_COORDINATOR; the
topic is created by the first such request if it does not exist yet.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...coordinator import errors as CE
from ...coordinator.share_persister import delivery_complete_count
from ...protocol import errors as E
from ...security.resources import CLUSTER_NAME, AclOperation, ResourceType
from ..context import RequestContext
from ..services import ShareServices

Answer = dict[str, Any]


async def _each(broker: ShareServices, ctx: RequestContext, req: Any,
                one: Callable[[Any, tuple[Any, Any, int], Any], Awaitable[Answer]]
                ) -> dict[str, Any]:
    allowed = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    service = broker.share.coordinator
    if allowed and service is not None:
        # created on first need (Kafka creates it on FindCoordinator with key type SHARE)
        await service.ensure_topic()
    results = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            key = (req.group_id, topic.topic_id, p.partition)
            entry: Answer = {"partition": p.partition, "error_code": E.NONE,
                             "error_message": None}
            if not allowed:
                entry["error_code"] = E.CLUSTER_AUTHORIZATION_FAILED
            elif service is None or topic.topic_id is None:
                entry["error_code"] = CE.NOT_COORDINATOR
            else:
                entry.update(await one(service, key, p))
            parts.append(entry)
        results.append({"topic_id": topic.topic_id, "partitions": parts})
    return {"results": results}


async def handle_initialize_share_group_state(broker: ShareServices, ctx: RequestContext,
                                              req: Any) -> dict[str, Any]:
    async def one(service: Any, key: Any, p: Any) -> Answer:
        return {"error_code": await service.initialize(key, p.state_epoch, p.start_offset)}
    return await _each(broker, ctx, req, one)


async def handle_read_share_group_state(broker: ShareServices, ctx: RequestContext,
                                        req: Any) -> dict[str, Any]:
    async def one(service: Any, key: Any, p: Any) -> Answer:
        code, state = await service.read(key, p.leader_epoch)
        out: Answer = {"error_code": code, "state_epoch": 0, "start_offset": -1,
                       "state_batches": []}
        if state is not None:
            out.update(state_epoch=state.state_epoch, start_offset=state.start_offset,
                       state_batches=[{"first_offset": a, "last_offset": b,
                                       "delivery_state": s, "delivery_count": c}
                                      for a, b, c, s in state.batches])
        return out
    answer = await _each(broker, ctx, req, one)
    for t in answer["results"]:
        for p in t["partitions"]:
            p.setdefault("state_epoch", 0)
            p.setdefault("start_offset", -1)
            p.setdefault("state_batches", [])
    return answer


async def handle_write_share_group_state(broker: ShareServices, ctx: RequestContext,
                                         req: Any) -> dict[str, Any]:
    async def one(service: Any, key: Any, p: Any) -> Answer:
        batches = [(b.first_offset, b.last_offset, b.delivery_count, b.delivery_state)
                   for b in p.state_batches]
        return {"error_code": await service.write(key, p.state_epoch, p.leader_epoch,
                                                  p.start_offset, batches)}
    return await _each(broker, ctx, req, one)


async def handle_delete_share_group_state(broker: ShareServices, ctx: RequestContext,
                                          req: Any) -> dict[str, Any]:
    async def one(service: Any, key: Any, p: Any) -> Answer:
        return {"error_code": await service.delete(key)}
    return await _each(broker, ctx, req, one)


async def handle_read_share_group_state_summary(broker: ShareServices, ctx: RequestContext,
                                                req: Any) -> dict[str, Any]:
    async def one(service: Any, key: Any, p: Any) -> Answer:
        code, state = await service.summary(key)
        out: Answer = {"error_code": code, "state_epoch": 0, "leader_epoch": -1,
                       "start_offset": -1, "delivery_complete_count": -1}
        if state is not None:
            done = delivery_complete_count(state.batches)
            out.update(state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                       start_offset=state.start_offset, delivery_complete_count=done)
        return out
    answer = await _each(broker, ctx, req, one)
    for t in answer["results"]:
        for p in t["partitions"]:
            for k, v in (("state_epoch", 0), ("leader_epoch", -1), ("start_offset", -1),
                         ("delivery_complete_count", -1)):
                p.setdefault(k, v)
    return answer
