"""`odradek transactions`: find and abort transactions, like kafka-transactions.sh.

    odradek transactions list [--state Ongoing ...]
    odradek transactions describe --transactional-id ID
    odradek transactions abort --topic T --partition P --start-offset O
    odradek transactions abort --topic T --partition P --producer-id N \
        --producer-epoch E --coordinator-epoch C

`list` asks every broker (ListTransactions); `describe` asks the id's
coordinator (FindCoordinator key type 1, DescribeTransactions); `abort`
finds the producer whose open transaction starts at the offset
(DescribeProducers on the partition leader) and writes an ABORT marker there
(WriteTxnMarkers), which moves the partition's last stable offset past a
hanging transaction. Requests go over a plain socket with kio's classes;
`--command-config FILE` (Kafka client properties) adds TLS and SASL to it.
Exit codes: 0 ok, 1 the broker answered with an error or could not be reached
(or refused the login), 2 usage or a bad --command-config.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from typing import Any

from odradek.protocol import api

from . import output
from .connection import Connection, add_command, reporting_broker_errors

VERSIONS: dict[int, int] = {  # the version each request is sent in (all within odradek's ranges)
    api.ApiKey.METADATA: 12,
    api.ApiKey.FIND_COORDINATOR: 4,
    api.ApiKey.LIST_TRANSACTIONS: 1,
    api.ApiKey.DESCRIBE_TRANSACTIONS: 0,
    api.ApiKey.DESCRIBE_PRODUCERS: 0,
    api.ApiKey.WRITE_TXN_MARKERS: 1,
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser, sub = add_command(subparsers, "transactions",
                              "list, describe and abort transactions", __doc__)
    p = sub.add_parser("list", help="transactional ids and their states")
    p.add_argument("--state", action="append", default=[],
                   help="only these states (Empty, Ongoing, PrepareCommit, ...)")
    p.add_argument("--producer-id", type=int, action="append", default=[])
    p.set_defaults(handler=reporting_broker_errors("transactions", _list))
    p = sub.add_parser("describe", help="one transactional id's transaction")
    p.add_argument("--transactional-id", required=True)
    p.set_defaults(handler=reporting_broker_errors("transactions", _describe))
    p = sub.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, required=True)
    p.add_argument("--start-offset", type=int)
    p.add_argument("--producer-id", type=int)
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)
    p.set_defaults(handler=reporting_broker_errors("transactions", _abort))
    return parser


def _connect(args: argparse.Namespace, address: str) -> Connection:
    return Connection(address, args.timeout, VERSIONS, b"odradek-transactions",
                      args.command_config)


def _error(message: str) -> int:
    print(f"odradek transactions: {message}", file=sys.stderr)
    return 1


def _brokers(conn: Connection) -> list[tuple[int, str]]:
    md = conn.call(api.ApiKey.METADATA, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    return [(b.node_id, f"{b.host}:{b.port}") for b in md.brokers]


def _list(args: argparse.Namespace) -> int:
    boot = _connect(args, args.bootstrap_server)
    rows = []
    try:
        for node_id, address in _brokers(boot):
            conn = _connect(args, address)
            try:
                resp = conn.call(api.ApiKey.LIST_TRANSACTIONS, {
                    "state_filters": args.state, "producer_id_filters": args.producer_id,
                    "duration_filter": -1})
            finally:
                conn.close()
            if resp.error_code.value:
                return _error(f"broker {node_id}: {resp.error_code.name}")
            rows += [[t.transactional_id, node_id, t.producer_id, t.transaction_state]
                     for t in resp.transaction_states]
    finally:
        boot.close()
    output.print_table(args, sorted(rows), ["TransactionalId", "Coordinator", "ProducerId",
                                            "TransactionState"])
    return 0


def _describe(args: argparse.Namespace) -> int:
    boot = _connect(args, args.bootstrap_server)
    try:
        found = boot.call(api.ApiKey.FIND_COORDINATOR, {
            "key_type": 1, "coordinator_keys": [args.transactional_id]}).coordinators[0]
    finally:
        boot.close()
    if found.error_code.value:
        return _error(f"FindCoordinator: {found.error_code.name}")
    conn = _connect(args, f"{found.host}:{found.port}")
    try:
        frame, pos = conn.call_raw(api.ApiKey.DESCRIBE_TRANSACTIONS,
                                   {"transactional_ids": [args.transactional_id]})
    finally:
        conn.close()
    t = _decode_describe_transactions(frame, pos)[0]
    if t["error_code"]:
        return _error(f"{args.transactional_id}: {ERROR_NAMES.get(t['error_code'], t['error_code'])}")
    start_ms = t["start_ms"]
    now_ms = int(time.time() * 1000)
    partitions = ",".join(f"{topic}-{p}" for topic, ps in t["topics"] for p in ps)
    output.print_table(args, [[found.node_id, t["transactional_id"], t["producer_id"], t["producer_epoch"],
                   t["state"], t["timeout_ms"], start_ms,
                   now_ms - start_ms if start_ms > 0 else -1,
                   partitions or (None if output.is_json(args) else "None")]],
                 ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                  "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                  "TransactionDurationMs", "TopicPartitions"])
    return 0


ERROR_NAMES = {15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
               14: "COORDINATOR_LOAD_IN_PROGRESS", 105: "TRANSACTIONAL_ID_NOT_FOUND"}


class _Flexible:
    """A reader for a flexible (KIP-482) response body."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        value = self.buf[self.pos : self.pos + max(n, 0)].decode()
        self.pos += max(n, 0)
        return value

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _decode_describe_transactions(frame: bytes, pos: int) -> list[dict[str, Any]]:
    """DescribeTransactions v0 by hand: kio refuses the -1 start time Kafka sends
    for a transactional id that never started a transaction."""
    r = _Flexible(frame, pos)
    r.take(">i")  # throttle
    out = []
    for _ in range(r.uvarint() - 1):
        t: dict[str, Any] = {"error_code": r.take(">h"), "transactional_id": r.string(),
                             "state": r.string(), "timeout_ms": r.take(">i"),
                             "start_ms": r.take(">q"), "producer_id": r.take(">q"),
                             "producer_epoch": r.take(">h")}
        topics = []
        for _ in range(r.uvarint() - 1):
            topic = r.string()
            topics.append((topic, [r.take(">i") for _ in range(r.uvarint() - 1)]))
            r.tags()
        t["topics"] = topics
        r.tags()
        out.append(t)
    return out


