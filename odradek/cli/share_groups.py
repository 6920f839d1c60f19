"""`odradek groups describe-share GROUP`: a share group (KIP-932), as Kafka's
kafka-share-groups.sh --describe shows it.

librdkafka's AdminClient has no share-group calls, so this speaks the Kafka
protocol itself (protocol/client.py): FindCoordinator for the group, then
ShareGroupDescribe and DescribeShareGroupOffsets to the coordinator.

    odradek groups describe-share GROUP              start offset and lag per partition
    odradek groups describe-share GROUP --members    members and their assignments
    odradek groups describe-share GROUP --state      coordinator, state, member count
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


async def _describe(args: argparse.Namespace) -> tuple[Any, Any, str]:
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
    where = f"{c.host}:{c.port} ({c.node_id})"
    channel = _channel(args, c.host, c.port)
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
