"""`odradek metadata-quorum`: the KRaft metadata quorum, like kafka-metadata-quorum.sh.

    odradek metadata-quorum --bootstrap-server HOST:PORT describe --status
    odradek metadata-quorum --bootstrap-server HOST:PORT describe --replication
    odradek metadata-quorum --bootstrap-server HOST:PORT add-controller \
        --controller-config controller.properties
    odradek metadata-quorum --bootstrap-server HOST:PORT remove-controller \
        --controller-id ID --controller-directory-id=DIRID
    odradek metadata-quorum --bootstrap-controller HOST:PORT describe --status   (and the rest)

Both send DescribeQuorum v2 (KIP-595/836/853) to the bootstrap broker, which
forwards it to the active controller (the quorum's leader) as Kafka's brokers
do. `--status` prints the cluster id, leader, epoch, high watermark, the
largest follower lag (in offsets and in ms behind the leader's caught-up time)
and the voters with their controller endpoints and the observers;
`--replication` one row per voter and observer: its log end offset, lag behind
the leader, last fetch and last caught-up times (ms since the epoch) and role.

`add-controller` (KIP-853) makes a running controller a voter: it reads that
controller's server.properties (`--controller-config`; Kafka's tool takes the
same file as its --command-config): node.id, the directory id in its metadata
log dir's meta.properties and its controller listener, and sends AddRaftVoter;
the controller must have been formatted with --no-initial-controllers and be
running (an observer that has caught up). `remove-controller` sends
RemoveRaftVoter for `--controller-id` with `--controller-directory-id=DIRID` (write
the `=`: a directory id may begin with "-") (both
shown by `describe --status`); the active controller may remove itself (a new
leader is elected from the rest). Only a quorum formatted with --standalone or
--initial-controllers (kraft.version 1) can change; one change at a time.
`--bootstrap-controller` (KIP-919, as Kafka's tool) talks to the controllers
instead: DescribeCluster to a listed controller names the active one, which
gets the requests (cli/bootstrap_controller.py).
Exit codes: 0 ok, 1 the broker answered with an error or could not be reached,
2 usage or a bad --command-config.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import uuid
from datetime import timedelta
from typing import Any

from odradek.config import BrokerConfig, ConfigError, parse_properties
from odradek.protocol import api
from odradek.raft.voters import uuid_bytes

from . import bootstrap_controller, output
from .connection import Connection, add_command, reporting_broker_errors
from .storage import controller_endpoint

METADATA_TOPIC = "__cluster_metadata"
VERSIONS: dict[int, int] = {
    api.ApiKey.METADATA: 12,
    api.ApiKey.DESCRIBE_QUORUM: 2,
    api.ApiKey.ADD_RAFT_VOTER: 1,
    api.ApiKey.REMOVE_RAFT_VOTER: 0,
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser, sub = add_command(subparsers, "metadata-quorum",
                              "describe the KRaft metadata quorum", __doc__)
    bootstrap_controller.add_argument(parser)
    p = sub.add_parser("describe", help="the quorum's status or its replication")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="leader, epoch, lag, voters")
    what.add_argument("--replication", action="store_true", help="one row per replica")
    p.set_defaults(handler=reporting_broker_errors("metadata-quorum", _describe))
    p = sub.add_parser("add-controller", help="make a running controller a voter (KIP-853)")
    p.add_argument("--controller-config", required=True, metavar="FILE",
                   help="the server.properties of the controller to add")
    p.set_defaults(handler=reporting_broker_errors("metadata-quorum", _add_controller))
    p = sub.add_parser("remove-controller", help="remove a voter (KIP-853)")
    p.add_argument("--controller-id", type=int, required=True)
    p.add_argument("--controller-directory-id", required=True,
                   help="its metadata log dir's directory.id (describe --status shows it); "
                        "write --controller-directory-id=ID: an id may begin with '-'")
    p.set_defaults(handler=reporting_broker_errors("metadata-quorum", _remove_controller))
    return parser


def _voter_call(args: argparse.Namespace, key: int, body: dict[str, Any], what: str) -> int:
    address, _ = bootstrap_controller.target(args)
    conn = Connection(address, args.timeout, VERSIONS,
                      b"odradek-metadata-quorum", args.command_config)
    try:
        resp = conn.call(key, body)
    finally:
        conn.close()
    if resp.error_code.value:
        detail = f": {resp.error_message}" if resp.error_message else ""
        return _error(f"{what}: {resp.error_code.name}{detail}")
    print(f"{what}: done")
    return 0


def _add_controller(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.controller_config, [])
        endpoint = controller_endpoint(config)
        meta = parse_properties((config.metadata_log_dir / "meta.properties").read_text())
        directory = uuid.UUID(bytes=uuid_bytes(meta["directory.id"]))
    except (ConfigError, OSError, KeyError, ValueError) as e:
        print(f"odradek metadata-quorum: {args.controller_config}: {e}", file=sys.stderr)
        return 2
    body = {"cluster_id": meta.get("cluster.id"), "timeout": timedelta(seconds=args.timeout),
            "voter_id": config.node_id, "voter_directory_id": directory,
            "listeners": [{"name": endpoint.listener, "host": endpoint.host,
                           "port": endpoint.port}],
            "ack_when_committed": True}
    return _voter_call(args, api.ApiKey.ADD_RAFT_VOTER, body,
                       f"add controller {config.node_id}")


def _remove_controller(args: argparse.Namespace) -> int:
    try:
        directory = uuid.UUID(bytes=uuid_bytes(args.controller_directory_id))
    except ValueError:
        print("odradek metadata-quorum: --controller-directory-id is not a Kafka Uuid",
              file=sys.stderr)
        return 2
    body = {"cluster_id": None, "voter_id": args.controller_id,
            "voter_directory_id": directory}
    return _voter_call(args, api.ApiKey.REMOVE_RAFT_VOTER, body,
                       f"remove controller {args.controller_id}")


def _describe(args: argparse.Namespace) -> int:
    address, controller = bootstrap_controller.target(args)
    conn = Connection(address, args.timeout, VERSIONS, b"odradek-metadata-quorum",
                      args.command_config)
    try:
        resp = conn.call(api.ApiKey.DESCRIBE_QUORUM, {
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]})
        cluster_id = controller.cluster_id if controller is not None else None
        if args.status and controller is None:
            cluster_id = conn.call(api.ApiKey.METADATA, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}).cluster_id
    finally:
        conn.close()
    if resp.error_code.value:
        return _error(f"DescribeQuorum: {resp.error_code.name}")
    part = resp.topics[0].partitions[0]
    if part.error_code.value:
        return _error(f"DescribeQuorum: {part.error_code.name} (leader {part.leader_id})")
    endpoints = {n.node_id: [f"{lst.name}://{lst.host}:{lst.port}" for lst in n.listeners]
                 for n in resp.nodes}
    if args.status:
        _status(args, cluster_id, part, endpoints)
    else:
        _replication(args, part)
    return 0


def _directory(r: Any) -> str:
    """Kafka's base64 Uuid text; the zero id for a static voter."""
    raw = r.replica_directory_id.bytes if r.replica_directory_id is not None else bytes(16)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _leader_end(part: Any) -> int:
    return max((r.log_end_offset for r in part.current_voters if r.replica_id == part.leader_id),
               default=-1)


