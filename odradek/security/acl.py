"""ACLs and the ACL authorizer, with the semantics of Kafka's StandardAuthorizer.

Theory of operation
-------------------
An ACL binding says: `principal` from `host` is ALLOWed (or DENYed) `operation`
on the resources a pattern names — a LITERAL name (`*` is every resource of the
type) or a PREFIXED name (every resource whose name starts with it, KIP-290).
Bindings live in the metadata log (AccessControlEntryRecord, each with an id;
RemoveAccessControlEntryRecord) so every node enforces the same set; the image
holds them by id and `AclAuthorizer.update` indexes them when they change.

Deciding one action (operation on a named resource) for a principal and host:

1. a principal in `super.users` is allowed everything;
2. the ACLs whose pattern matches the resource are collected: the literal
   name, the literal `*`, and every prefix of the name that has a PREFIXED
   ACL — a few dict lookups, never a scan of all ACLs;
3. of those, an ACL applies when its principal is the principal or `User:*`,
   its host is the client's address or `*`, and its operation is the one asked
   or ALL — or, for an ALLOW, an operation that implies it (READ, WRITE,
   DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS);
4. any applying DENY denies (DENY wins); else any applying ALLOW allows;
5. when no ACL at all matched the resource (step 2 found none, whoever they
   are for), `allow.everyone.if.no.acl.found` decides (default false);
   otherwise the action is denied.

Filters (DescribeAcls, DeleteAcls) use ANY for every field, and the pattern
type MATCH: the literal name, the literal `*`, and prefixed patterns that are
prefixes of the name — the ACLs that would affect that resource.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from .authorizer import AllowAll, Authorizer
from .resources import (
    IMPLIED_BY_ALLOW,
    SUPPORTED_OPERATIONS,
    AclOperation,
    Action,
    Principal,
    ResourceType,
)

WILDCARD = "*"  # a literal resource name or host that matches every one
WILDCARD_PRINCIPAL = "User:*"

# The class names `authorizer.class.name` accepts for this authorizer: Kafka's
# KRaft authorizer, and the ZooKeeper-era one as an alias (same semantics).
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER_ALIAS = "kafka.security.authorizer.AclAuthorizer"
AUTHORIZER_CLASS_NAMES = frozenset({STANDARD_AUTHORIZER, ACL_AUTHORIZER_ALIAS})


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type
    MATCH = 2  # filters only: the patterns that would match the name
    LITERAL = 3
    PREFIXED = 4


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # an address or "*"
    operation: AclOperation
    permission: Permission

    def problem(self) -> str | None:
        """Why CreateAcls refuses this binding (INVALID_REQUEST), or None."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Invalid resource type {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type {self.pattern_type.name}"
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Invalid operation {self.operation.name}"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return f"Invalid permission type {self.permission.name}"
        if not self.resource_name:
            return "Resource name must not be empty"
        if self.resource_type is ResourceType.CLUSTER and (
                self.resource_name != "kafka-cluster"
                or self.pattern_type is not PatternType.LITERAL):
            return "The only valid name for the CLUSTER resource is kafka-cluster"
        if self.pattern_type is PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "A prefixed pattern may not be the wildcard"
        if ":" not in self.principal or not self.principal.split(":", 1)[1]:
            return f"Invalid principal {self.principal!r}: expected Type:name"
        if not self.host:
            return "Host must not be empty ('*' for any host)"
        if (self.operation is not AclOperation.ALL
                and self.operation not in SUPPORTED_OPERATIONS[self.resource_type]):
            return (f"Operation {self.operation.name} is not supported on "
                    f"{self.resource_type.name} resources")
        return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls: None and ANY match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: Permission = Permission.ANY

    def problem(self) -> str | None:
        """Why a filter is refused (INVALID_REQUEST), or None."""
        if self.resource_type is ResourceType.UNKNOWN:
            return "Invalid resource type filter UNKNOWN"
        if self.pattern_type is PatternType.UNKNOWN:
            return "Invalid pattern type filter UNKNOWN"
        if self.operation is AclOperation.UNKNOWN:
            return "Invalid operation filter UNKNOWN"
        if self.permission is Permission.UNKNOWN:
            return "Invalid permission type filter UNKNOWN"
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type is not self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission is self.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        pattern = self.pattern_type
        name = self.resource_name
        if pattern is PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return name.startswith(acl.resource_name)
        if pattern is not PatternType.ANY and acl.pattern_type is not pattern:
            return False
        return name is None or acl.resource_name == name


def _applies(acl: AclBinding, principals: tuple[str, str], host: str,
             operation: AclOperation) -> bool:
    """Does this ACL (whose pattern matched the resource) speak about this request?"""
    if acl.principal not in principals:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation is AclOperation.ALL or acl.operation is operation:
        return True
    return (acl.permission is Permission.ALLOW
            and acl.operation in IMPLIED_BY_ALLOW.get(operation, ()))


