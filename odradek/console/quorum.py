"""The cluster page's controllers and fenced brokers, over the CLI's `Connection`
(confluent-kafka has no call for either):

* DescribeQuorum (v0-2), which a broker forwards to the active controller: the quorum
  leader and epoch, each voter's and observer's log end offset, its lag behind the
  leader in records, and how long ago it last fetched and last caught up; v2 adds the
  controllers' endpoints.
* DescribeCluster v2 with include_fenced_brokers (KIP-1073): which registered brokers
  are fenced. Before v2 a broker lists only the unfenced ones, so "fenced" is unknown.

Each is asked in the highest version both sides know (ApiVersions first); a cluster
that lacks the API (a peer broker, or a ZooKeeper-era Kafka) gets an exception in
words, which the page shows as "not available from this cluster".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from odradek.cli.metadata_quorum import METADATA_TOPIC
from odradek.protocol import api

from .client import Clients, ConsoleError

OUR_VERSIONS: dict[int, int] = {api.ApiKey.DESCRIBE_QUORUM: 2, api.ApiKey.DESCRIBE_CLUSTER: 2}
NAMES: dict[int, str] = {api.ApiKey.DESCRIBE_QUORUM: "DescribeQuorum",
         api.ApiKey.DESCRIBE_CLUSTER: "DescribeCluster"}


@dataclass
class QuorumReplica:
    id: int
    role: str  # "leader", "follower" (a voter) or "observer"
    log_end_offset: int
    lag: int  # records behind the leader's log end
    last_fetch_ms_ago: int | None
    last_caught_up_ms_ago: int | None
    endpoints: list[str] = field(default_factory=list)


@dataclass
class Quorum:
    leader: int
    epoch: int
    high_watermark: int
    replicas: list[QuorumReplica]

    @property
    def voters(self) -> set[int]:
        return {r.id for r in self.replicas if r.role != "observer"}


def _versions(clients: Clients, key: int) -> dict[int, int]:
    """{ApiVersions: 0, key: the version to send}, or ConsoleError if the cluster lacks it."""
    conn = clients.connect(None, {api.ApiKey.API_VERSIONS: 0})
    try:
        resp = conn.call(api.ApiKey.API_VERSIONS, {})
    except OSError as e:
        raise ConsoleError(f"ApiVersions: {e}") from None
    finally:
        conn.close()
    theirs = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    name = NAMES[key]
    if key not in theirs or theirs[key][0] > OUR_VERSIONS[key]:
        raise ConsoleError(f"the cluster does not answer {name}")
    return {api.ApiKey.API_VERSIONS: 0, key: min(theirs[key][1], OUR_VERSIONS[key])}


def _ask(clients: Clients, key: int, data: dict[str, Any]) -> tuple[Any, int]:
    versions = _versions(clients, key)
    conn = clients.connect(None, versions)
    try:
        return conn.call(key, data), versions[key]
    except OSError as e:
        raise ConsoleError(f"{NAMES[key]}: {e}") from None
    finally:
        conn.close()


def _ago(now_ms: int, timestamp_ms: int) -> int | None:
    return max(now_ms - timestamp_ms, 0) if timestamp_ms >= 0 else None


def describe_quorum(clients: Clients) -> Quorum:
    resp, _version = _ask(clients, api.ApiKey.DESCRIBE_QUORUM, {
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
    if resp.error_code.value:
        raise ConsoleError(f"DescribeQuorum: {resp.error_code.name}")
    part = resp.topics[0].partitions[0]
    if part.error_code.value:
        raise ConsoleError(f"DescribeQuorum: {part.error_code.name}")
    endpoints = {n.node_id: [f"{lst.name}://{lst.host}:{lst.port}" for lst in n.listeners]
                 for n in getattr(resp, "nodes", None) or ()}
    leader_end = max((r.log_end_offset for r in part.current_voters
                      if r.replica_id == part.leader_id), default=-1)
    now_ms = int(time.time() * 1000)
    replicas = []
    for voter, group in ((True, part.current_voters), (False, part.observers)):
        for r in group:
            role = ("leader" if r.replica_id == part.leader_id else "follower") if voter \
                else "observer"
            replicas.append(QuorumReplica(
                r.replica_id, role, r.log_end_offset, max(leader_end - r.log_end_offset, 0),
                _ago(now_ms, r.last_fetch_timestamp), _ago(now_ms, r.last_caught_up_timestamp),
                endpoints.get(r.replica_id, [])))
    order = {"leader": 0, "follower": 1, "observer": 2}
    replicas.sort(key=lambda r: (order[r.role], r.id))
    return Quorum(part.leader_id, part.leader_epoch, part.high_watermark, replicas)


def registered_brokers(clients: Clients) -> dict[int, tuple[bool, str, int, str | None]]:
    """Each registered broker, fenced ones too: id -> (fenced, host, port, rack);
    ConsoleError when the cluster cannot say (before v2 DescribeCluster leaves the
    fenced ones out)."""
    resp, version = _ask(clients, api.ApiKey.DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1,
        "include_fenced_brokers": True})
    if resp.error_code.value:
        raise ConsoleError(f"DescribeCluster: {resp.error_code.name}")
    if version < 2:
        raise ConsoleError(f"DescribeCluster v{version}: lists unfenced brokers only")
    return {b.broker_id: (bool(b.is_fenced), b.host, b.port, b.rack) for b in resp.brokers}
