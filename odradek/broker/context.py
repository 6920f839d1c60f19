"""What a handler knows about the request it is answering.

A handler is called as `handler(node, ctx, request)`: `node` is the few
services its API family uses, typed by a small Protocol in `services.py` (never
the Broker class), `ctx` is this RequestContext, and `request` the decoded kio
entity. It returns the response as a dict (see protocol/entities.py), None
for no response (acks=0 produce), or a `Later` (below).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..security.authorizer import AllowAll, Authorizer
from ..security.resources import (
    ANONYMOUS,
    AclOperation,
    Action,
    Principal,
    ResourceType,
)
from ..security.sasl import SaslSession
from .quotas import FetchQuota, MutationQuota

_ALLOW_ALL = AllowAll()


class Later:
    """An answer that comes later. The handler has done all the work that must
    happen in the order of its connection's requests (a produce's appends); what
    is left is waiting (for the ISR to fetch the records, for an fsync), and the
    connection may handle its next requests meanwhile. The answers still go out
    in the requests' order (network.py). Only when `ctx.may_answer_later`."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Future[Any]) -> None:
        self.task = task


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str
    client_host: str = "?"  # the peer's address (host only)
    peer: str = "?"  # host:port, for log lines
    principal: Principal = ANONYMOUS
    security_protocol: str = "PLAINTEXT"
    authorizer: Authorizer = field(default=_ALLOW_ALL)
    # the connection's SASL state (SaslHandshake/SaslAuthenticate); None unless
    # the listener is SASL_PLAINTEXT or SASL_SSL
    sasl: SaslSession | None = None
    # on one of controller.listener.names (or an in-process call): only here
    # are KRaft's requests (Vote, __cluster_metadata fetches, ...) served
    controller_listener: bool = True
    # CreateTopics, DeleteTopics, CreatePartitions: the controller mutation quota
    # (KIP-599) that applies to the request's user and client id, set by the pipeline
    mutation_quota: MutationQuota | None = None
    # a consumer's Fetch: the consumer_byte_rate that applies (set by the pipeline)
    fetch_quota: FetchQuota | None = None
    # memory the answer holds (a consumer Fetch's records: fetch_memory.py), given
    # back by the connection once the answer is written (or at once without one)
    release_after_write: Callable[[], None] | None = None
    # a client connection that handles its next requests while this one's answer
    # waits: the handler may return a Later (an Envelope's inner request may not)
    may_answer_later: bool = False
    # the client connection's number in this process (-1: none, e.g. an Envelope's
    # inner request): share sessions end when their connection closes
    connection_id: int = -1

    def authorize(self, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """May this request's principal do `operation` on the named resource?"""
        return self.authorizer.authorize(
            self.principal, self.client_host, [Action(operation, resource_type, name)])[0]

    def authorized_names(self, operation: AclOperation, resource_type: ResourceType,
                         names: list[str]) -> list[bool]:
        """One answer per name, in one call to the authorizer."""
        return self.authorizer.authorize(
            self.principal, self.client_host,
            [Action(operation, resource_type, n) for n in names])

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the principal do `operation` on at least one resource of the type?"""
        return self.authorizer.authorize_by_resource_type(
            self.principal, self.client_host, operation, resource_type)

    @property
    def authorizer_configured(self) -> bool:
        """False when no `authorizer.class.name` is set (the ACL APIs then
        answer SECURITY_DISABLED)."""
        return not isinstance(self.authorizer, AllowAll)


Handler = Callable[[Any, RequestContext, Any], Awaitable[dict[str, Any] | Later | None]]
