"""Cluster and topic data for the pages, and the topic changes (create, delete, alter a
config, add partitions), all through confluent-kafka's AdminClient."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .client import FAILURES, Clients, ConsoleError, text


@dataclass
class Broker:
    id: int
    host: str
    port: int
    rack: str | None
    fenced: bool | None = None  # None: the cluster does not say
    controller: bool = False  # a voter of the metadata quorum too


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller: int | None
    brokers: list[Broker]
    topics: int
    partitions: int


@dataclass
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    internal: bool
    error: str | None = None


@dataclass
class PartitionRow:
    id: int
    leader: int
    replicas: list[int]
    isr: list[int]
    earliest: int | None = None
    latest: int | None = None
    error: str | None = None
    local_bytes: int | None = None  # the leader's replica, from DescribeLogDirs
    remote_bytes: int | None = None  # the remote tier (tiered topics only)
    remote_segments: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    sensitive: bool
    read_only: bool


@dataclass
class TopicDetail:
    name: str
    partitions: list[PartitionRow]
    configs: list[ConfigRow] = field(default_factory=list)
    configs_error: str | None = None
    sizes_error: str | None = None

    @property
    def tiered(self) -> bool:
        return any(c.name == "remote.storage.enable" and c.value == "true"
                   for c in self.configs)


def _call(what: str, future: Any, timeout: float) -> Any:
    try:
        return future.result(timeout=timeout)
    except FAILURES as e:
        raise ConsoleError(f"{what}: {text(e)}") from None


def _metadata(clients: Clients) -> Any:
    try:
        return clients.admin.list_topics(timeout=clients.timeout_s)
    except FAILURES as e:
        raise ConsoleError(f"cannot read the metadata from {clients.bootstrap}: {text(e)}"
                           ) from None


def cluster(clients: Clients) -> ClusterInfo:
    md = _metadata(clients)
    try:
        desc = clients.admin.describe_cluster(request_timeout=clients.timeout_s).result()
        brokers = [Broker(n.id, n.host, n.port, n.rack) for n in desc.nodes]
        controller = desc.controller.id if desc.controller is not None else None
        cluster_id = desc.cluster_id
    except FAILURES:  # a broker without DescribeCluster: what Metadata says
        brokers = [Broker(b.id, b.host, b.port, None) for b in md.brokers.values()]
        controller, cluster_id = md.controller_id, md.cluster_id
    return ClusterInfo(cluster_id, controller, sorted(brokers, key=lambda b: b.id),
                       len(md.topics), sum(len(t.partitions) for t in md.topics.values()))


def topics(clients: Clients, query: str = "") -> list[TopicRow]:
    md = _metadata(clients)
    rows = []
    for name, t in md.topics.items():
        if query and query.lower() not in name.lower():
            continue
        parts = list(t.partitions.values())
        rows.append(TopicRow(name, len(parts), len(parts[0].replicas) if parts else 0,
                             name.startswith("__"), text(t.error) if t.error else None))
    return sorted(rows, key=lambda r: (r.internal, r.name))


def partitions(clients: Clients, name: str) -> list[PartitionRow]:
    # All topics' metadata, not the topic's: a Metadata request naming a topic that does
    # not exist creates it on a broker with auto.create.topics.enable.
    md = _metadata(clients)
    t = md.topics.get(name)
    if t is None or (t.error is not None and not t.partitions):
        why = text(t.error) if t is not None and t.error is not None else "no such topic"
        raise ConsoleError(f"topic {name}: {why}")
    return [PartitionRow(p.id, p.leader, list(p.replicas), list(p.isrs),
                         error=text(p.error) if p.error else None)
            for p in sorted(t.partitions.values(), key=lambda p: p.id)]


def offsets(clients: Clients, tps: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    futs = clients.admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                      request_timeout=clients.timeout_s)
    out = {}
    for tp, f in futs.items():
        try:
            out[(tp.topic, tp.partition)] = f.result().offset
        except FAILURES:  # a partition without a leader now: shown as unknown
            pass
    return out


def topic(clients: Clients, name: str) -> TopicDetail:
    from confluent_kafka.admin import OffsetSpec

    parts = partitions(clients, name)
    tps = [(name, p.id) for p in parts]
    earliest = offsets(clients, tps, OffsetSpec.earliest())
    latest = offsets(clients, tps, OffsetSpec.latest())
    for p in parts:
        p.earliest, p.latest = earliest.get((name, p.id)), latest.get((name, p.id))
    detail = TopicDetail(name, parts)
    try:
        detail.configs = configs(clients, name)
    except ConsoleError as e:
        detail.configs_error = str(e)
    return detail


def configs(clients: Clients, name: str) -> list[ConfigRow]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    res = ConfigResource(ResourceType.TOPIC, name)
    futs = clients.admin.describe_configs([res], request_timeout=clients.timeout_s)
    entries = _call(f"cannot describe the configs of {name}", futs[res], clients.timeout_s)
    return [ConfigRow(e.name, None if e.is_sensitive else e.value, _source(e.source),
                      e.is_sensitive, e.is_read_only)
            for e in sorted(entries.values(), key=lambda e: e.name)]


def _source(source: Any) -> str:
    from confluent_kafka.admin import ConfigSource

    try:
        return str(ConfigSource(int(source)).name)
    except (TypeError, ValueError):
        return str(getattr(source, "name", source))


def create(clients: Clients, name: str, partitions: int, replication_factor: int,
           config: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    futs = clients.admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=config)],
        request_timeout=clients.timeout_s, operation_timeout=clients.timeout_s)
    _call(f"cannot create topic {name}", futs[name], clients.timeout_s + 5)


def delete(clients: Clients, name: str) -> None:
    futs = clients.admin.delete_topics([name], request_timeout=clients.timeout_s,
                                       operation_timeout=clients.timeout_s)
    _call(f"cannot delete topic {name}", futs[name], clients.timeout_s + 5)


def alter_config(clients: Clients, name: str, key: str, value: str | None) -> None:
    """Set `key` to `value`, or remove the topic's override of it when `value` is None."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    futs = clients.admin.incremental_alter_configs([res], request_timeout=clients.timeout_s)
    _call(f"cannot change {key} of {name}", futs[res], clients.timeout_s + 5)


def add_partitions(clients: Clients, name: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    futs = clients.admin.create_partitions([NewPartitions(name, total)],
                                           request_timeout=clients.timeout_s,
                                           operation_timeout=clients.timeout_s)
    _call(f"cannot add partitions to {name}", futs[name], clients.timeout_s + 5)


def parse_configs(lines: str) -> dict[str, str]:
    """`key=value` lines of the create form; raises ValueError naming a bad line."""
    out = {}
    for line in lines.splitlines():
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"not key=value: {line!r}")
        out[key.strip()] = value.strip()
    return out
