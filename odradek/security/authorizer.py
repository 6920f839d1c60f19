"""The authorizer interface the request pipeline calls.

`authorize(principal, host, actions)` answers one bool per action, as Kafka's
`Authorizer.authorize` does. With no `authorizer.class.name` set, Kafka runs no
authorizer and allows every request: `AllowAll` is that. The ACL authorizer
(ACLs in the metadata log, `super.users`, `allow.everyone.if.no.acl.found`)
plugs in here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .resources import Action, Principal


class Authorizer(Protocol):
    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]: ...


class AllowAll:
    """No authorizer configured: every action is allowed (Kafka's default)."""

    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]:
        return [True] * len(actions)
