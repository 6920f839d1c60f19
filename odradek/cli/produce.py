"""`odradek produce`: send lines from standard input as records, like kafka-console-producer.sh.

    odradek produce TOPIC [--key-separator SEP] [--header K=V ...] [--partition N]
                          [--acks all|1|0] [--compression none|gzip|snappy|lz4|zstd]

Each input line is one record; with --key-separator the part before the first
separator is the key. Exit status 0 when every record was acknowledged, 1 if
any failed (each failure is printed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from . import client_config, options
from .connection import with_login_check


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "produce", help="send lines from stdin as records", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic")
    options.add_bootstrap_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--key-separator", default=None,
                        help="split each line into KEY<sep>VALUE at the first separator")
    parser.add_argument("--header", action="append", default=[], metavar="K=V",
                        help="a header added to every record; repeatable")
    parser.add_argument("--partition", type=int, default=None, help="send to this partition")
    parser.add_argument("--acks", choices=["all", "1", "0", "-1"], default="all")
    parser.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"],
                        default="none")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for acknowledgements (default: %(default)s)")
    parser.set_defaults(handler=with_login_check("produce", cmd_produce))
    return parser


def cmd_produce(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    from confluent_kafka import Producer

    headers = []
    for item in args.header:
        name, sep, text = item.partition("=")
        if not sep:
            print(f"odradek produce: --header {item!r} is not K=V", file=sys.stderr)
            return 2
        headers.append((name, text.encode()))
    producer = Producer({
        "bootstrap.servers": args.bootstrap_server, "acks": args.acks,
        "compression.type": args.compression, "linger.ms": 5,
        "message.timeout.ms": int(args.timeout * 1000),
        **client_config.librdkafka_settings(args.command_config),
        **options.librdkafka_logging(),
    })
    failures: list[str] = []
    sent = 0

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for line in stdin or sys.stdin:
        line = line.rstrip("\n")
        key: bytes | None = None
        value = line
        if args.key_separator is not None and args.key_separator in line:
            k, _, value = line.partition(args.key_separator)
            key = k.encode()
        kwargs: dict[str, Any] = {"value": value.encode(), "key": key, "headers": headers or None,
                                  "on_delivery": on_delivery}
        if args.partition is not None:
            kwargs["partition"] = args.partition
        while True:
            try:
                producer.produce(args.topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    left = producer.flush(args.timeout)
    for failure in failures[:20]:
        print(f"odradek produce: {failure}", file=sys.stderr)
    if left or failures:
        print(f"odradek produce: {len(failures) + left} of {sent} records not acknowledged",
              file=sys.stderr)
        return 1
    return 0
