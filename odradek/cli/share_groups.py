"""`odradek groups describe-share GROUP`: a share group (KIP-932), as Kafka's
kafka-share-groups.sh --describe shows it; `reset-share-offsets` and
`delete-share-offsets` as its --reset-offsets and --delete-offsets.

librdkafka's AdminClient has no share-group calls, so this speaks the Kafka
protocol itself (protocol/client.py): FindCoordinator for the group, then
ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets or
DeleteShareGroupOffsets to the coordinator.

    odradek groups describe-share GROUP              start offset and lag per partition
    odradek groups describe-share GROUP --members    members and their assignments
    odradek groups describe-share GROUP --state      coordinator, state, member count
    odradek groups reset-share-offsets GROUP --topic T[:P,...] (--to-earliest |
        --to-latest | --to-offset N) [--dry-run | --execute]   (groups.py resolves
        the offsets, as kafka-share-groups.sh does, then `alter_offsets`)
    odradek groups delete-share-offsets GROUP --topic T ...
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ..protocol import api
from ..protocol.client import ChannelError, KafkaChannel
from . import output

K = api.ApiKey
GROUP_ID_NOT_FOUND = 69


def _channel(args: argparse.Namespace, host: str, port: int) -> KafkaChannel:
    config = args.command_config
    return KafkaChannel(host, port, b"odradek-groups",
                        getattr(config, "ssl_context", None), getattr(config, "sasl", None))


async def _coordinator(args: argparse.Namespace) -> tuple[KafkaChannel, str]:
    """A connection to the group's coordinator, and where it is."""
    host, _, port = args.bootstrap_server.split(",")[0].rpartition(":")
    boot = _channel(args, host, int(port))
    try:
        found = await boot.request(K.FIND_COORDINATOR, 4, {
            "key_type": 0, "coordinator_keys": [args.group]}, args.timeout)
    finally:
        boot.close()
    c = found.coordinators[0]
    if c.error_code.value:
        raise ChannelError(f"FindCoordinator answered error {c.error_code.value}")
    return _channel(args, c.host, c.port), f"{c.host}:{c.port} ({c.node_id})"


async def _to_coordinator(args: argparse.Namespace, key: int, version: int,
                          body: dict[str, Any]) -> Any:
    channel, _ = await _coordinator(args)
    try:
        return await channel.request(key, version, body, args.timeout)
    finally:
        channel.close()


def _failed(what: str, code: int, message: str | None) -> str:
    return f"{what}: error {code}{' ' + message if message else ''}"


def alter_offsets(args: argparse.Namespace, offsets: dict[tuple[str, int], int]) -> list[str]:
    """AlterShareGroupOffsets (the group must be empty); the failures, in words."""
    topics: dict[str, list[dict[str, int]]] = {}
    for (topic, p), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({"partition_index": p, "start_offset": offset})
    resp = asyncio.run(_to_coordinator(args, K.ALTER_SHARE_GROUP_OFFSETS, 0, {
        "group_id": args.group, "topics": [{"topic_name": t, "partitions": ps}
                                           for t, ps in topics.items()]}))
    if resp.error_code.value:
        return [_failed(f"share group {args.group}", resp.error_code.value, resp.error_message)]
    return [_failed(f"{t.topic_name}-{p.partition_index}", p.error_code.value, p.error_message)
            for t in resp.responses for p in t.partitions if p.error_code.value]


def cmd_delete_share_offsets(args: argparse.Namespace) -> int:
    try:
        resp = asyncio.run(_to_coordinator(args, K.DELETE_SHARE_GROUP_OFFSETS, 0, {
            "group_id": args.group, "topics": [{"topic_name": t} for t in args.topic]}))
    except (ChannelError, OSError, TimeoutError, ValueError) as e:
        print(f"odradek groups: cannot delete offsets of {args.group}: {e}", file=sys.stderr)
        return 1
    if resp.error_code.value:
        print(f"odradek groups: {_failed(args.group, resp.error_code.value, resp.error_message)}",
              file=sys.stderr)
        return 1
    failed = 0
    for t in resp.responses:
        if t.error_code.value:
            failed += 1
            print(f"odradek groups: {_failed(t.topic_name, t.error_code.value, t.error_message)}",
                  file=sys.stderr)
        else:
            print(f"Deleted the share-group offsets of '{args.group}' for topic "
                  f"'{t.topic_name}'.")
    return 1 if failed else 0


async def _describe(args: argparse.Namespace) -> tuple[Any, Any, str]:
    channel, where = await _coordinator(args)
    try:
        described = await channel.request(K.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [args.group], "include_authorized_operations": False}, args.timeout)
        offsets = await channel.request(K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {
            "groups": [{"group_id": args.group, "topics": None}]}, args.timeout)
    finally:
        channel.close()
    return described.groups[0], offsets.groups[0], where


async def _list(args: argparse.Namespace) -> list[tuple[str, str]]:
    host, _, port = args.bootstrap_server.split(",")[0].rpartition(":")
    boot = _channel(args, host, int(port))
    try:
        md = await boot.request(K.METADATA, 12, {
            "topics": [], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, args.timeout)
    finally:
        boot.close()
    found: list[tuple[str, str]] = []
    for b in md.brokers:  # each coordinator lists its own groups
        channel = _channel(args, b.host, b.port)
        try:
            listed = await channel.request(K.LIST_GROUPS, 5, {
                "states_filter": [], "types_filter": ["share"]}, args.timeout)
        finally:
            channel.close()
        found += [(g.group_id, g.group_state) for g in listed.groups]
    return sorted(found)


def list_share_groups(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(group, state) of every share group, for `odradek groups list`: librdkafka's
    ListGroups leaves them out."""
    return asyncio.run(_list(args))


def cmd_describe_share(args: argparse.Namespace) -> int:
    try:
        group, offsets, coordinator = asyncio.run(_describe(args))
    except (ChannelError, OSError, TimeoutError, ValueError) as e:
        print(f"odradek groups: cannot describe share group {args.group}: {e}", file=sys.stderr)
        return 1
    if group.error_code.value == GROUP_ID_NOT_FOUND:
        print(f"odradek groups: share group '{args.group}' does not exist", file=sys.stderr)
        return 1
    if group.error_code.value:
        print(f"odradek groups: cannot describe share group {args.group}: error "
              f"{group.error_code.value} {group.error_message or ''}", file=sys.stderr)
        return 1
    if args.state:
        output.print_table(args, [[args.group, coordinator, group.group_state,
                                   len(group.members)]],
                           ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"])
        return 0
    if args.members:
        rows = []
        for m in group.members:
            tps = m.assignment.topic_partitions
            shown = ",".join(f"{tp.topic_name}({','.join(map(str, sorted(tp.partitions)))})"
                             for tp in sorted(tps, key=lambda tp: tp.topic_name))
            rows.append([args.group, m.member_id, m.client_host, m.client_id,
                         sum(len(tp.partitions) for tp in tps), shown or None])
        output.print_table(args, rows, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                        "#PARTITIONS", "ASSIGNMENT"])
        return 0
    rows = []
    for t in sorted(offsets.topics, key=lambda t: t.topic_name):
        for p in t.partitions:
            rows.append([args.group, t.topic_name, p.partition_index,
                         p.start_offset if p.start_offset >= 0 else None,
                         p.lag if p.lag >= 0 else None])
    if not group.members and not output.is_json(args):
        print(f"Share group '{args.group}' has no active members.\n")
    output.print_table(args, rows, ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"])
    return 0
