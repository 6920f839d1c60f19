"""ACLs: the list (DescribeAcls over the CLI's `Connection`, as `odradek acls --list`),
what the console's user may describe; adding one ACL (CreateAcls) and removing one
(DeleteAcls with a filter matching exactly it), which the cluster allows a user with
Alter on the cluster (a super user). A cluster without an authorizer says so."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.cli import acls as cli_acls
from odradek.protocol import api
from odradek.security.acl import PatternType, Permission
from odradek.security.resources import CLUSTER_NAME, AclOperation, ResourceType

from .client import Clients, ConsoleError

RESOURCE_TYPES = ("TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER")
PATTERNS = ("LITERAL", "PREFIXED")
OPERATIONS = tuple(op.name for op in cli_acls.OPERATIONS.values())
PERMISSIONS = ("ALLOW", "DENY")


@dataclass(frozen=True)
class Acl:
    """One ACL, its fields by enum name (TOPIC, LITERAL, READ, ALLOW)."""

    resource_type: str
    resource: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str

    @classmethod
    def from_form(cls, form: dict[str, str]) -> Acl:
        """The ACL a form names; raises ValueError saying what is wrong."""
        f = {k: form.get(k, "").strip() for k in cls.__dataclass_fields__}
        for key, allowed in (("resource_type", RESOURCE_TYPES), ("pattern", PATTERNS),
                             ("operation", OPERATIONS), ("permission", PERMISSIONS)):
            if f[key] not in allowed:
                raise ValueError(f"{key}: expected one of {', '.join(allowed)}")
        if f["resource_type"] == "CLUSTER":
            f["resource"], f["pattern"] = CLUSTER_NAME, "LITERAL"
        if not f["resource"]:
            raise ValueError("name the resource (* for all)")
        if ":" not in f["principal"]:
            raise ValueError(f"principal {f['principal']!r} is not Type:name (User:alice)")
        return cls(**{**f, "host": f["host"] or "*"})

    def fields(self) -> dict[str, object]:
        return {"resource_type": ResourceType[self.resource_type],
                "resource_name": self.resource, "principal": self.principal,
                "host": self.host, "operation": AclOperation[self.operation],
                "permission_type": Permission[self.permission]}

    def __str__(self) -> str:
        return (f"{self.permission} {self.principal} from {self.host} to "
                f"{self.operation} {self.resource_type} {self.resource} ({self.pattern})")


def acls(clients: Clients) -> list[Acl]:
    conn = clients.connect(None, cli_acls.VERSIONS)
    try:
        found = cli_acls._describe(conn, None)
    except RuntimeError as e:  # the broker's error: no authorizer, not authorized
        raise ConsoleError(f"DescribeAcls: {e}") from None
    finally:
        conn.close()
    rows = [Acl(rtype.name, name, pattern.name, principal, host, op.name, permission.name)
            for (rtype, name, pattern), entries in found.items()
            for principal, host, op, permission in entries]
    return sorted(rows, key=lambda r: (r.resource_type, r.resource, r.principal, r.operation))


def add(clients: Clients, acl: Acl) -> None:
    conn = clients.connect(None, cli_acls.VERSIONS)
    try:
        fields = acl.fields()
        resp = conn.call(api.ApiKey.CREATE_ACLS, {"creations": [{
            **fields, "resource_pattern_type": PatternType[acl.pattern]}]})
    finally:
        conn.close()
    for r in resp.results:
        if r.error_code.value:
            raise ConsoleError(f"CreateAcls: {r.error_code.name}: {r.error_message}")


def remove(clients: Clients, acl: Acl) -> int:
    """Remove exactly `acl`; how many ACLs the broker removed."""
    conn = clients.connect(None, cli_acls.VERSIONS)
    try:
        f = acl.fields()
        resp = conn.call(api.ApiKey.DELETE_ACLS, {"filters": [{
            "resource_type_filter": f["resource_type"], "resource_name_filter": acl.resource,
            "pattern_type_filter": PatternType[acl.pattern], "principal_filter": acl.principal,
            "host_filter": acl.host, "operation": f["operation"],
            "permission_type": f["permission_type"]}]})
    finally:
        conn.close()
    for r in resp.filter_results:
        if r.error_code.value:
            raise ConsoleError(f"DeleteAcls: {r.error_code.name}: {r.error_message}")
    return sum(len(r.matching_acls) for r in resp.filter_results)
