"""The per-resource authorization helpers handlers share (the RESOURCE-scoped
checks of apis.py): which names of a request pass, and KIP-430's authorized
operations bit fields."""

from __future__ import annotations

from collections.abc import Iterable

from ...protocol import errors as E
from ...security.acl import authorized_operations
from ...security.resources import CLUSTER_NAME, AclOperation, ResourceType
from ..context import RequestContext


def allowed(ctx: RequestContext, op: AclOperation, resource_type: ResourceType,
            names: Iterable[str]) -> set[str]:
    """The names (deduplicated) the principal may do `op` on, in one authorizer call."""
    distinct = sorted(set(names))
    return {n for n, ok in zip(distinct, ctx.authorized_names(op, resource_type, distinct))
            if ok}


def topics_allowed(ctx: RequestContext, op: AclOperation, names: Iterable[str]) -> set[str]:
    return allowed(ctx, op, ResourceType.TOPIC, names)


def cluster_allows(ctx: RequestContext, op: AclOperation) -> bool:
    return ctx.authorize(op, ResourceType.CLUSTER, CLUSTER_NAME)


def operations(ctx: RequestContext, resource_type: ResourceType, name: str,
               asked: bool) -> int:
    """KIP-430: the bit field when the client asked for it, else INT32_MIN."""
    if not asked:
        return E.AUTHORIZED_OPERATIONS_OMITTED
    return authorized_operations(ctx.authorizer, ctx.principal, ctx.client_host,
                                 resource_type, name)