def _leader(conn: Connection, topic: str, partition: int) -> str | None:
    md = conn.call(api.ApiKey.METADATA, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    for t in md.topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return brokers.get(p.leader_id)
    return None


def _abort(args: argparse.Namespace) -> int:
    boot = _connect(args, args.bootstrap_server)
    try:
        leader = _leader(boot, args.topic, args.partition)
    finally:
        boot.close()
    if leader is None:
        return _error(f"{args.topic}-{args.partition}: no such partition or no leader")
    conn = _connect(args, leader)
    try:
        pid, epoch, coord_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
        if args.start_offset is not None:
            resp = conn.call(api.ApiKey.DESCRIBE_PRODUCERS, {
                "topics": [{"name": args.topic, "partition_indexes": [args.partition]}]})
            part = resp.topics[0].partitions[0]
            if part.error_code.value:
                return _error(f"DescribeProducers: {part.error_code.name}")
            match = [p for p in part.active_producers
                     if p.current_txn_start_offset == args.start_offset]
            if not match:
                return _error(f"no open transaction starts at offset {args.start_offset} "
                              f"of {args.topic}-{args.partition}")
            pid, epoch = match[0].producer_id, match[0].producer_epoch
            coord_epoch = max(match[0].coordinator_epoch, 0)
        elif None in (pid, epoch, coord_epoch):
            print("odradek transactions abort: give --start-offset, or --producer-id, "
                  "--producer-epoch and --coordinator-epoch", file=sys.stderr)
            return 2
        resp = conn.call(api.ApiKey.WRITE_TXN_MARKERS, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
            "topics": [{"name": args.topic, "partition_indexes": [args.partition]}],
            "coordinator_epoch": coord_epoch}]})
    finally:
        conn.close()
    code = resp.markers[0].topics[0].partitions[0].error_code
    if code.value:
        return _error(f"WriteTxnMarkers: {code.name}")
    print(f"aborted the transaction of producer {pid} (epoch {epoch}) on "
          f"{args.topic}-{args.partition}")
    return 0
