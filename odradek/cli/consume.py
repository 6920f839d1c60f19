"""`odradek consume`: print records of a topic, like kafka-console-consumer.sh.

    odradek consume TOPIC [--from-beginning | --offset N] [--partition N]
                          [--group G] [--max-messages N] [--timeout S]
                          [--print-key] [--print-headers] [--print-offset]

Without --group the partitions are assigned directly (no consumer group, no
commits); with --group the consumer joins that group and commits. Stops after
--max-messages records or when nothing arrives for --timeout seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from . import client_config, options, progress
from .connection import with_login_check


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "consume", help="print records of a topic", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic")
    options.add_bootstrap_argument(parser)
    client_config.add_argument(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the earliest offset (default: the end)")
    start.add_argument("--offset", type=int, default=None, help="start at this offset")
    parser.add_argument("--partition", type=int, default=None, help="only this partition")
    parser.add_argument("--group", default=None, help="consume as a member of this group")
    parser.add_argument("--max-messages", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="stop after this many idle seconds (default: %(default)s)")
    parser.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                        default="read_uncommitted")
    parser.add_argument("--print-key", action="store_true")
    parser.add_argument("--print-headers", action="store_true")
    parser.add_argument("--print-offset", action="store_true")
    parser.set_defaults(handler=with_login_check("consume", cmd_consume))
    return parser


def _text(value: str | bytes | None) -> str:
    """A key, value or header value as printed (header values may come as str)."""
    if value is None:
        return "null"
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def cmd_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    conf = {
        "bootstrap.servers": args.bootstrap_server,
        "group.id": args.group or "odradek-console-consumer",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.partition.eof": False,
        **client_config.librdkafka_settings(args.command_config),
        **options.librdkafka_logging(),
    }
    consumer = Consumer(conf)
    try:
        if args.group:
            consumer.subscribe([args.topic])
        else:
            md = consumer.list_topics(args.topic, timeout=args.timeout)
            topic = md.topics.get(args.topic)
            if topic is None or topic.error is not None:
                print(f"odradek consume: topic {args.topic!r} does not exist", file=sys.stderr)
                return 1
            partitions = [args.partition] if args.partition is not None else sorted(
                topic.partitions)
            start = args.offset if args.offset is not None else (
                OFFSET_BEGINNING if args.from_beginning else OFFSET_END)
            consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        count = 0
        bar = progress.Progress("consume", args.max_messages, "messages",
                                enabled=progress.wanted(quiet_output=False))
        idle_since = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if time.monotonic() - idle_since > args.timeout:
                    break
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                print(f"odradek consume: {error}", file=sys.stderr)
                return 1
            idle_since = time.monotonic()
            parts = []
            if args.print_offset:
                parts.append(f"{msg.partition()}:{msg.offset()}")
            if args.print_key:
                parts.append(_text(msg.key()))
            if args.print_headers:
                headers = msg.headers() or []  # a list of pairs from a consumer
                pairs = headers.items() if isinstance(headers, dict) else headers
                parts.append(",".join(f"{k}={_text(v)}" for k, v in pairs))
            parts.append(_text(msg.value()))
            print("\t".join(parts), flush=True)
            count += 1
            bar.update(count)
        bar.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
        return 0
    finally:
        consumer.close()
