"""`odradek topics`: list, describe, create, alter and delete topics.

Like Kafka's kafka-topics.sh and kafka-configs.sh for topics, over the Kafka
protocol (confluent-kafka's AdminClient), so it works against any broker:

    odradek topics list
    odradek topics describe [TOPIC ...]            partitions: leader, replicas, ISR; overrides;
                                                   tiered topics: log start, local start,
                                                   last tiered and end offsets, remote
                                                   size (bytes, segments)
    odradek topics create TOPIC [--partitions N] [--replication-factor N] [--config K=V ...]
    odradek topics alter-config TOPIC [--set K=V ...] [--delete K ...]
    odradek topics delete TOPIC [TOPIC ...]

Exit status: 0 on success, 1 when the broker refused something (its error is
printed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import client_config, options, output
from .connection import with_login_check
from .remote_sizes import remote_sizes, topic_ids
from .tiered_offsets import tiered_offsets
from .topic_elr import Elrs, eligible_leader_replicas

DEFAULT_TIMEOUT_S = 15.0
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs source of a topic's own override


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "topics",
        help="list, describe, create, alter and delete topics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_bootstrap_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds to wait for the broker (default: %(default)s)")
    sub = parser.add_subparsers(dest="topics_command", metavar="<action>", required=True)

    p = sub.add_parser("list", help="the topic names, one a line")
    p.set_defaults(handler=with_login_check("topics", cmd_list))

    p = sub.add_parser("describe", help="partitions (leader, replicas, ISR) and overrides")
    p.add_argument("topics", nargs="*", help="topics to describe (default: all)")
    p.set_defaults(handler=with_login_check("topics", cmd_describe))

    p = sub.add_parser("create", help="create a topic")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, default=-1,
                   help="partition count (default: the broker's num.partitions)")
    p.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas per partition (default: default.replication.factor)")
    p.add_argument("--config", action="append", default=[], metavar="K=V",
                   help="a topic config override, e.g. retention.ms=3600000; repeatable")
    p.set_defaults(handler=with_login_check("topics", cmd_create))

    p = sub.add_parser("alter-config", help="set or remove topic config overrides")
    p.add_argument("topic")
    p.add_argument("--set", action="append", default=[], metavar="K=V", dest="set_configs")
    p.add_argument("--delete", action="append", default=[], metavar="K", dest="delete_configs")
    p.set_defaults(handler=with_login_check("topics", cmd_alter_config))

    p = sub.add_parser("delete", help="delete topics")
    p.add_argument("topics", nargs="+")
    p.set_defaults(handler=with_login_check("topics", cmd_delete))
    return parser


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return options.serve_logs(AdminClient({"bootstrap.servers": args.bootstrap_server,
                        "socket.timeout.ms": int(args.timeout * 1000),
                        **client_config.librdkafka_settings(args.command_config),
                        **options.librdkafka_logging()}))


def _fail(message: str) -> int:
    print(f"odradek topics: {message}", file=sys.stderr)
    return 1


def _pairs(items: list[str], what: str) -> dict[str, str] | None:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"odradek topics: {what} {item!r} is not KEY=VALUE", file=sys.stderr)
            return None
        out[key.strip()] = value
    return out


def cmd_list(args: argparse.Namespace) -> int:
    try:
        md = _admin(args).list_topics(timeout=args.timeout)
    except Exception as e:  # noqa: BLE001 - confluent-kafka raises KafkaException for broker trouble
        return _fail(f"cannot reach {args.bootstrap_server}: {options.error_text(e)}")
    if output.is_json(args):
        output.print_json(sorted(md.topics))
        return 0
    for name in sorted(md.topics):
        print(name)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = _admin(args)
    try:
        md = admin.list_topics(timeout=args.timeout)
    except Exception as e:  # noqa: BLE001 - reported to the user, whatever it is
        return _fail(f"cannot reach {args.bootstrap_server}: {options.error_text(e)}")
    names = args.topics or sorted(md.topics)
    status = 0
    try:
        elrs: Elrs | None = eligible_leader_replicas(
            args.bootstrap_server, [n for n in names if n in md.topics], args.timeout,
            args.command_config)
    except (OSError, ValueError):
        elrs = None  # printed as N/A, as kafka-topics.sh does without the API
    described: list[dict[str, Any]] = []
    for name in names:
        topic = md.topics.get(name)
        if topic is None or topic.error is not None:
            status = _fail(f"topic {name!r} does not exist")
            continue
        res = ConfigResource(ResourceType.TOPIC, name)
        try:
            configs = admin.describe_configs([res])[res].result(timeout=args.timeout)
        except Exception as e:  # noqa: BLE001 - reported to the user, whatever it is
            status = _fail(f"describe configs of {name!r}: {options.error_text(e)}")
            configs = {}
        overrides = ",".join(
            f"{k}={v.value}" for k, v in sorted(configs.items())
            if int(getattr(v.source, "value", v.source)) == DYNAMIC_TOPIC_CONFIG
        )
        rf = len(topic.partitions[0].replicas) if topic.partitions else 0
        partitions = sorted(topic.partitions.values(), key=lambda p: p.id)
        if output.is_json(args):
            described.append({
                "topic": name, "partition_count": len(partitions), "replication_factor": rf,
                "configs": {k: v.value for k, v in sorted(configs.items())
                            if int(getattr(v.source, "value", v.source)) == DYNAMIC_TOPIC_CONFIG},
                "partitions": [{"partition": p.id, "leader": p.leader,
                                "replicas": list(p.replicas), "isr": list(p.isrs),
                                **_elr_fields(elrs, name, p.id)}
                               for p in partitions]})
            continue
        print(f"Topic: {name}\tPartitionCount: {len(topic.partitions)}\t"
              f"ReplicationFactor: {rf}\tConfigs: {overrides}")
        tiered = any(k == "remote.storage.enable" and v.value == "true"
                     for k, v in configs.items())
        sizes: dict[int, str] = {}
        if tiered:
            try:
                sizes = _remote_sizes(args, admin, name, [p.id for p in partitions])
            except Exception as e:  # noqa: BLE001 - the offsets are still worth printing
                status = _fail(f"remote sizes of {name}: {options.error_text(e)}")
        for p in partitions:
            print(f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                  f"Replicas: {','.join(map(str, p.replicas))}\t"
                  f"Isr: {','.join(map(str, p.isrs))}" + _elr_text(elrs, name, p.id))
            leader = md.brokers.get(p.leader)
            if tiered and leader is not None:
                # the remote tier's offsets, from the leader (ListOffsets -2/-4/-5/-1)
                try:
                    print("\t\t" + tiered_offsets(f"{leader.host}:{leader.port}", name, p.id,
                                                  args.timeout, args.command_config)
                          + sizes.get(p.id, ""))
                except OSError as e:
                    status = _fail(f"offsets of {name}-{p.id}: {options.error_text(e)}")
    if output.is_json(args):
        output.print_json(described)
    return status


def _elr_fields(elrs: Elrs | None, topic: str, partition: int) -> dict[str, Any]:
    got = None if elrs is None else elrs.get((topic, partition))
    return {"elr": None if got is None else list(got[0]),
            "last_known_elr": None if got is None else list(got[1])}


def _elr_text(elrs: Elrs | None, topic: str, partition: int) -> str:
    """kafka-topics.sh's `\tElr: ...\tLastKnownElr: ...` (N/A when unknown)."""
    got = None if elrs is None else elrs.get((topic, partition))
    if got is None:
        return "\tElr: N/A\tLastKnownElr: N/A"
    return f"\tElr: {','.join(map(str, got[0]))}\tLastKnownElr: {','.join(map(str, got[1]))}"


