"""The `odradek` command: one entry point, one module per subcommand.

Theory of operation. Each subcommand lives in its own module `odradek/cli/<name>.py`
exposing `add_parser(subparsers) -> argparse.ArgumentParser`; the parser it returns sets
`handler` (via `set_defaults(handler=...)`) to a function `(args) -> int`. SUBCOMMANDS
lists the modules in the order `--help` shows them. A module that does not exist yet
(another engineer has not written it) is skipped, so the command always works with the
subcommands that exist; a module that exists but fails to import is a real bug and is
raised, not hidden.

Exit codes: 0 success, 1 runtime failure reported by a handler, 2 usage or
configuration error (argparse's convention, also used for ConfigError).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from odradek.cli import console, options, server_processes
from odradek.cli.server_processes import processes_argument
from odradek.config import DIFFERENCES_FROM_KAFKA, BrokerConfig, ConfigError

PROG = "odradek"

# Subcommand modules under odradek.cli, in help order. "server" is defined in this file.
SUBCOMMANDS: tuple[str, ...] = (
    "server", "cluster", "topics", "partitions", "produce", "consume", "groups", "transactions",
    "configs", "metadata_quorum",
    "acls", "users", "quotas", "features", "dump_log", "storage", "console", "bench",
    "completion",
)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

DESCRIPTION = """\
odradek is a Kafka-compatible broker: Kafka clients and tools talk to it unchanged,
and it keeps partitions in Kafka's on-disk format. Configuration uses Kafka's own
server.properties keys.

Start a single node with the defaults (PLAINTEXT://127.0.0.1:9092, data in ./data):
  odradek server
Start with a Kafka-style config file and a per-run override:
  odradek server -c config/server.properties --override num.partitions=3
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep hand-wrapped descriptions and examples as written."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, formatter_class=_Formatter,
        epilog=f"Run '{PROG} <command> --help' for a command's options.")
    options.add_verbose_argument(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="<command>",
                                       title="commands")
    for name in SUBCOMMANDS:
        if name == "server":
            add_server_parser(subparsers)
            continue
        module = _load_subcommand(name)
        if module is not None:
            module.add_parser(subparsers)
    options.share_options(parser)  # flags anywhere: after the command and its action too
    return parser


def _load_subcommand(name: str) -> ModuleType | None:
    qualified = f"odradek.cli.{name}"
    try:
        return importlib.import_module(qualified)
    except ModuleNotFoundError as e:
        if e.name == qualified:  # not written yet; anything else missing is a real error
            return None
        raise


# ----------------------------------------------------------------------------------------
# server

SERVER_DESCRIPTION = """\
Run a broker (and, with process.roles=broker,controller, its KRaft controller) in the
foreground until SIGINT/SIGTERM.

Configuration comes from Kafka's server.properties keys: first the file given with
-c/--config, then each --override key=value in order (later ones win). Unknown keys and
bad values stop start-up with a message naming the key. Keys that are valid in Kafka but
not used by odradek are accepted and listed in one warning.
"""

MULTI_PROCESS_HELP = f"""\
multi-process hosts (--processes N):
  A broker process uses about one core. With --processes N this command becomes a
  supervisor of N brokers, each a full member of the cluster, derived from the one
  config: node.id + i, every listener port + i (advertised too), log dirs
  <dir>/node-<node.id>, one cluster.id, the same broker.rack (set it to the host's name
  so replicas land on different hosts). With process.roles=broker,controller, process 0
  is also the KRaft controller (on CONTROLLER://<host>:<first port + N> unless a
  controller listener is configured) and the others are brokers. Clients bootstrap from
  any port and see every broker. A process that dies is restarted with backoff;
  SIGTERM stops the brokers (controlled shutdown), then the controller. Bad N, a port
  used twice or already in use: exit code 2 before anything starts.
  e.g. {PROG} server --processes 4 --override broker.rack=host-a
       (brokers 1-4 on 127.0.0.1:9092-9095, the controller on 127.0.0.1:9096)"""


def _server_epilog() -> str:
    width = max(len(key) for key in DIFFERENCES_FROM_KAFKA)
    lines = ["defaults that differ from Kafka's (so that a bare 'odradek server' works):"]
    for key, (ours, kafkas, _why) in DIFFERENCES_FROM_KAFKA.items():
        lines.append(f"  {key:<{width}}  {ours}  (Kafka: {kafkas})")
    lines += ["", "examples:",
              f"  {PROG} server",
              f"  {PROG} server -c server.properties --override log.dirs=/var/lib/odradek",
              (f"  {PROG} server --override node.id=2 --override "
               "listeners=PLAINTEXT://:9192")]
    lines += ["", MULTI_PROCESS_HELP]
    return "\n".join(lines)


def add_server_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "server", help="run a broker node", description=SERVER_DESCRIPTION,
        epilog=_server_epilog(), formatter_class=_Formatter)
    parser.add_argument("-c", "--config", metavar="FILE",
                        help="server.properties file (Java properties syntax)")
    parser.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                        help="set one config key, over the file; repeatable")
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS,
                        help="logging level (default: %(default)s)")
    parser.add_argument("--processes", metavar="N", type=processes_argument, default=1,
                        help="run N broker processes on this host, one per core, under "
                             "one supervisor (default 1: this process is the broker); "
                             "see 'multi-process hosts' below")
    console.add_server_argument(parser)
    parser.set_defaults(handler=run_server_command)
    return parser


def run_server_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    if args.processes > 1:
        if args.console:
            return fail("--console goes with one process: run 'odradek console' beside "
                        "the processes")
        try:
            return server_processes.run(args.config, args.override, args.processes,
                                        args.log_level)
        except ConfigError as e:
            return fail(e.message)
    try:
        config = BrokerConfig.load(args.config, args.override)
    except ConfigError as e:
        return fail(e.message)
    if args.console:
        why_not = console.start_beside_broker(args.console, config)
        if why_not is not None:
            return fail(why_not)
    from odradek.broker.server import run_server  # imported late: keeps --help fast

    return run_server(config)


# ----------------------------------------------------------------------------------------


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def fail(message: str) -> int:
    """Report a usage/configuration error the way argparse does, and return exit code 2."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) and usage errors (2) end here
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    options.configure_verbosity(getattr(args, "verbose", 0))
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return fail("a command is required")
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