class AclIndex:
    """The ACLs by resource type and name: literal names (with `*`) and
    prefixes in dicts, and per type the lengths of the prefixes present, so a
    lookup costs one dict probe per distinct prefix length."""

    def __init__(self, acls: Iterable[AclBinding]) -> None:
        self.literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self.prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self.prefix_lengths: dict[ResourceType, list[int]] = {}
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        self.count = 0
        lengths: dict[ResourceType, set[int]] = {}
        for acl in acls:
            self.count += 1
            self.by_type.setdefault(acl.resource_type, []).append(acl)
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type is PatternType.PREFIXED:
                self.prefixed.setdefault(key, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
            else:
                self.literal.setdefault(key, []).append(acl)
        self.prefix_lengths = {t: sorted(n) for t, n in lengths.items()}

    def matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches the named resource."""
        out: list[AclBinding] = []
        out.extend(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out.extend(self.literal.get((resource_type, WILDCARD), ()))
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            out.extend(self.prefixed.get((resource_type, name[:length]), ()))
        return out


class AclAuthorizer:
    """Kafka's StandardAuthorizer semantics over an AclIndex (see the module doc)."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 acls: Callable[[], Mapping[str, AclBinding]] | None = None) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.index = AclIndex(())
        self._source: object = None
        # the current image's ACLs (the Broker: its quorum's image), read per call
        self._acls = acls

    @classmethod
    def from_config(cls, super_users: str | None, allow_everyone: bool,
                    acls: Callable[[], Mapping[str, AclBinding]] | None = None,
                    ) -> AclAuthorizer:
        """`super.users` is semicolon-separated principals, as in Kafka."""
        users = [u.strip() for u in (super_users or "").split(";") if u.strip()]
        return cls(users, allow_everyone, acls)

    def update(self, acls: Mapping[str, AclBinding]) -> None:
        """Index the image's ACLs; a no-op when the image kept the same mapping
        (an image shares its ACL mapping with the one before unless ACL
        records changed it), so the index is rebuilt only on ACL changes."""
        if acls is self._source:
            return
        self.index = AclIndex(acls.values())
        self._source = acls

    def authorize(self, principal: Principal, host: str,
                  actions: Sequence[Action]) -> list[bool]:
        if self._acls is not None:
            self.update(self._acls())
        return [self._decide(principal, host, a) for a in actions]

    def _decide(self, principal: Principal, host: str, action: Action) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        found = self.index.matching(action.resource_type, action.name)
        if not found:
            return self.allow_everyone_if_no_acl_found
        principals = (who, WILDCARD_PRINCIPAL)
        allowed = False
        for acl in found:
            if _applies(acl, principals, host, action.operation):
                if acl.permission is Permission.DENY:
                    return False
                allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: Principal, host: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do `operation` on at least one resource of the
        type (Kafka's authorizeByResourceType, used by InitProducerId: WRITE
        on any topic)? An ALLOW counts unless a DENY covers it: a DENY on the
        wildcard, on the same literal name, or on a prefix of its name."""
        who = str(principal)
        if who in self.super_users:
            return True
        if self._acls is not None:
            self.update(self._acls())
        principals = (who, WILDCARD_PRINCIPAL)
        acls = self.index.by_type.get(resource_type, [])
        denies = [a for a in acls if a.permission is Permission.DENY
                  and _applies(a, principals, host, operation)]
        for acl in acls:
            if acl.permission is not Permission.ALLOW:
                continue
            if not _applies(acl, principals, host, operation):
                continue
            if not any(_covers(deny, acl) for deny in denies):
                return True
        # No ACL for the type at all: Kafka's rule for a resource with none.
        return not acls and self.allow_everyone_if_no_acl_found


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does the DENY's pattern take in every resource the ALLOW's pattern names?"""
    if deny.pattern_type is PatternType.LITERAL:
        return deny.resource_name == WILDCARD or (
            allow.pattern_type is PatternType.LITERAL and allow.resource_name == deny.resource_name)
    return allow.resource_name.startswith(deny.resource_name)


def authorized_operations(authorizer: Authorizer, principal: Principal, host: str,
                          resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit field: bit `op` set for each supported operation allowed."""
    ops = sorted(SUPPORTED_OPERATIONS[resource_type])
    answers = authorizer.authorize(
        principal, host, [Action(op, resource_type, name) for op in ops])
    bits = 0
    for op, ok in zip(ops, answers):
        if ok:
            bits |= 1 << int(op)
    return bits


def build_authorizer(class_name: str | None, super_users: str | None,
                     allow_everyone_if_no_acl_found: bool,
                     acls: Callable[[], Mapping[str, AclBinding]]) -> Authorizer:
    """`authorizer.class.name`: empty is no authorizer (everything allowed, as
    Kafka without one); Kafka's StandardAuthorizer (or AclAuthorizer, an alias)
    is the ACL authorizer; anything else is a ValueError."""
    name = (class_name or "").strip()
    if not name:
        return AllowAll()
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"unknown authorizer {name!r}; odradek offers "
                         f"{STANDARD_AUTHORIZER} (alias {ACL_AUTHORIZER_ALIAS})")
    return AclAuthorizer.from_config(super_users, allow_everyone_if_no_acl_found, acls)
