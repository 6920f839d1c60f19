"""Transactions and producers, over the CLI's blocking `Connection` (confluent-kafka
has no ListTransactions, DescribeTransactions or DescribeProducers): every broker's
transactional ids (ListTransactions), the open ones described by their coordinator
(FindCoordinator, DescribeTransactions; one open longer than its timeout is shown as
hanging), and a partition's active producers (DescribeProducers on its leader)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from odradek.cli import transactions as cli_txn
from odradek.protocol import api

from .client import Clients

MAX_DESCRIBED = 50  # open transactions described per page
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@dataclass
class Transaction:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str
    timeout_ms: int | None = None
    duration_ms: int | None = None
    partitions: str = ""

    @property
    def hanging(self) -> bool:
        return (self.state in OPEN_STATES and self.duration_ms is not None
                and self.timeout_ms is not None and self.duration_ms > self.timeout_ms)


@dataclass
class Producer:
    partition: int
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int


def transactions(clients: Clients) -> list[Transaction]:
    found: list[Transaction] = []
    addresses = {}
    for node_id, address, resp in clients.ask_each_broker(
            cli_txn.VERSIONS, api.ApiKey.LIST_TRANSACTIONS,
            {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
            "ListTransactions v1"):
        addresses[node_id] = address
        found += [Transaction(t.transactional_id, node_id, t.producer_id, t.transaction_state)
                  for t in resp.transaction_states]
    found.sort(key=lambda t: (t.state not in OPEN_STATES, t.transactional_id))
    for t in [t for t in found if t.state in OPEN_STATES][:MAX_DESCRIBED]:
        _describe(clients, t, addresses[t.coordinator])
    return found


def _describe(clients: Clients, t: Transaction, address: str) -> None:
    conn = clients.connect(address, cli_txn.VERSIONS)
    try:
        frame, pos = conn.call_raw(api.ApiKey.DESCRIBE_TRANSACTIONS,
                                   {"transactional_ids": [t.transactional_id]})
    finally:
        conn.close()
    d = cli_txn._decode_describe_transactions(frame, pos)[0]
    if d["error_code"]:
        return
    t.timeout_ms = d["timeout_ms"]
    if d["start_ms"] > 0:
        t.duration_ms = int(time.time() * 1000) - d["start_ms"]
    t.partitions = ", ".join(f"{topic}-{p}" for topic, ps in d["topics"] for p in ps)


def producers(clients: Clients, topic: str, leaders: dict[int, int]) -> list[Producer]:
    """The active producers of each partition of `topic` (`leaders`: partition -> the
    id of its leader)."""
    addresses = dict(clients.brokers(cli_txn.VERSIONS))
    by_leader: dict[int, list[int]] = {}
    for partition, leader in leaders.items():
        if leader in addresses:
            by_leader.setdefault(leader, []).append(partition)
    out: list[Producer] = []
    for leader, parts in by_leader.items():
        conn = clients.connect(addresses[leader], cli_txn.VERSIONS)
        try:
            resp = conn.call(api.ApiKey.DESCRIBE_PRODUCERS, {
                "topics": [{"name": topic, "partition_indexes": sorted(parts)}]})
        finally:
            conn.close()
        for t in resp.topics:
            for p in t.partitions:
                out += [Producer(p.partition_index, a.producer_id, a.producer_epoch,
                                 a.last_sequence, a.last_timestamp, a.current_txn_start_offset)
                        for a in p.active_producers]
    return sorted(out, key=lambda p: (p.partition, p.producer_id))
