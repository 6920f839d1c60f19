"""`odradek partitions reassign`: move partition replicas, like kafka-reassign-partitions.sh.

    odradek partitions reassign --bootstrap-server H:P --reassignment-json-file F --execute \
        [--throttle BYTES_PER_S]
    odradek partitions reassign --bootstrap-server H:P --reassignment-json-file F --verify
    odradek partitions reassign --bootstrap-server H:P --reassignment-json-file F --cancel

F is Kafka's reassignment JSON:
{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}
An entry may name each replica's log dir, as Kafka's tool takes it:
"log_dirs":["/data/a","any"] (one per replica, "any" for the broker's choice);
--execute then asks each named broker to move its replica there
(AlterReplicaLogDirs, retried while a new replica is still being created, up to
--timeout), and --verify reports those moves too (DescribeLogDirs).

--execute prints the current assignment (keep it to roll back), sets the
replication throttle when --throttle is given (as Kafka's tool: the topics'
`leader.replication.throttled.replicas` name each moving partition's current
replicas, `follower.replication.throttled.replicas` its new ones, and every
broker involved gets `leader.`/`follower.replication.throttled.rate`), then
sends AlterPartitionReassignments. --verify says for each partition whether
it is done and, once all are, removes those throttle configs. --cancel
reverts the reassignments in progress and removes the throttles (unless
--preserve-throttles). Requests go over a plain socket with kio's classes;
brokers relay them to the controller.
Exit codes: 0 ok, 1 the broker refused something, 2 usage or a bad file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from typing import Any

from odradek.protocol import api

from . import client_config, options, progress
from .connection import Connection

VERSIONS: dict[int, int] = {
    api.ApiKey.METADATA: 12,
    api.ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    api.ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    api.ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    api.ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
    api.ApiKey.DESCRIBE_LOG_DIRS: 4,
}
ANY_LOG_DIR = "any"
REPLICA_NOT_AVAILABLE = 9
LOG_DIR_MOVE_RETRY_S = 0.5
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE = 0, 1
NO_REASSIGNMENT_IN_PROGRESS = 85
LEADER_RATE, FOLLOWER_RATE = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"

TopicPartition = tuple[str, int]


class UsageError(Exception):
    pass


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "partitions",
        help="move partition replicas (reassign)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("reassign", help="execute, verify or cancel a reassignment")
    options.add_bootstrap_argument(p)
    client_config.add_argument(p)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    p.add_argument("--reassignment-json-file", required=True)
    p.add_argument(
        "--throttle",
        type=int,
        default=-1,
        help="with --execute: replication throttle in bytes/s (-1: none)",
    )
    p.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify/--cancel: leave the throttle configs in place",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--execute", action="store_true")
    mode.add_argument("--verify", action="store_true")
    p.add_argument(
        "--wait", action="store_true",
        help="with --verify: check again every second until every listed reassignment "
             "has completed, showing how many have (then verify as usual)",
    )
    mode.add_argument("--cancel", action="store_true")
    p.set_defaults(handler=_reassign)
    return parser


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's reassignment JSON -> {(topic, partition): target replicas}."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"the reassignment file is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise UsageError('the reassignment file must be {"version":1,"partitions":[...]}')
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise UsageError("the reassignment file lists no partitions")
    out: dict[TopicPartition, list[int]] = {}
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("topic"), str)
            and isinstance(entry.get("partition"), int)
            and isinstance(entry.get("replicas"), list)
            and all(isinstance(r, int) for r in entry["replicas"])
        ):
            raise UsageError(
                f"bad partition entry {json.dumps(entry)}: needs topic, partition, replicas"
            )
        key = (entry["topic"], entry["partition"])
        if key in out:
            raise UsageError(f"partition {key[0]}-{key[1]} appears more than once")
        out[key] = list(entry["replicas"])
    return out


def parse_log_dirs(text: str) -> dict[tuple[str, int, int], str]:
    """The replicas' log dirs of a reassignment JSON (already checked by
    parse_reassignment_json): {(topic, partition, broker): path}, "any" left out."""
    out: dict[tuple[str, int, int], str] = {}
    for entry in json.loads(text)["partitions"]:
        dirs = entry.get("log_dirs")
        if dirs is None:
            continue
        if not (isinstance(dirs, list) and len(dirs) == len(entry["replicas"])
                and all(isinstance(d, str) for d in dirs)):
            raise UsageError(f"bad log_dirs in {json.dumps(entry)}: one path or \"any\" per "
                             "replica")
        for broker, path in zip(entry["replicas"], dirs):
            if path != ANY_LOG_DIR:
                out[(entry["topic"], entry["partition"], broker)] = path
    return out


def _json(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def _names(keys: Iterable[TopicPartition]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


def _current(
    conn: Connection, topics: set[str]
) -> tuple[dict[TopicPartition, list[int]], list[int]]:
    """The current replicas of every partition of `topics`, and the broker ids."""
    md = conn.call(
        api.ApiKey.METADATA,
        {
            "topics": [{"name": t, "topic_id": None} for t in sorted(topics)],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    current = {
        (t.name, p.partition_index): [int(r) for r in p.replica_nodes]
        for t in md.topics
        for p in t.partitions
    }
    return current, sorted(int(b.node_id) for b in md.brokers)


def _alter_configs(
    conn: Connection,
    resources: list[tuple[int, str, dict[str, str | None]]],
) -> list[str]:
    """IncrementalAlterConfigs: SET a value, DELETE for None. The errors, as text."""
    resp = conn.call(
        api.ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "validate_only": False,
            "resources": [
                {
                    "resource_type": rtype,
                    "resource_name": name,
                    "configs": [
                        {
                            "name": k,
                            "config_operation": OP_DELETE if v is None else OP_SET,
                            "value": v,
                        }
                        for k, v in sorted(configs.items())
                    ],
                }
                for rtype, name, configs in resources
            ],
        },
    )
    return [
        f"{r.resource_name}: {r.error_message or r.error_code.name}"
        for r in resp.responses
        if r.error_code.value != 0
    ]


def _throttle_configs(
    targets: dict[TopicPartition, list[int]],
    current: dict[TopicPartition, list[int]],
    rate: int | None,
) -> list[tuple[int, str, dict[str, str | None]]]:
    """The topic and broker configs of Kafka's tool (rate None: remove them)."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, p), target in sorted(targets.items()):
        now = current.get((topic, p), [])
        if target == now:
            continue
        leader.setdefault(topic, []).extend(f"{p}:{b}" for b in now)
        follower.setdefault(topic, []).extend(f"{p}:{b}" for b in target if b not in now)
        brokers.update(now, target)
    value = None if rate is None else str(rate)
    out: list[tuple[int, str, dict[str, str | None]]] = []
    for topic in sorted({topic for topic, _ in targets}):
        if rate is None:
            out.append((RESOURCE_TOPIC, topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}))
        elif topic in leader:
            configs: dict[str, str | None] = {LEADER_REPLICAS: ",".join(leader[topic])}
            if follower[topic]:
                configs[FOLLOWER_REPLICAS] = ",".join(follower[topic])
            out.append((RESOURCE_TOPIC, topic, configs))
    for b in sorted(brokers):
        out.append((RESOURCE_BROKER, str(b), {LEADER_RATE: value, FOLLOWER_RATE: value}))
    return out


