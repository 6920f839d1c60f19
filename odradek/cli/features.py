"""`odradek features`: finalized feature levels, as kafka-features.sh manages them.

    odradek features describe
    odradek features upgrade --feature transaction.version=2
    odradek features downgrade --feature transaction.version=0 [--unsafe]
    odradek features disable --feature transaction.version
    (each change takes --dry-run: the controller validates it and changes nothing)

`describe` reads ApiVersions v3 (the features the broker supports, the
finalized levels and their epoch); the changes send UpdateFeatures, which any
broker relays to the controller. odradek's features are transaction.version
(2: transactions v2, KIP-890 part 2) and eligible.leader.replicas.version (1:
eligible leader replicas, KIP-966); metadata/features.py. With
`--bootstrap-controller HOST:PORT` (as kafka-features.sh) every request goes
to the active controller (cli/bootstrap_controller.py).
Exit codes: 0 ok, 1 the broker refused (its message is printed), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.metadata import features as F
from odradek.protocol import api

from . import bootstrap_controller, client_config, options, output
from .connection import Connection, reporting_broker_errors

VERSIONS: dict[int, int] = {api.ApiKey.API_VERSIONS: 3, api.ApiKey.UPDATE_FEATURES: 1}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "features", help="describe, upgrade and downgrade finalized feature levels",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_bootstrap_argument(parser)
    bootstrap_controller.add_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("describe", help="supported features and finalized levels")
    p.set_defaults(handler=reporting_broker_errors("features", _describe))
    for name, help_text in (("upgrade", "raise feature levels"),
                            ("downgrade", "lower feature levels"),
                            ("disable", "remove features (level 0)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--feature", action="append", required=True,
                       help="NAME=LEVEL (disable: NAME); may be repeated")
        if name != "upgrade":
            p.add_argument("--unsafe", action="store_true",
                           help="an unsafe (lossy) downgrade")
        p.add_argument("--dry-run", action="store_true",
                       help="validate only; change nothing")
        p.set_defaults(handler=reporting_broker_errors("features", _update))
    return parser


def _fail(message: str, code: int = 1) -> int:
    print(f"odradek features: {message}", file=sys.stderr)
    return code


def _connect(args: argparse.Namespace) -> Connection:
    address, _ = bootstrap_controller.target(args)
    return Connection(address, args.timeout, VERSIONS, b"odradek-features",
                      args.command_config)


def _describe(args: argparse.Namespace) -> int:
    conn = _connect(args)
    try:
        resp = conn.call(api.ApiKey.API_VERSIONS, {
            "client_software_name": "odradek-features", "client_software_version": "1"})
    finally:
        conn.close()
    if resp.error_code.value != 0:
        return _fail(resp.error_code.name.upper())
    finalized = {f.name: int(f.max_version_level) for f in resp.finalized_features}
    rows = [{"feature": f.name, "supported_min_version": int(f.min_version),
             "supported_max_version": int(f.max_version),
             "finalized_version_level": finalized.get(f.name, 0),
             "epoch": int(resp.finalized_features_epoch)}
            for f in sorted(resp.supported_features, key=lambda f: f.name)]
    if output.is_json(args):
        output.print_json(rows)
        return 0
    for r in rows:
        print(f"Feature: {r['feature']}\tSupportedMinVersion: {r['supported_min_version']}\t"
              f"SupportedMaxVersion: {r['supported_max_version']}\t"
              f"FinalizedVersionLevel: {r['finalized_version_level']}\tEpoch: {r['epoch']}")
    return 0


def _parse(action: str, items: list[str]) -> list[tuple[str, int]]:
    out = []
    for item in items:
        if action == "disable":
            out.append((item.strip(), 0))
            continue
        name, sep, level = item.partition("=")
        if not sep:
            raise ValueError(f"--feature wants NAME=LEVEL, got {item!r}")
        try:
            out.append((name.strip(), int(level)))
        except ValueError:
            raise ValueError(f"{name.strip()}: {level!r} is not a level") from None
    return out


def _update(args: argparse.Namespace) -> int:
    try:
        wanted = _parse(args.action, args.feature)
    except ValueError as e:
        return _fail(str(e), 2)
    kind = F.UPGRADE if args.action == "upgrade" else (
        F.UNSAFE_DOWNGRADE if args.unsafe else F.SAFE_DOWNGRADE)
    conn = _connect(args)
    try:
        resp = conn.call(api.ApiKey.UPDATE_FEATURES, {
            "timeout": 60000, "validate_only": args.dry_run,
            "feature_updates": [{"feature": n, "max_version_level": lvl, "upgrade_type": kind}
                                for n, lvl in wanted]})
    finally:
        conn.close()
    if resp.error_code.value != 0:
        return _fail(f"{resp.error_code.name.upper()}: {resp.error_message}")
    failed = 0
    by_name = {r.feature: r for r in resp.results}
    for name, level in wanted:
        r = by_name.get(name)
        if r is not None and r.error_code.value != 0:
            failed += 1
            print(f"Could not {args.action} {name} to {level}: {r.error_message}",
                  file=sys.stderr)
        elif args.dry_run:
            print(f"{name} can be {args.action}d to {level}.")
        else:
            print(f"{name} was {args.action}d to {level}.")
    return 1 if failed else 0
