"""`odradek acls`: add, list and remove ACLs, with kafka-acls.sh's flags and meaning.

    odradek acls --add --allow-principal User:alice --operation Read --operation Describe \\
        --topic orders --group billing
    odradek acls --add --allow-principal User:app --producer --topic events- \\
        --resource-pattern-type prefixed
    odradek acls --add --allow-principal User:app --consumer --topic orders --group app
    odradek acls --list [--topic orders] [--principal User:alice]
    odradek acls --remove --allow-principal User:alice --operation Read --topic orders --force

Each --allow-principal gets an ALLOW entry per --allow-host (default *) and
--operation (default All); --deny-principal and --deny-host likewise with DENY.
Resources: --topic, --group, --transactional-id (repeatable; * for all) and
--cluster; --resource-pattern-type literal (default), prefixed, and for --list
and --remove also match or any. --producer: WRITE, DESCRIBE, CREATE on the
topics (and WRITE, DESCRIBE on --transactional-id, IDEMPOTENT_WRITE on the
cluster with --idempotent); --consumer: READ, DESCRIBE on the topics and READ on
--group. --remove without principals or operations removes every ACL of the
resources; it asks first unless --force. --list without a resource lists all.
Exit codes: 0 ok, 1 the broker refused (its message is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

from odradek.protocol import api
from odradek.security.acl import PatternType, Permission
from odradek.security.resources import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)

from . import client_config, options, output
from .connection import Connection

K = api.ApiKey
VERSIONS: dict[int, int] = {K.CREATE_ACLS: 3, K.DESCRIBE_ACLS: 3, K.DELETE_ACLS: 3}

# kafka-acls.sh's operation names (AclOperation's, in CamelCase)
OPERATIONS = {
    "All": AclOperation.ALL, "Read": AclOperation.READ, "Write": AclOperation.WRITE,
    "Create": AclOperation.CREATE, "Delete": AclOperation.DELETE, "Alter": AclOperation.ALTER,
    "Describe": AclOperation.DESCRIBE, "ClusterAction": AclOperation.CLUSTER_ACTION,
    "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
    "AlterConfigs": AclOperation.ALTER_CONFIGS, "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE,
}
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
                 "match": PatternType.MATCH, "any": PatternType.ANY}

Resource = tuple[ResourceType, str, PatternType]
Entry = tuple[str, str, AclOperation, Permission]  # principal, host, operation, permission


class UsageError(ValueError):
    pass


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "acls", help="add, list and remove ACLs (kafka-acls.sh's flags)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_bootstrap_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
        parser.add_argument(flag, action="append", default=[], metavar="VALUE")
    parser.add_argument("--principal", action="append", default=[],
                        help="--list: only the ACLs of this principal")
    parser.add_argument("--operation", action="append", default=[], choices=sorted(OPERATIONS),
                        metavar="OPERATION", help=", ".join(OPERATIONS))
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", choices=sorted(PATTERN_TYPES),
                        default="literal")
    parser.add_argument("--producer", action="store_true",
                        help="the ACLs a producer needs (with --topic)")
    parser.add_argument("--consumer", action="store_true",
                        help="the ACLs a consumer needs (with --topic and --group)")
    parser.add_argument("--idempotent", action="store_true",
                        help="--producer: IDEMPOTENT_WRITE on the cluster too")
    parser.add_argument("--force", action="store_true", help="--remove without asking")
    parser.set_defaults(handler=_run)
    return parser


def _fail(message: str, code: int = 1) -> int:
    print(f"Error while executing ACL command: {message}", file=sys.stderr)
    return code


def _resources(args: argparse.Namespace) -> list[Resource]:
    pattern = PATTERN_TYPES[args.resource_pattern_type]
    if args.add and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("--add takes --resource-pattern-type literal or prefixed")
    out: list[Resource] = []
    for rtype, names in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                         (ResourceType.TRANSACTIONAL_ID, args.transactional_id)):
        out += [(rtype, name, pattern) for name in names]
    if args.cluster or (args.producer and args.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL
                    if pattern is PatternType.PREFIXED else pattern))
    return out


def _entries(args: argparse.Namespace, operations: list[AclOperation]) -> list[Entry]:
    out: list[Entry] = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, Permission.ALLOW),
            (args.deny_principal, args.deny_host, Permission.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise UsageError(f"principal {principal!r} is not Type:name (User:alice)")
            out += [(principal, host, op, permission)
                    for host in hosts or ["*"] for op in operations]
    return out


def _bindings(args: argparse.Namespace) -> dict[Resource, list[Entry]]:
    """--add: the entries for each resource (the --producer/--consumer shortcuts included)."""
    resources = _resources(args)
    if not resources:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not args.allow_principal and not args.deny_principal:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    if args.producer or args.consumer:
        if not args.topic:
            raise UsageError("--producer and --consumer need --topic")
        if args.consumer and not args.group:
            raise UsageError("--consumer needs --group")
        wanted: dict[ResourceType, list[AclOperation]] = defaultdict(list)
        if args.producer:
            wanted[ResourceType.TOPIC] += [AclOperation.WRITE, AclOperation.DESCRIBE,
                                           AclOperation.CREATE]
            wanted[ResourceType.TRANSACTIONAL_ID] += [AclOperation.WRITE, AclOperation.DESCRIBE]
            wanted[ResourceType.CLUSTER] += [AclOperation.IDEMPOTENT_WRITE]
        if args.consumer:
            wanted[ResourceType.TOPIC] += [AclOperation.READ, AclOperation.DESCRIBE]
            wanted[ResourceType.GROUP] += [AclOperation.READ]
        ops_of = {r: list(dict.fromkeys(ops)) for r, ops in wanted.items()}
        return {res: _entries(args, ops_of[res[0]]) for res in resources if res[0] in ops_of}
    operations = [OPERATIONS[o] for o in args.operation] or [AclOperation.ALL]
    out: dict[Resource, list[Entry]] = {}
    for res in resources:
        bad = [op.name for op in operations
               if op is not AclOperation.ALL and op not in SUPPORTED_OPERATIONS[res[0]]]
        if bad:
            raise UsageError(f"ResourceType {res[0].name} only supports operations "
                             f"{', '.join(sorted(o.name for o in SUPPORTED_OPERATIONS[res[0]]))}"
                             f" (not {', '.join(bad)})")
        out[res] = _entries(args, operations)
    return out


def show_resource(res: Resource) -> str:
    rtype, name, pattern = res
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={pattern.name})"


def show_entry(entry: Entry) -> str:
    principal, host, op, permission = entry
    return (f"(principal={principal}, host={host}, operation={op.name}, "
            f"permissionType={permission.name})")


def _print_acls(verb: str, res: Resource, entries: list[Entry]) -> None:
    lines = "\n".join(f"\t{show_entry(e)} " for e in entries)
    print(f"{verb} for resource `{show_resource(res)}`: \n {lines}\n")


def _connect(args: argparse.Namespace) -> Connection:
    return Connection(args.bootstrap_server, args.timeout, VERSIONS, b"odradek-acls",
                      args.command_config)


def _describe(conn: Connection, res: Resource | None,
              principal: str | None = None) -> dict[Resource, list[Entry]]:
    rtype, name, pattern = res if res is not None else (ResourceType.ANY, None, PatternType.ANY)
    resp = conn.call(K.DESCRIBE_ACLS, {
        "resource_type_filter": rtype, "resource_name_filter": name,
        "pattern_type_filter": pattern, "principal_filter": principal, "host_filter": None,
        "operation": AclOperation.ANY, "permission_type": Permission.ANY})
    if resp.error_code.value:
        raise RuntimeError(f"{resp.error_code.name.upper()}: {resp.error_message}")
    out: dict[Resource, list[Entry]] = {}
    for r in resp.resources:
        key = (ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type))
        out.setdefault(key, []).extend(
            (a.principal, a.host, AclOperation(a.operation), Permission(a.permission_type))
            for a in r.acls)
    return out


def _list(args: argparse.Namespace, conn: Connection, resources: list[Resource]) -> int:
    principals = args.principal or [None]
    found: dict[Resource, set[Entry]] = defaultdict(set)
    wanted: list[Resource | None] = [*resources] or [None]
    for res in wanted:
        for principal in principals:
            for key, entries in _describe(conn, res, principal).items():
                found[key].update(entries)
    if output.is_json(args):  # one object per ACL binding
        output.print_json([
            {"resource_type": key[0].name, "resource_name": key[1],
             "pattern_type": key[2].name, "principal": e[0], "host": e[1],
             "operation": e[2].name, "permission_type": e[3].name}
            for key in sorted(found) for e in sorted(found[key], key=show_entry)])
        return 0
    for key in sorted(found):
        _print_acls("Current ACLs", key, sorted(found[key], key=show_entry))
    return 0


def _add(args: argparse.Namespace, conn: Connection) -> int:
    bindings = _bindings(args)
    for res, entries in bindings.items():
        _print_acls("Adding ACLs", res, entries)
    creations = [{"resource_type": res[0], "resource_name": res[1],
                  "resource_pattern_type": res[2], "principal": e[0], "host": e[1],
                  "operation": e[2], "permission_type": e[3]}
                 for res, entries in bindings.items() for e in entries]
    resp = conn.call(K.CREATE_ACLS, {"creations": creations})
    errors = [f"{r.error_code.name.upper()}: {r.error_message}" for r in resp.results
              if r.error_code.value]
    if errors:
        return _fail("; ".join(sorted(set(errors))))
    for res in bindings:
        _print_acls("Current ACLs", res, sorted(_describe(conn, res).get(res, []),
                                                key=show_entry))
    return 0


def _remove(args: argparse.Namespace, conn: Connection, resources: list[Resource]) -> int:
    if not resources:
        raise UsageError("name a resource: --topic, --group, --transactional-id or --cluster")
    operations = [OPERATIONS[o] for o in args.operation] or [AclOperation.ANY]
    everything = not args.allow_principal and not args.deny_principal
    filters = []
    for res in resources:
        entries: list[tuple[str | None, str | None, AclOperation, Permission]] = (
            [(None, None, op, Permission.ANY) for op in operations] if everything
            else list(_entries(args, operations)))
        if not args.force:
            what = ("all ACLs" if everything
                    else "ACLs: \n" + "\n".join(f"\t{e}" for e in entries) + "\n")
            if not _confirm(f"Are you sure you want to remove {what} from resource filter "
                            f"`{show_resource(res)}`? (y/n)"):
                continue
        for principal, host, op, permission in entries:
            filters.append({"resource_type_filter": res[0], "resource_name_filter": res[1],
                            "pattern_type_filter": res[2], "principal_filter": principal,
                            "host_filter": host, "operation": op, "permission_type": permission})
    if not filters:
        return 0
    resp = conn.call(K.DELETE_ACLS, {"filters": filters})
    errors = [f"{r.error_code.name.upper()}: {r.error_message}" for r in resp.filter_results
              if r.error_code.value]
    removed: dict[Resource, list[Entry]] = defaultdict(list)
    for r in resp.filter_results:
        for m in r.matching_acls:
            key = (ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type))
            removed[key].append((m.principal, m.host, AclOperation(m.operation),
                                 Permission(m.permission_type)))
    for res, gone in removed.items():
        _print_acls("Removed ACLs", res, sorted(set(gone), key=show_entry))
    return _fail("; ".join(sorted(set(errors)))) if errors else 0


def _confirm(question: str) -> bool:
    print(question)
    try:
        return input().strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _run(args: argparse.Namespace) -> int:
    try:
        resources = _resources(args)
        if args.list and (args.allow_principal or args.deny_principal):
            raise UsageError("--list takes --principal, not --allow/--deny-principal")
        conn = _connect(args)
    except UsageError as e:
        return _fail(str(e), 2)
    except OSError as e:
        return _fail(f"cannot reach {args.bootstrap_server}: {e}")
    try:
        if args.add:
            return _add(args, conn)
        if args.remove:
            return _remove(args, conn, resources)
        return _list(args, conn, resources)
    except UsageError as e:
        return _fail(str(e), 2)
    except (RuntimeError, OSError) as e:
        return _fail(str(e))
    finally:
        conn.close()
