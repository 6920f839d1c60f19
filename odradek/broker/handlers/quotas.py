"""DescribeClientQuotas and AlterClientQuotas (KIP-546): client quotas live in
the metadata log as ClientQuotaRecords (metadata/client_quotas.py); every
broker enforces what its image holds (broker/quotas.py, the pipeline's
throttle stage). AlterClientQuotas is relayed to the active controller by
broker-only nodes (apis.py: forwarded)."""

from __future__ import annotations

from typing import Any

from ...metadata import client_quotas as Q
from ..context import RequestContext
from ..services import QuotaServices


def _entity(parts: Any) -> Q.Entity:
    return Q.entity_of([(p.entity_type, p.entity_name) for p in parts])


def _wire(ent: Q.Entity) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in ent]


async def handle_describe_client_quotas(broker: QuotaServices, ctx: RequestContext,
                                        req: Any) -> dict[str, Any]:
    components = [(c.entity_type, int(c.match_type), c.match) for c in req.components]
    try:
        found = Q.describe(broker.image.client_quotas, components, req.strict)
    except Q.QuotaError as e:
        return {"error_code": e.error_code, "error_message": str(e), "entries": None}
    return {"error_code": 0, "error_message": None, "entries": [
        {"entity": _wire(ent),
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for ent, values in found]}


async def handle_alter_client_quotas(broker: QuotaServices, ctx: RequestContext,
                                     req: Any) -> dict[str, Any]:
    entries = [(_entity(e.entity), [Q.Op(o.key, float(o.value), bool(o.remove)) for o in e.ops])
               for e in req.entries]
    async with broker.metadata_lock:
        results, records = Q.alter(broker.image.client_quotas, entries, req.validate_only)
        await broker.quorum.commit(records)
    return {"entries": [
        {"error_code": r.error_code, "error_message": r.error_message,
         "entity": _wire(r.entity)} for r in results]}


def alter_client_quotas_errors(req: Any, code: int, message: str) -> dict[str, Any]:
    """A refused AlterClientQuotas (no ALTER_CONFIGS on the cluster): Kafka
    answers each entry with the error (the response has no top-level code)."""
    return {"entries": [{"error_code": code, "error_message": message,
                         "entity": [{"entity_type": c.entity_type, "entity_name": c.entity_name}
                                    for c in e.entity]} for e in req.entries]}
