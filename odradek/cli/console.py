"""`odradek console`: the web console for any Kafka-compatible cluster.

    odradek console --bootstrap-server HOST:PORT [--listen 127.0.0.1:9080]
        [--command-config FILE] [--metrics-url http://HOST:PORT/metrics ...]
        [--sample-interval SECONDS]

`odradek server --console 127.0.0.1:9080` serves the same console from the broker's
own process, for its PLAINTEXT listener and its metrics endpoint.

Then open the printed address in a browser: the cluster's brokers, topics (with
their partitions, offsets and configs; create, delete, change a config, add
partitions), a partition's records (as text, JSON or hex; produce a test record),
consumer groups (members, lag; reset an inactive group's offsets), transactions and
producers, ACLs, and, with --metrics-url, numbers and charts from brokers'
Prometheus endpoints (read in the background every --sample-interval seconds).
Everything goes through the Kafka protocol, as the user of --command-config when
given. It listens on the loopback address unless --listen
says otherwise: anyone who reaches it can change the cluster as that user.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from odradek.config import BrokerConfig

from . import client_config, options

DEFAULT_LISTEN = "127.0.0.1:9080"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "console", help="serve the web console for a cluster", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_bootstrap_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help="where the console listens (default: %(default)s; port 0 "
                             "picks a free one)")
    parser.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                        help="a broker's Prometheus endpoint (odradek.metrics.port), "
                             "e.g. http://127.0.0.1:9404/metrics; repeatable")
    parser.add_argument("--sample-interval", type=float, default=5.0, metavar="SECONDS",
                        help="how often the console reads the --metrics-url endpoints for "
                             "its charts, in the background (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the brokers per call (default: %(default)s)")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    # odradek.console sits above the cli in the import layers (it uses the cli's
    # clients and lag computation), so the cli reaches it by name, as main.py reaches
    # every subcommand module.
    app: Any = importlib.import_module("odradek.console.app")
    return int(app.run(args))


def add_server_argument(parser: argparse.ArgumentParser) -> None:
    """`odradek server --console HOST:PORT`."""
    parser.add_argument("--console", metavar="HOST:PORT",
                        help="also serve the web console from this process, at HOST:PORT "
                             "(e.g. 127.0.0.1:9080), for this broker's own PLAINTEXT "
                             "listener and its odradek.metrics.port endpoint")


def _own_address(config: BrokerConfig) -> str | None:
    """host:port of the broker's first PLAINTEXT client listener (a wildcard host is
    reached through loopback); None without one."""
    for e in config.listeners:
        if e.name in config.controller_listener_names or e.port <= 0:
            continue
        if config.security_protocol(e.name) != "PLAINTEXT":
            continue
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(e.host, e.host)
        return f"[{host}]:{e.port}" if ":" in host else f"{host}:{e.port}"
    return None


def start_beside_broker(listen: str, config: BrokerConfig) -> str | None:
    """Start the console in this process for the broker of `config`: None, or why not."""
    bootstrap = _own_address(config)
    if bootstrap is None:
        return ("--console needs a PLAINTEXT client listener with a fixed port; for a "
                "secured one run 'odradek console --command-config FILE' beside it")
    port = config.get("odradek.metrics.port")
    metrics = [f"http://127.0.0.1:{port}/metrics"] if port and port > 0 else []
    # odradek.console sits above the cli in the import layers: reached by name
    app: Any = importlib.import_module("odradek.console.app")
    try:
        server = app.serve_in_thread(bootstrap, listen, metrics)
    except ValueError as e:
        return str(e).replace("--listen", "--console")
    except OSError as e:
        return f"--console: cannot listen on {listen}: {e.strerror or e}"
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"odradek console for {bootstrap} at http://{shown}:{port}/", flush=True)
    return None
