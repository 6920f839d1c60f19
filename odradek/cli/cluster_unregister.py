"""`odradek cluster unregister --id N`: remove a broker's registration, as
`kafka-cluster.sh unregister` does (UnregisterBroker, KIP-631).

    odradek cluster unregister --id 3 [-b HOST:PORT | --bootstrap-controller HOST:PORT]

For a broker that is gone for good: its leaderships and ISR memberships move
to other replicas as when it is fenced, and Metadata and DescribeCluster stop
listing it. A broker that still runs registers again at its next heartbeat (in
Kafka too). Needs ALTER on the cluster. Exit codes: 0 done, 1 the cluster
refused (BROKER_ID_NOT_REGISTERED when no broker has the id), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from odradek.protocol import api

from . import bootstrap_controller, client_config, options
from .connection import Connection, reporting_broker_errors

VERSIONS: dict[int, int] = {api.ApiKey.UNREGISTER_BROKER: 0}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "unregister", help="remove a broker's registration (kafka-cluster.sh unregister)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--id", type=int, required=True, metavar="BROKER_ID",
                   help="the broker id to unregister")
    options.add_bootstrap_argument(p)
    bootstrap_controller.add_argument(p)
    client_config.add_argument(p)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    p.set_defaults(handler=reporting_broker_errors("cluster unregister", _unregister))
    return p


def _unregister(args: argparse.Namespace) -> int:
    if args.id < 0:
        print(f"odradek cluster unregister: --id {args.id}: a broker id is >= 0",
              file=sys.stderr)
        return 2
    address, _ = bootstrap_controller.target(args)
    conn = Connection(address, args.timeout, VERSIONS, b"odradek-cluster",
                      args.command_config)
    try:
        resp = conn.call(api.ApiKey.UNREGISTER_BROKER, {"broker_id": args.id})
    finally:
        conn.close()
    code = int(getattr(resp.error_code, "value", resp.error_code))
    if code:
        name = getattr(resp.error_code, "name", str(code)).upper()
        print(f"odradek cluster unregister: {name}: {resp.error_message or ''}".rstrip(": "),
              file=sys.stderr)
        return 1
    print(f"Broker {args.id} is no longer registered.")
    return 0
