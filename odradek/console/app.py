"""`odradek console`: build the console for a cluster and serve it until interrupted."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from http.server import ThreadingHTTPServer

from . import pages_cluster, pages_groups, pages_metrics, pages_topics
from .client import Clients
from .sampler import DEFAULT_INTERVAL_S
from .server import Console, make_server

DEFAULT_LISTEN = "127.0.0.1:9080"


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host.strip("[]") or "127.0.0.1", int(port)


def build(clients: Clients, listen_host: str, metrics_urls: list[str],
          sample_interval_s: float = DEFAULT_INTERVAL_S) -> Console:
    console = Console(clients, listen_host, metrics_urls, sample_interval_s)
    pages_cluster.register(console)
    pages_topics.register(console)
    pages_groups.register(console)
    pages_metrics.register(console)
    return console


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_listen(args.listen)
    except ValueError as e:
        print(f"odradek console: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    clients = Clients(args.bootstrap_server, args.command_config, args.timeout)
    if not args.sample_interval > 0:
        print("odradek console: --sample-interval must be above 0", file=sys.stderr)
        return 2
    console = build(clients, host, args.metrics_url, args.sample_interval)
    try:
        server = make_server(console, host, port)
    except OSError as e:
        print(f"odradek console: cannot listen on {host}:{port}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    shown = f"[{host}]" if ":" in host else host
    print(f"odradek console for {args.bootstrap_server} at http://{shown}:{server.server_port}/",
          flush=True)
    console.sampler.start()
    try:
        server.serve_forever()
    finally:
        console.sampler.stop()
        server.server_close()
    return 0


def serve_in_thread(bootstrap: str, listen: str, metrics_urls: list[str]
                    ) -> ThreadingHTTPServer:
    """The console for `bootstrap`, served from daemon threads of this process (the
    broker's own, for `odradek server --console`). ValueError for a bad `listen`,
    OSError when it cannot listen there."""
    host, port = parse_listen(listen)
    console = build(Clients(bootstrap), host, metrics_urls)
    server = make_server(console, host, port)
    console.sampler.start()
    threading.Thread(target=server.serve_forever, name="odradek-console", daemon=True).start()
    return server
