"""The ACL list (DescribeAcls over the CLI's `Connection`, as `odradek acls --list`):
what the console's user may describe; a cluster without an authorizer says so."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.cli import acls as cli_acls

from .client import Clients, ConsoleError


@dataclass
class AclRow:
    resource_type: str
    resource: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str


def acls(clients: Clients) -> list[AclRow]:
    conn = clients.connect(None, cli_acls.VERSIONS)
    try:
        found = cli_acls._describe(conn, None)
    except RuntimeError as e:  # the broker's error: no authorizer, not authorized
        raise ConsoleError(f"DescribeAcls: {e}") from None
    finally:
        conn.close()
    rows = [AclRow(rtype.name.title(), name, pattern.name.lower(), principal, host,
                   op.name.title().replace("_", ""), permission.name.title())
            for (rtype, name, pattern), entries in found.items()
            for principal, host, op, permission in entries]
    return sorted(rows, key=lambda r: (r.resource_type, r.resource, r.principal, r.operation))