def _call(conn: Connection, key: int, topics: list[dict[str, Any]], timeout_s: float) -> Any:
    """AlterPartitionReassignments / ListPartitionReassignments; a top-level error raises."""
    resp = conn.call(key, {"timeout": int(timeout_s * 1000), "topics": topics})
    if resp.error_code.value != 0:
        raise OSError(resp.error_message or resp.error_code.name)
    return resp


def _send_reassignments(
    conn: Connection, targets: dict[TopicPartition, list[int] | None], timeout_s: float
) -> dict[TopicPartition, tuple[int, str | None]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
    topics = [{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    resp = _call(conn, api.ApiKey.ALTER_PARTITION_REASSIGNMENTS, topics, timeout_s)
    return {
        (t.name, p.partition_index): (p.error_code.value, p.error_message)
        for t in resp.responses
        for p in t.partitions
    }


def _ongoing(
    conn: Connection, keys: Iterable[TopicPartition], timeout_s: float
) -> set[TopicPartition]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(keys):
        by_topic.setdefault(topic, []).append(p)
    topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    resp = _call(conn, api.ApiKey.LIST_PARTITION_REASSIGNMENTS, topics, timeout_s)
    return {(t.name, p.partition_index) for t in resp.topics for p in t.partitions}


def _error(message: str, code: int = 1) -> int:
    print(f"odradek partitions: {message}", file=sys.stderr)
    return code


def _reassign(args: argparse.Namespace) -> int:
    try:
        with open(args.reassignment_json_file, encoding="utf-8") as f:
            text = f.read()
        targets = parse_reassignment_json(text)
        args.log_dirs = parse_log_dirs(text)
    except (OSError, UsageError) as e:
        return _error(str(e), 2)
    try:
        conn = Connection(args.bootstrap_server, args.timeout, VERSIONS, b"odradek-partitions",
                          args.command_config)
    except OSError as e:
        return _error(f"cannot connect to {args.bootstrap_server}: {e}")
    try:
        if args.execute:
            return _execute(conn, targets, args)
        if args.verify:
            return _verify(conn, targets, args)
        return _cancel(conn, targets, args)
    except OSError as e:
        return _error(str(e))
    finally:
        conn.close()


def _execute(
    conn: Connection, targets: dict[TopicPartition, list[int]], args: argparse.Namespace
) -> int:
    current, _ = _current(conn, {t for t, _ in targets})
    missing = [k for k in targets if k not in current]
    if missing:
        return _error(f"unknown topic partitions: {_names(missing)}")
    print("Current partition replica assignment\n")
    print(_json({k: current[k] for k in targets}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        errors = _alter_configs(conn, _throttle_configs(targets, current, args.throttle))
        if errors:
            return _error("cannot set the throttle: " + "; ".join(errors))
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
        print(f"  The inter-broker throttle limit was set to {args.throttle} B/s")
    results = _send_reassignments(conn, dict(targets), args.timeout)
    failed = {k: v for k, v in results.items() if v[0] != 0}
    if failed:
        print("Error reassigning partition(s):", file=sys.stderr)
        for (t, p), (code, message) in sorted(failed.items()):
            print(f"{t}-{p}: {message or code}", file=sys.stderr)
        return 1
    print(f"Successfully started partition reassignments for {_names(targets)}")
    if args.log_dirs:
        return _move_log_dirs(conn, args)
    return 0


def _brokers(conn: Connection) -> dict[int, str]:
    md = conn.call(api.ApiKey.METADATA, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    return {int(b.node_id): f"{b.host}:{b.port}" for b in md.brokers}


def _move_log_dirs(conn: Connection, args: argparse.Namespace) -> int:
    """AlterReplicaLogDirs to each broker named in log_dirs; a replica the
    reassignment has not created yet (REPLICA_NOT_AVAILABLE) is asked again."""
    addresses = _brokers(conn)
    pending: dict[tuple[str, int, int], str] = dict(args.log_dirs)
    failed: list[str] = []
    deadline = time.monotonic() + args.timeout
    while pending:
        for broker in sorted({b for _, _, b in pending}):
            moves = {k: v for k, v in pending.items() if k[2] == broker}
            if broker not in addresses:
                failed += [f"{t}-{p}-{b}: broker {b} is not in the cluster" for t, p, b in moves]
                for k in moves:
                    del pending[k]
                continue
            by_dir: dict[str, dict[str, list[int]]] = {}
            for (t, p, _), path in moves.items():
                by_dir.setdefault(path, {}).setdefault(t, []).append(p)
            other = Connection(addresses[broker], args.timeout, VERSIONS, b"odradek-partitions",
                               args.command_config)
            try:
                resp = other.call(api.ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
                    {"path": path, "topics": [{"name": t, "partitions": ps}
                                              for t, ps in sorted(topics.items())]}
                    for path, topics in sorted(by_dir.items())]})
            finally:
                other.close()
            for t in resp.results:
                for part in t.partitions:
                    key = (t.topic_name, int(part.partition_index), broker)
                    code = part.error_code.value
                    if code == REPLICA_NOT_AVAILABLE and time.monotonic() < deadline:
                        continue
                    pending.pop(key, None)
                    if code:
                        failed.append(f"{key[0]}-{key[1]}-{broker}: {part.error_code.name}")
                    else:
                        print(f"Successfully started log directory move for: "
                              f"{key[0]}-{key[1]}-{broker}")
        if pending:
            time.sleep(LOG_DIR_MOVE_RETRY_S)
    if failed:
        print("Error moving replica log dir(s):\n" + "\n".join(failed), file=sys.stderr)
        return 1
    return 0


def _verify(
    conn: Connection, targets: dict[TopicPartition, list[int]], args: argparse.Namespace
) -> int:
    ongoing = _ongoing(conn, targets, args.timeout)
    if args.wait and ongoing:
        bar = progress.Progress("reassign", len(targets), "partitions",
                                enabled=progress.wanted(quiet_output=True))
        while ongoing:
            bar.update(len(targets) - len(ongoing), force=True)
            time.sleep(1.0)
            ongoing = _ongoing(conn, targets, args.timeout)
        bar.close()
    current, _ = _current(conn, {t for t, _ in targets})
    print("Status of partition reassignment:")
    done = True
    for key, target in sorted(targets.items()):
        name = f"{key[0]}-{key[1]}"
        if key in ongoing:
            done = False
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get(key) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{current.get(key)} rather than {target}."
            )
    if args.log_dirs:
        _verify_log_dirs(conn, args)
    if done and not args.preserve_throttles:
        return _clear_throttles(conn, targets, current)
    return 0


def _verify_log_dirs(conn: Connection, args: argparse.Namespace) -> None:
    """Where each replica named in log_dirs is now (DescribeLogDirs of its broker)."""
    addresses = _brokers(conn)
    print("Status of replica log directory movement:")
    for (t, p, b), path in sorted(args.log_dirs.items()):
        found: dict[bool, str] = {}  # is_future -> dir
        if b in addresses:
            other = Connection(addresses[b], args.timeout, VERSIONS, b"odradek-partitions",
                               args.command_config)
            try:
                resp = other.call(api.ApiKey.DESCRIBE_LOG_DIRS,
                                  {"topics": [{"topic": t, "partitions": [p]}]})
            finally:
                other.close()
            found = {bool(part.is_future_key): d.log_dir for d in resp.results
                     for topic in d.topics if topic.name == t
                     for part in topic.partitions if part.partition_index == p}
        name = f"{t}-{p}-{b}"
        if found.get(False) == path and True not in found:
            print(f"Reassignment of replica {name} is completed.")
        elif found.get(True) == path:
            print(f"Reassignment of replica {name} is still in progress.")
        else:
            print(f"Replica {name} is in log dir {found.get(False)} rather than {path}.")


def _cancel(
    conn: Connection, targets: dict[TopicPartition, list[int]], args: argparse.Namespace
) -> int:
    results = _send_reassignments(conn, dict.fromkeys(targets), args.timeout)
    cancelled = [k for k, (code, _) in results.items() if code == 0]
    failed = {k: v for k, v in results.items() if v[0] not in (0, NO_REASSIGNMENT_IN_PROGRESS)}
    if cancelled:
        print(f"Successfully cancelled partition reassignments for: {_names(cancelled)}")
    if failed:
        for (t, p), (code, message) in sorted(failed.items()):
            print(f"{t}-{p}: {message or code}", file=sys.stderr)
        return 1
    if not args.preserve_throttles:
        current, _ = _current(conn, {t for t, _ in targets})
        return _clear_throttles(conn, targets, current)
    return 0


def _clear_throttles(
    conn: Connection,
    targets: dict[TopicPartition, list[int]],
    current: dict[TopicPartition, list[int]],
) -> int:
    _, brokers = _current(conn, set())
    resources = _throttle_configs(targets, current, None)
    # the brokers involved may be any of them now: clear the rates on every broker
    resources = [r for r in resources if r[0] == RESOURCE_TOPIC] + [
        (RESOURCE_BROKER, str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in brokers
    ]
    errors = _alter_configs(conn, resources)
    if errors:
        return _error("cannot remove the throttle: " + "; ".join(errors))
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    print(f"Clearing topic-level throttles on topics {','.join(sorted({t for t, _ in targets}))}")
    return 0
