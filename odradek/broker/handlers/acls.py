"""CreateAcls, DescribeAcls, DeleteAcls (KIP-140, prefixed patterns KIP-290).

The pipeline has checked ALTER (create, delete) or DESCRIBE (describe) on the
cluster. With no `authorizer.class.name` every answer is SECURITY_DISABLED,
as Kafka's. Creations and deletions are metadata records
(`metadata/acl_control.py`) appended by the active controller — a
broker-only node relays these requests to it (`forwarded` in apis.py) — so
every node enforces the same ACLs once its image has them.
"""

from __future__ import annotations

from typing import Any

from ...metadata import acl_control
from ...protocol import errors as E
from ...security.acl import AclBinding, AclFilter, PatternType, Permission
from ...security.resources import AclOperation, ResourceType
from ..context import RequestContext
from ..services import AclServices

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."


def _enum(kind: Any, value: int) -> Any:
    """An unknown wire value reads as UNKNOWN (0): refused with INVALID_REQUEST."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


def binding_of(c: Any) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, c.resource_type), c.resource_name,
        _enum(PatternType, c.resource_pattern_type), c.principal, c.host,
        _enum(AclOperation, c.operation), _enum(Permission, c.permission_type))


def filter_of(f: Any) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
        _enum(AclOperation, f.operation), _enum(Permission, f.permission_type))


def acl_fields(acl: AclBinding) -> dict[str, Any]:
    return {"principal": acl.principal, "host": acl.host, "operation": int(acl.operation),
            "permission_type": int(acl.permission)}


async def handle_create_acls(node: AclServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorizer_configured:
        return create_acls_errors(req, E.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    bindings = [binding_of(c) for c in req.creations]
    async with node.metadata_lock:
        results, records = acl_control.create_acls(node.image, bindings)
        await node.quorum.commit(records)
    return {"results": [{"error_code": r.error_code, "error_message": r.error_message}
                        for r in results]}


def create_acls_errors(req: Any, code: int, message: str) -> dict[str, Any]:
    return {"results": [{"error_code": code, "error_message": message}
                        for _ in req.creations]}


async def handle_describe_acls(node: AclServices, ctx: RequestContext,
                               req: Any) -> dict[str, Any]:
    if not ctx.authorizer_configured:
        return {"error_code": E.SECURITY_DISABLED, "error_message": SECURITY_DISABLED_MESSAGE,
                "resources": []}
    f = filter_of(req)
    problem = f.problem()
    if problem is not None:
        return {"error_code": E.INVALID_REQUEST, "error_message": problem, "resources": []}
    by_resource: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in node.image.acls.values():
        if f.matches(acl):
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            by_resource.setdefault(key, []).append(acl_fields(acl))
    return {"error_code": 0, "error_message": None, "resources": [
        {"resource_type": t, "resource_name": n, "pattern_type": p,
         "acls": sorted(acls, key=lambda a: tuple(a.values()))}
        for (t, n, p), acls in sorted(by_resource.items())]}


async def handle_delete_acls(node: AclServices, ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorizer_configured:
        return delete_acls_errors(req, E.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    filters = [filter_of(f) for f in req.filters]
    async with node.metadata_lock:
        results, records = acl_control.delete_acls(node.image, filters)
        await node.quorum.commit(records)
    return {"filter_results": [
        {"error_code": r.error_code, "error_message": r.error_message, "matching_acls": [
            {"error_code": 0, "error_message": None, "resource_type": int(a.resource_type),
             "resource_name": a.resource_name, "pattern_type": int(a.pattern_type),
             **acl_fields(a)} for a in r.deleted]}
        for r in results]}


def delete_acls_errors(req: Any, code: int, message: str) -> dict[str, Any]:
    return {"filter_results": [{"error_code": code, "error_message": message,
                                "matching_acls": []} for _ in req.filters]}
