"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455).

Both are decided by the active controller (`metadata/reassignment.py`); a
broker-only node relays them unchanged (broker.py's FORWARDED_TO_CONTROLLER),
as a KRaft broker forwards them. AlterPartitionReassignments answers once the
reassignment has started (its first record is committed), not when it ends:
clients poll ListPartitionReassignments, as kafka-reassign-partitions.sh does.
"""

from __future__ import annotations

from typing import Any

from ...metadata import reassignment
from ...metadata.image import MetadataImage
from ..context import RequestContext
from ..services import ReassignmentServices

NOT_CONTROLLER = 41


async def handle_alter_partition_reassignments(
    broker: ReassignmentServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    service = broker.controller_service
    base = {"throttle_time": 0, "error_message": None}
    if ctx.api_version >= 1:
        base["allow_replication_factor_change"] = bool(req.allow_replication_factor_change)
    if service is None or not service.active:  # a broker, or a standby controller
        return {**base, "error_code": NOT_CONTROLLER, "responses": []}
    requests = [
        (
            t.name,
            int(p.partition_index),
            None if p.replicas is None else [int(r) for r in p.replicas],
        )
        for t in req.topics
        for p in t.partitions
    ]
    allow_rf_change = bool(getattr(req, "allow_replication_factor_change", True))
    outcomes: list[list[reassignment.Outcome]] = []

    def decision(image: MetadataImage) -> list[Any]:
        answer, records = reassignment.alter(
            image, requests, service.control.unclean_leader_election, allow_rf_change
        )
        outcomes.append(answer)
        return service.control.with_elr(image, records)  # KIP-966 (metadata/elr.py)

    await service.decide(decision)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index, _), (code, message) in zip(requests, outcomes[0]):
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "error_code": code, "error_message": message}
        )
    return {
        **base,
        "error_code": 0,
        "responses": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


async def handle_list_partition_reassignments(
    broker: ReassignmentServices, ctx: RequestContext, req: Any
) -> dict[str, Any]:
    base = {"throttle_time": 0, "error_message": None}
    service = broker.controller_service
    if service is None or not service.active:
        return {**base, "error_code": NOT_CONTROLLER, "topics": []}
    named = (
        None
        if req.topics is None
        else [(t.name, [int(i) for i in t.partition_indexes]) for t in req.topics]
    )
    found = reassignment.ongoing(broker.image, named)
    return {
        **base,
        "error_code": 0,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": o.partition,
                        "replicas": list(o.replicas),
                        "adding_replicas": list(o.adding),
                        "removing_replicas": list(o.removing),
                    }
                    for o in parts
                ],
            }
            for name, parts in found
        ],
    }
