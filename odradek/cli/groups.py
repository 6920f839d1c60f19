"""`odradek groups`: list, describe, reset offsets of and delete consumer groups.

Like Kafka's kafka-consumer-groups.sh, over the Kafka protocol (confluent-kafka's
AdminClient), so it works against any broker:

    odradek groups list [--state STATE ...]
    odradek groups describe GROUP [--members | --state]
    odradek groups reset-offsets GROUP (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO | --shift-by N)
        [--dry-run | --execute]
    odradek groups delete GROUP [GROUP ...]
    odradek groups describe-share GROUP [--members | --state]
    odradek groups reset-share-offsets GROUP --topic T[:P,P...] ...
        (--to-earliest | --to-latest | --to-offset N) [--dry-run | --execute]
    odradek groups delete-share-offsets GROUP --topic T ...

`list` lists share groups (KIP-932) too, of type "share";
`describe-share` shows one (share_groups.py), as kafka-share-groups.sh does;
`reset-share-offsets` and `delete-share-offsets` change a share group's start
offsets, as its --reset-offsets and --delete-offsets (the group must be empty).

`describe` prints, per partition, the committed offset, the log end offset and
the lag, with the member that owns the partition. `reset-offsets` only shows
the new offsets unless `--execute` is given, and, as in Kafka, refuses to
change the offsets of a group that has members.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from typing import Any

from . import client_config, options, output, share_groups
from .connection import with_login_check

DEFAULT_TIMEOUT_S = 15.0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "groups",
        help="list, describe, reset offsets of and delete consumer groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_bootstrap_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds to wait for the broker (default: %(default)s)",
    )
    sub = parser.add_subparsers(dest="groups_command", metavar="<action>", required=True)

    p = sub.add_parser("list", help="list the groups")
    p.add_argument(
        "--state",
        action="append",
        default=[],
        help="only groups in this state (Stable, Empty, ...); repeatable",
    )
    p.set_defaults(handler=with_login_check("groups", cmd_list))

    p = sub.add_parser("describe", help="offsets, log end offsets, lag and members of a group")
    p.add_argument("group")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--members", action="store_true", help="list the members instead")
    mode.add_argument("--state", action="store_true", help="show the group's state only")
    p.set_defaults(handler=with_login_check("groups", cmd_describe))

    p = sub.add_parser("describe-share", help="start offsets, lag and members of a share "
                       "group (KIP-932)")
    p.add_argument("group")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--members", action="store_true", help="list the members instead")
    mode.add_argument("--state", action="store_true", help="show the group's state only")
    p.set_defaults(handler=with_login_check("groups", share_groups.cmd_describe_share))

    p = sub.add_parser("reset-offsets", help="set a group's committed offsets")
    p.add_argument("group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic", action="append", default=[], help="TOPIC or TOPIC:P,P,... ; repeatable"
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="e.g. 2024-01-31T12:00:00.000 (UTC unless an offset is given)",
    )
    to.add_argument("--shift-by", type=int, metavar="N")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only show (the default)")
    run.add_argument("--execute", action="store_true", help="apply the new offsets")
    p.set_defaults(handler=with_login_check("groups", cmd_reset))

    p = sub.add_parser("delete", help="delete empty groups and their offsets")
    p.add_argument("groups", nargs="+")
    p.set_defaults(handler=with_login_check("groups", cmd_delete))

    p = sub.add_parser("reset-share-offsets", help="set a share group's start offsets")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True,
                   help="TOPIC or TOPIC:P,P,... ; repeatable")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only show (the default)")
    run.add_argument("--execute", action="store_true", help="apply the new offsets")
    p.set_defaults(handler=with_login_check("groups", cmd_reset_share), all_topics=False)

    p = sub.add_parser("delete-share-offsets", help="forget a share group's state of topics")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True, help="TOPIC; repeatable")
    p.set_defaults(handler=with_login_check("groups", share_groups.cmd_delete_share_offsets))
    return parser


# -- helpers ---------------------------------------------------------------------------------


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return options.serve_logs(AdminClient(
        {
            "bootstrap.servers": args.bootstrap_server,
            "socket.timeout.ms": int(args.timeout * 1000),
            **client_config.librdkafka_settings(args.command_config),
            **options.librdkafka_logging(),
        }
    ))


def _error(message: str) -> int:
    print(f"odradek groups: {message}", file=sys.stderr)
    return 1


def _state_name(state: Any) -> str:
    names = {
        "STABLE": "Stable",
        "EMPTY": "Empty",
        "DEAD": "Dead",
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
        "UNKNOWN": "Unknown",
    }
    name = getattr(state, "name", str(state))
    return names.get(name, name.title())


def _describe(admin: Any, group: str, timeout: float) -> Any:
    return admin.describe_consumer_groups([group], request_timeout=timeout)[group].result()


def _committed(admin: Any, group: str, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    fut = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )[group]
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in fut.result().topic_partitions
        if tp.offset >= 0
    }


def _offsets(
    admin: Any, tps: list[tuple[str, int]], spec: Any, timeout: float
) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    futs = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps}, request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futs.items()}


def _log_end(admin: Any, tps: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return _offsets(admin, tps, OffsetSpec.latest(), timeout)


# -- list ---------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, KafkaException

    admin = _admin(args)
    states = set()
    for s in args.state:
        key = {
            "preparingrebalance": "PREPARING_REBALANCING",
            "completingrebalance": "COMPLETING_REBALANCING",
        }.get(s.lower(), s.upper())
        try:
            states.add(ConsumerGroupState[key])
        except KeyError:
            return _error(f"unknown state {s!r}")
    kwargs: dict[str, Any] = {"request_timeout": args.timeout}
    if states:
        kwargs["states"] = states
    try:
        result = admin.list_consumer_groups(**kwargs).result()
    except KafkaException as e:
        return _error(f"cannot list groups from {args.bootstrap_server}: {options.error_text(e)}")
    if result.errors and not result.valid:
        return _error(f"cannot list groups from {args.bootstrap_server}: "
                      f"{'; '.join(options.error_text(e) for e in result.errors)}")
    rows = [
        [g.group_id, _state_name(g.state), getattr(getattr(g, "type", None), "name", "-").lower()]
        for g in result.valid
    ]
    try:
        wanted = {s.lower() for s in args.state}
        rows += [[g, state, "share"] for g, state in share_groups.list_share_groups(args)
                 if not wanted or state.lower() in wanted]
    except (OSError, TimeoutError, ValueError, share_groups.ChannelError) as e:  # none there
        print(f"odradek groups: share groups not listed: {e}", file=sys.stderr)
    rows.sort()
    output.print_table(args, rows, ["GROUP", "STATE", "TYPE"])
    for err in result.errors:  # some brokers answered, some did not
        print(f"odradek groups: a broker did not list its groups: {options.error_text(err)}", file=sys.stderr)
    return 1 if result.errors else 0


# -- describe -----------------------------------------------------------------------------------


def cmd_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = _admin(args)
    try:
        desc = _describe(admin, args.group, args.timeout)
    except KafkaException as e:
        return _error(f"cannot describe group {args.group}: {e.args[0].str()}")
    if _state_name(desc.state) == "Dead":
        return _error(f"consumer group '{args.group}' does not exist")
    if args.state:
        coordinator = desc.coordinator
        output.print_table(
            args,
            [
                [
                    args.group,
                    f"{coordinator.host}:{coordinator.port} ({coordinator.id})",
                    desc.partition_assignor or None,
                    _state_name(desc.state),
                    len(desc.members),
                ]
            ],
            ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
        )
        return 0
    if args.members:
        rows = []
        for m in desc.members:
            tps = m.assignment.topic_partitions if m.assignment else []
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            shown = ",".join(
                f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())
            )
            rows.append([args.group, m.member_id, m.host, m.client_id, len(tps), shown or None])
        output.print_table(
            args, rows, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"])
        return 0
    owners: dict[tuple[str, int], Any] = {}
    for m in desc.members:
        for tp in m.assignment.topic_partitions if m.assignment else []:
            owners[(tp.topic, tp.partition)] = m
    committed = _committed(admin, args.group, args.timeout)
    tps = sorted(set(committed) | set(owners))
    ends = _log_end(admin, tps, args.timeout)
    rows = []
    for t, p in tps:
        current = committed.get((t, p))
        end = ends.get((t, p))
        lag = end - current if current is not None and end is not None else None
        owner = owners.get((t, p))
        rows.append(
            [
                args.group,
                t,
                p,
                current,
                end,
                lag,
                owner.member_id if owner else None,
                owner.host if owner else None,
                owner.client_id if owner else None,
            ]
        )
    if not desc.members and not output.is_json(args):
        print(f"Consumer group '{args.group}' has no active members.\n")
    output.print_table(
        args,
        rows,
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ],
    )
    return 0


# -- reset-offsets ----------------------------------------------------------------------------


def _parse_datetime_ms(text: str) -> int:
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return int(value.timestamp() * 1000)


def _targets(
    admin: Any, args: argparse.Namespace, committed: dict[tuple[str, int], int]
) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    out = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if parts:
            out += [(topic, int(p)) for p in parts.split(",") if p]
        else:
            md = admin.list_topics(topic, timeout=args.timeout)
            t = md.topics.get(topic)
            if t is None or t.error is not None or not t.partitions:
                raise ValueError(f"topic {topic} does not exist")
            out += [(topic, p) for p in sorted(t.partitions)]
    return out


def _show_plan(args: argparse.Namespace, targets: list[tuple[str, int]],
               new: dict[tuple[str, int], int]) -> bool:
    """Print the new offsets; whether to apply them (--execute)."""
    rows = [[args.group, t, p, new[(t, p)]] for t, p in targets]
    output.print_table(args, rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
    if not args.execute:
        print("\n(dry run: nothing changed; add --execute to apply)",
              file=sys.stderr if output.is_json(args) else sys.stdout)
    return bool(args.execute)


def cmd_reset(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(args)
    try:
        desc = _describe(admin, args.group, args.timeout)
        committed = _committed(admin, args.group, args.timeout)
        targets = _targets(admin, args, committed)
    except (KafkaException, ValueError) as e:
        return _error(str(e.args[0].str() if isinstance(e, KafkaException) else e))
    state = _state_name(desc.state)
    if args.execute and state not in ("Empty", "Dead"):
        return _error(
            f"assignments can only be reset if the group '{args.group}' is inactive, "
            f"but the current state is {state}."
        )
    earliest = _offsets(admin, targets, OffsetSpec.earliest(), args.timeout)
    latest = _offsets(admin, targets, OffsetSpec.latest(), args.timeout)
    new: dict[tuple[str, int], int] = {}
    for tp in targets:
        lo, hi = earliest[tp], latest[tp]
        if args.to_earliest:
            offset = lo
        elif args.to_latest:
            offset = hi
        elif args.to_offset is not None:
            offset = args.to_offset
        elif args.shift_by is not None:
            offset = committed.get(tp, lo) + args.shift_by
        else:
            ts = _parse_datetime_ms(args.to_datetime)
            found = _offsets(admin, [tp], OffsetSpec.for_timestamp(ts), args.timeout)[tp]
            offset = hi if found < 0 else found
        new[tp] = min(max(offset, lo), hi)  # Kafka clamps to the log's range
    if not _show_plan(args, targets, new):
        return 0
    request = ConsumerGroupTopicPartitions(
        args.group, [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
    )
    try:
        admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)[
            args.group
        ].result()
    except KafkaException as e:
        return _error(f"reset failed: {e.args[0].str()}")
    return 0


def cmd_reset_share(args: argparse.Namespace) -> int:
    """A share group's start offsets, resolved here as kafka-share-groups.sh
    resolves them (ListOffsets; --to-offset clamped to the log's range), then
    AlterShareGroupOffsets."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(args)
    try:
        targets = _targets(admin, args, {})
        earliest = _offsets(admin, targets, OffsetSpec.earliest(), args.timeout)
        latest = _offsets(admin, targets, OffsetSpec.latest(), args.timeout)
    except (KafkaException, ValueError) as e:
        return _error(str(e.args[0].str() if isinstance(e, KafkaException) else e))
    new = {}
    for tp in targets:
        lo, hi = earliest[tp], latest[tp]
        offset = lo if args.to_earliest else hi if args.to_latest else args.to_offset
        new[tp] = min(max(offset, lo), hi)
    if not _show_plan(args, targets, new):
        return 0
    try:
        failures = share_groups.alter_offsets(args, new)
    except (share_groups.ChannelError, OSError, TimeoutError, ValueError) as e:
        return _error(f"reset failed: {e}")
    for failure in failures:
        _error(f"reset failed: {failure}")
    return 1 if failures else 0


# -- delete ---------------------------------------------------------------------------------------


def cmd_delete(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    admin = _admin(args)
    failed = 0
    for group, fut in admin.delete_consumer_groups(
        args.groups, request_timeout=args.timeout
    ).items():
        try:
            fut.result()
            print(f"Deletion of requested consumer group '{group}' was successful.")
        except KafkaException as e:
            failed += 1
            print(
                f"Deletion of consumer group '{group}' failed: {e.args[0].str()}", file=sys.stderr
            )
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.handler(args))
