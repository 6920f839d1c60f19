"""The authorizer interface the request pipeline calls.

`authorize(principal, host, actions)` answers one bool per action, as Kafka's
`Authorizer.authorize` does. With no `authorizer.class.name` set, Kafka runs no
authorizer and allows every request: `AllowAll` is that. The ACL authorizer
(ACLs in the metadata log, `super.users`, `allow.everyone.if.no.acl.found`)
is `acl.AclAuthorizer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .resources import AclOperation, Action, Principal, ResourceType


class Authorizer(Protocol):
    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]: ...

    def authorize_by_resource_type(self, principal: Principal, host: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type?"""
        ...


class AllowAll:
    """No authorizer configured: every action is allowed (Kafka's default)."""

    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]:
        return [True] * len(actions)

    def authorize_by_resource_type(self, principal: Principal, host: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True
