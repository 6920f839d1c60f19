"""`odradek quotas`: client quotas, as kafka-configs.sh manages them.

    odradek quotas describe [--user NAME | --user-defaults] [--client NAME | --client-defaults]
    odradek quotas alter --user alice --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    odradek quotas alter --user-defaults --client-defaults --add-config request_percentage=50
    odradek quotas alter --client batch --delete-config producer_byte_rate
    odradek quotas alter --ip 10.0.0.7 --add-config connection_creation_rate=10

Keys (Kafka's): producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage
(% of one request thread), controller_mutation_rate (partitions/s); for ips,
connection_creation_rate. The most specific entity that has a key applies, in Kafka's
order: user+client, user+default client, user, default user+client, default user+default
client, default user, client, default client. `describe` with no entity lists every
quota; with entities it lists those that contain them (--strict: exactly them).
Requests go to any broker (AlterClientQuotas is relayed to the controller).
Exit codes: 0 ok, 1 the broker refused (its message is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.metadata import client_quotas as Q
from odradek.protocol import api

from . import output
from .connection import Connection, add_command, reporting_broker_errors

VERSIONS: dict[int, int] = {api.ApiKey.DESCRIBE_CLIENT_QUOTAS: 1, api.ApiKey.ALTER_CLIENT_QUOTAS: 1}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser, sub = add_command(
        subparsers, "quotas", "describe and alter client quotas (users, client ids, ips)",
        __doc__)
    for name, help_text in (("describe", "list quotas"), ("alter", "set or delete quotas")):
        p = sub.add_parser(name, help=help_text)
        who = p.add_argument_group("entity (user and client may be combined)")
        who.add_argument("--user", help="a user principal's name (User:NAME)")
        who.add_argument("--user-defaults", action="store_true", help="the default user")
        who.add_argument("--client", help="a client id")
        who.add_argument("--client-defaults", action="store_true", help="the default client id")
        who.add_argument("--ip", help="a client address (connection_creation_rate only)")
        who.add_argument("--ip-defaults", action="store_true", help="the default ip")
        if name == "describe":
            p.add_argument("--strict", action="store_true",
                           help="only entities of exactly these types")
            p.set_defaults(handler=reporting_broker_errors("quotas", _describe))
        else:
            p.add_argument("--add-config", default="",
                           help="key=value[,key=value...] to set")
            p.add_argument("--delete-config", default="", help="key[,key...] to remove")
            p.add_argument("--validate-only", action="store_true")
            p.set_defaults(handler=reporting_broker_errors("quotas", _alter))
    return parser


def _fail(message: str, code: int = 1) -> int:
    print(f"odradek quotas: {message}", file=sys.stderr)
    return code


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The entity the flags name; raises ValueError on a contradiction."""
    parts: list[tuple[str, str | None]] = []
    for etype, name, default in ((Q.USER, args.user, args.user_defaults),
                                 (Q.CLIENT_ID, args.client, args.client_defaults),
                                 (Q.IP, args.ip, args.ip_defaults)):
        if name is not None and default:
            raise ValueError(f"give either a {etype} name or its defaults, not both")
        if name is not None:
            parts.append((etype, name))
        elif default:
            parts.append((etype, None))
    return parts


def _parse_add(text: str) -> list[tuple[str, float]]:
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--add-config wants key=value, got {item!r}")
        try:
            out.append((key.strip(), float(value)))
        except ValueError:
            raise ValueError(f"{key.strip()}: {value!r} is not a number") from None
    return out


def _show(ent: list[tuple[str, str | None]] | Q.Entity) -> str:
    return Q.describe_entity(Q.entity_of(list(ent)))


def _describe(args: argparse.Namespace) -> int:
    try:
        parts = _entity(args)
    except ValueError as e:
        return _fail(str(e), 2)
    components = [{"entity_type": t,
                   "match_type": Q.MATCH_DEFAULT if n is None else Q.MATCH_EXACT, "match": n}
                  for t, n in parts]
    if not components:  # everything: every entity has a user, a client id or an ip
        answers = []
        for etype in (Q.USER, Q.CLIENT_ID, Q.IP):
            answers.append(_ask(args, [{"entity_type": etype,
                                        "match_type": Q.MATCH_SPECIFIED, "match": None}], False))
    else:
        answers = [_ask(args, components, args.strict)]
    seen: dict[Q.Entity, dict[str, float]] = {}
    for resp in answers:
        if isinstance(resp, str):
            return _fail(resp)
        for entry in resp.entries or ():
            ent = Q.entity_of([(x.entity_type, x.entity_name) for x in entry.entity])
            seen[ent] = {v.key: float(v.value) for v in entry.values}
    ordered = sorted(seen, key=lambda e: [(t, n or "") for t, n in e])
    if output.is_json(args):  # entity: {"user": name or null (the default), ...}
        output.print_json([{"entity": dict(ent), "quotas": seen[ent]} for ent in ordered])
        return 0
    for ent in ordered:
        values = ", ".join(f"{k}={_number(v)}" for k, v in sorted(seen[ent].items()))
        print(f"Quota configs for {_show(ent)} are {values}")
    return 0


def _number(v: float) -> str:
    return str(int(v)) if v == int(v) else str(v)


def _ask(args: argparse.Namespace, components: list[dict[str, Any]], strict: bool) -> Any:
    conn = Connection(args.bootstrap_server, args.timeout, VERSIONS, b"odradek-quotas",
                      args.command_config)
    try:
        resp = conn.call(api.ApiKey.DESCRIBE_CLIENT_QUOTAS,
                         {"components": components, "strict": strict})
    finally:
        conn.close()
    if resp.error_code.value != 0:
        return f"{resp.error_code.name.upper()}: {resp.error_message}"
    return resp


def _alter(args: argparse.Namespace) -> int:
    try:
        parts = _entity(args)
        if not parts:
            raise ValueError("name an entity: --user, --client, --ip or their --*-defaults")
        adds = _parse_add(args.add_config)
        deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
        if not adds and not deletes:
            raise ValueError("nothing to do: give --add-config and/or --delete-config")
    except ValueError as e:
        return _fail(str(e), 2)
    ops = [{"key": k, "value": v, "remove": False} for k, v in adds]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deletes]
    conn = Connection(args.bootstrap_server, args.timeout, VERSIONS, b"odradek-quotas",
                      args.command_config)
    try:
        resp = conn.call(api.ApiKey.ALTER_CLIENT_QUOTAS, {
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in parts],
                         "ops": ops}],
            "validate_only": args.validate_only})
    except OSError as e:
        return _fail(f"cannot reach {args.bootstrap_server}: {e}")
    finally:
        conn.close()
    (entry,) = resp.entries
    if entry.error_code.value != 0:
        return _fail(f"{entry.error_code.name.upper()}: {entry.error_message}")
    verb = "Validated" if args.validate_only else "Completed updating"
    print(f"{verb} config for {_show(parts)}.")
    return 0