def _remote_sizes(args: argparse.Namespace, admin: Any, name: str,
                  partitions: list[int]) -> dict[int, str]:
    """`\tRemoteSizeBytes: B\tRemoteSegments: K` of each partition of a tiered topic."""
    topic_id = topic_ids(admin, [name], args.timeout)[name]
    got = remote_sizes(args.bootstrap_server, {topic_id: partitions}, args.timeout,
                       args.command_config)
    return {p: f"\tRemoteSizeBytes: {got[(topic_id, p)][0]}\t"
               f"RemoteSegments: {got[(topic_id, p)][1]}" for p in partitions}


def cmd_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    configs = _pairs(args.config, "--config")
    if configs is None:
        return 2
    new = NewTopic(args.topic, args.partitions, args.replication_factor, config=configs)
    admin = _admin(args)  # keep the client alive until its futures are done
    try:
        admin.create_topics([new], request_timeout=args.timeout)[args.topic].result(
            timeout=args.timeout)
    except Exception as e:  # noqa: BLE001 - reported to the user, whatever it is
        return _fail(f"create {args.topic!r}: {options.error_text(e)}")
    print(f"Created topic {args.topic}.")
    return 0


def cmd_alter_config(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    sets = _pairs(args.set_configs, "--set")
    if sets is None:
        return 2
    if not sets and not args.delete_configs:
        print("odradek topics: alter-config needs --set or --delete", file=sys.stderr)
        return 2
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in sets.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in args.delete_configs]
    res = ConfigResource(ResourceType.TOPIC, args.topic, incremental_configs=entries)
    admin = _admin(args)
    try:
        admin.incremental_alter_configs([res])[res].result(timeout=args.timeout)
    except Exception as e:  # noqa: BLE001 - reported to the user, whatever it is
        return _fail(f"alter configs of {args.topic!r}: {options.error_text(e)}")
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    status = 0
    admin = _admin(args)
    futures = admin.delete_topics(args.topics, operation_timeout=args.timeout)
    for name, fut in futures.items():
        try:
            fut.result(timeout=args.timeout)
            print(f"Deleted topic {name}.")
        except Exception as e:  # noqa: BLE001 - reported to the user, whatever it is
            status = _fail(f"delete {name!r}: {options.error_text(e)}")
    return status