def _status(args: argparse.Namespace, cluster_id: str | None, part: Any,
            endpoints: dict[int, list[str]]) -> None:
    leader_end = _leader_end(part)
    followers = [r for r in part.current_voters if r.replica_id != part.leader_id]
    lag = max((leader_end - r.log_end_offset for r in followers), default=0)
    leader_caught_up = max((r.last_caught_up_timestamp for r in part.current_voters
                            if r.replica_id == part.leader_id), default=-1)
    lag_ms = max((leader_caught_up - r.last_caught_up_timestamp for r in followers
                  if r.last_caught_up_timestamp >= 0), default=0)
    voters = [{"id": r.replica_id, "directoryId": _directory(r),
               "endpoints": endpoints.get(r.replica_id, [])} for r in part.current_voters]
    observers = [{"id": r.replica_id, "directoryId": _directory(r)}
                 for r in part.observers]
    fields = [
        ("ClusterId", cluster_id), ("LeaderId", part.leader_id),
        ("LeaderEpoch", part.leader_epoch), ("HighWatermark", part.high_watermark),
        ("MaxFollowerLag", lag), ("MaxFollowerLagTimeMs", lag_ms),
        ("CurrentVoters", voters), ("CurrentObservers", observers),
    ]
    if output.is_json(args):
        output.print_json({output.column_key(k): v for k, v in fields})
        return
    for name, value in fields:
        shown = json.dumps(value) if isinstance(value, list) else value
        print(f"{name + ':':<24}{shown}")


def _replication(args: argparse.Namespace, part: Any) -> None:
    leader_end = _leader_end(part)
    rows = []
    for role, replicas in (("Voter", part.current_voters), ("Observer", part.observers)):
        for r in replicas:
            status = "Leader" if r.replica_id == part.leader_id else (
                "Follower" if role == "Voter" else "Observer")
            rows.append([r.replica_id, _directory(r), r.log_end_offset,
                         max(leader_end - r.log_end_offset, 0), r.last_fetch_timestamp,
                         r.last_caught_up_timestamp, status])
    order = {"Leader": 0, "Follower": 1, "Observer": 2}
    rows.sort(key=lambda row: (order[row[6]], row[0]))
    output.print_table(args, rows, ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                    "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"])


def _error(message: str) -> int:
    print(f"odradek metadata-quorum: {message}", file=sys.stderr)
    return 1
