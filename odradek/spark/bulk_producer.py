"""An idempotent and transactional Kafka producer of whole record batches.

Theory of operation
-------------------
The bulk sink (bulk_writer.py) encodes rows into v2 record batches itself
(batch_encode.py) and hands them here; this client puts the producer id,
epoch and sequence numbers on them and sends them to the partition leaders,
one blocking socket per broker (fetch_client.Connection: TLS and SASL as the
read tasks have them), one request at a time per broker.

- Idempotence (acks=all): InitProducerId gives a producer id and epoch; each
  partition's batches carry consecutive base sequences from 0, assigned once
  when the batch is built. A retry sends the same bytes (same sequence), so the
  broker appends it once: DUPLICATE_SEQUENCE_NUMBER is success. Each partition
  has at most one batch in flight, so a retry never overtakes a later batch.
  Retriable errors (leader moved, timeouts, not enough replicas, a broken
  connection) refresh the metadata and resend until `delivery_timeout_s`;
  anything else (OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch, authorization,
  MESSAGE_TOO_LARGE) fails the send.
- Transactions (`transactional_id`): InitProducerId at the transaction
  coordinator (FindCoordinator key type 1) bumps the epoch, which fences every
  older producer of the id and aborts (or completes, if it was prepared) the
  transaction it left open -- the coordinator answers CONCURRENT_TRANSACTIONS
  until that is done, and we ask again. Before the first batch to a partition
  in a transaction, AddPartitionsToTxn (v3, the client form); `send_offsets`
  is AddOffsetsToTxn then TxnOffsetCommit at the group coordinator; `commit`
  and `abort` are EndTxn. PRODUCER_FENCED / INVALID_PRODUCER_EPOCH raise
  `ProducerFenced`.
- `committed_offset`: OffsetFetch v7 with require_stable, so an offset still
  inside an open transaction is waited for (UNSTABLE_OFFSET_COMMIT), not read.
- acks=1: no producer id (no idempotence), as the Java client without
  idempotence; acks=0 is left to the librdkafka path (no answer to wait for).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from odradek.protocol import api
from odradek.security.client_properties import client_security
from odradek.spark.batch_encode import record_batch
from odradek.spark.fetch_client import RETRIABLE, Connection, _address, _error

METADATA_VERSION = 9
PRODUCE_VERSION = 9
FIND_COORDINATOR_VERSION = 4
INIT_PRODUCER_ID_VERSION = 4
ADD_PARTITIONS_VERSION = 3
ADD_OFFSETS_VERSION = 3
TXN_OFFSET_COMMIT_VERSION = 3
END_TXN_VERSION = 3
OFFSET_FETCH_VERSION = 7

REQUEST_TIMEOUT_S = 30.0
DELIVERY_TIMEOUT_S = 120.0
METADATA_WAIT_S = 60.0  # as the Java producer's max.block.ms
# A response may take the request's own timeout to come: the socket waits this longer.
RESPONSE_SLACK_S = 5.0
RETRY_BACKOFF_S = 0.05
MAX_RETRY_BACKOFF_S = 1.0
SEQUENCE_MAX = 0x7FFFFFFF

DUPLICATE_SEQUENCE_NUMBER = 46
COORDINATOR_RETRIABLE = frozenset({
    14,  # COORDINATOR_LOAD_IN_PROGRESS
    15,  # COORDINATOR_NOT_AVAILABLE
    16,  # NOT_COORDINATOR
    51,  # CONCURRENT_TRANSACTIONS
    88,  # UNSTABLE_OFFSET_COMMIT
})
# The Fetch client's retriable errors (leadership, storage), and the ones of a write.
PRODUCE_RETRIABLE = RETRIABLE | {
    7,   # REQUEST_TIMED_OUT
    19,  # NOT_ENOUGH_REPLICAS
    20,  # NOT_ENOUGH_REPLICAS_AFTER_APPEND
}
FENCED = frozenset({47, 90})  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED


class ProducerError(RuntimeError):
    """A send or a transaction step failed for good."""


class ProducerFenced(ProducerError):
    """A newer producer with the same transactional.id took over (epoch bumped)."""


class _Retry(Exception):
    pass


TopicPartition = tuple[str, int]


class BulkProducer:
    def __init__(self, bootstrap: str, *, security: dict[str, str] | None = None,
                 transactional_id: str | None = None, acks: str = "all",
                 compression: int = 0, transaction_timeout_ms: int = 60_000,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 delivery_timeout_s: float = DELIVERY_TIMEOUT_S) -> None:
        if acks not in ("all", "1"):
            raise ValueError(f"the bulk producer writes with acks=all or 1, not {acks}")
        if transactional_id is not None and acks != "all":
            raise ValueError("a transactional producer needs acks=all")
        self.bootstrap = [_address(a) for a in bootstrap.split(",") if a.strip()]
        self.security = client_security(security) if security else None
        self.transactional_id = transactional_id
        self.acks = -1 if acks == "all" else 1
        self.compression = compression
        self.transaction_timeout_ms = transaction_timeout_ms
        self.timeout_s = request_timeout_s
        self.delivery_timeout_s = delivery_timeout_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.conns: dict[int, Connection] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self.partition_counts: dict[str, int] = {}
        self.producer_id = -1
        self.producer_epoch = -1
        self.sequences: dict[TopicPartition, int] = {}
        self.txn_coordinator: int | None = None
        self.in_transaction = False
        self.txn_partitions: set[TopicPartition] = set()
        self.requests = 0  # Produce requests sent (for the tests and the bench)
        # Held by send() and by num_partitions()'s metadata look-up: the bulk writer
        # encodes in one thread while another sends (bulk_writer._Sender).
        self.lock = threading.Lock()

    # -- connections and metadata ---------------------------------------------

    def _conn(self, node: int) -> Connection:
        conn = self.conns.get(node)
        if conn is None:
            if node not in self.brokers:
                raise _Retry(f"broker {node} unknown")
            try:
                conn = Connection(*self.brokers[node], self.timeout_s, self.security)
            except OSError as e:
                raise _Retry(f"broker {node} at {self.brokers[node]}: {e}") from e
            self.conns[node] = conn
        return conn

    def _call(self, node: int, key: int, version: int, data: dict[str, Any]) -> Any:
        conn = self._conn(node)
        try:
            return conn.call(key, version, data, self.timeout_s + RESPONSE_SLACK_S)
        except OSError as e:
            conn.close()
            self.conns.pop(node, None)
            raise _Retry(f"broker {node}: {e}") from e

    def _any_call(self, key: int, version: int, data: dict[str, Any]) -> Any:
        """A request any broker can answer (Metadata, FindCoordinator, idempotent
        InitProducerId): the known brokers first, then the bootstrap servers."""
        failures = []
        for node in list(self.conns) + [n for n in self.brokers if n not in self.conns]:
            try:
                return self._call(node, key, version, data)
            except _Retry as e:
                failures.append(str(e))
        for host, port in self.bootstrap:
            try:
                conn = Connection(host, port, self.timeout_s, self.security)
            except OSError as e:
                failures.append(f"{host}:{port}: {e}")
                continue
            try:
                return conn.call(key, version, data, self.timeout_s)
            except OSError as e:
                failures.append(f"{host}:{port}: {e}")
            finally:
                conn.close()
        raise _Retry("no broker answered: " + "; ".join(failures))

    def refresh_metadata(self, topics: list[str]) -> None:
        md = self._any_call(api.ApiKey.METADATA, METADATA_VERSION, {
            "topics": [{"name": t} for t in topics], "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        })
        self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
        for t in md.topics:
            err = _error(t.error_code)
            if err in (29,):  # TOPIC_AUTHORIZATION_FAILED
                raise ProducerError(f"topic {t.name}: not authorized to write (error {err})")
            if err:
                continue
            self.partition_counts[t.name] = len(t.partitions)
            for p in t.partitions:
                key = (t.name, int(p.partition_index))
                if _error(p.error_code) == 0 and int(p.leader_id) >= 0:
                    self.leaders[key] = int(p.leader_id)
                else:
                    self.leaders.pop(key, None)

    def num_partitions(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is not None:
            return count
        with self.lock:
            return self._num_partitions(topic)

    def _num_partitions(self, topic: str) -> int:
        deadline = time.monotonic() + METADATA_WAIT_S
        backoff = RETRY_BACKOFF_S
        while topic not in self.partition_counts:
            try:
                self.refresh_metadata([topic])
            except _Retry:
                pass
            if topic in self.partition_counts:
                break
            if time.monotonic() + backoff > deadline:
                raise ProducerError(f"topic {topic}: no metadata after {METADATA_WAIT_S:.0f} s "
                                    "(unknown topic?)")
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
        return self.partition_counts[topic]

    # -- producer id ----------------------------------------------------------

    def init(self) -> None:
        """InitProducerId: a producer id and epoch (fencing older producers of the
        transactional.id and settling their open transaction); nothing for acks=1."""
        if self.acks != -1:
            return
        data = {"transactional_id": self.transactional_id,
                "transaction_timeout": self.transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}

        def call() -> Any:
            if self.transactional_id is None:
                resp = self._any_call(api.ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, data)
            else:
                resp = self._txn_call(api.ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, data)
            self._check(_error(resp.error_code), "InitProducerId")
            return resp

        resp = self._retrying(call, "InitProducerId")
        self.producer_id = int(resp.producer_id)
        self.producer_epoch = int(resp.producer_epoch)
        self.sequences.clear()

    # -- coordinators ---------------------------------------------------------

    def _find_coordinator(self, key_type: int, key: str) -> int:
        resp = self._any_call(api.ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                              {"key_type": key_type, "coordinator_keys": [key]})
        [c] = resp.coordinators
        err = _error(c.error_code)
        if err in COORDINATOR_RETRIABLE:
            raise _Retry(f"FindCoordinator error {err}")
        if err:
            raise ProducerError(f"FindCoordinator({key}): error {err} {c.error_message or ''}")
        node = int(c.node_id)
        self.brokers.setdefault(node, (c.host, int(c.port)))
        return node

    def _txn_call(self, key: int, version: int, data: dict[str, Any]) -> Any:
        assert self.transactional_id is not None
        if self.txn_coordinator is None:
            self.txn_coordinator = self._find_coordinator(1, self.transactional_id)
        try:
            return self._call(self.txn_coordinator, key, version, data)
        except _Retry:
            self.txn_coordinator = None
            raise

    def _check(self, err: int, what: str) -> None:
        if err in (15, 16):
            self.txn_coordinator = None
        if err in COORDINATOR_RETRIABLE:
            raise _Retry(f"{what} error {err}")
        if err in FENCED:
            raise ProducerFenced(f"{what}: producer fenced (error {err}): a newer producer "
                                 f"with transactional.id {self.transactional_id} took over")
        if err:
            raise ProducerError(f"{what}: error {err}")

    def _retrying(self, call: Any, what: str) -> Any:
        deadline = time.monotonic() + self.delivery_timeout_s
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                return call()
            except _Retry as e:
                if time.monotonic() + backoff > deadline:
                    raise ProducerError(f"{what}: gave up after retries: {e}") from e
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)

    # -- transactions ---------------------------------------------------------

    def begin_transaction(self) -> None:
        assert self.transactional_id is not None and not self.in_transaction
        self.in_transaction = True
        self.txn_partitions = set()

    def _add_partitions(self, tps: list[TopicPartition]) -> None:
        new = sorted(set(tps) - self.txn_partitions)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for t, p in new:
            topics.setdefault(t, []).append(p)

        def call() -> None:
            resp = self._txn_call(api.ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_VERSION, {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            })
            for t in resp.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    self._check(_error(p.partition_error_code), f"AddPartitionsToTxn {t.name}")

        self._retrying(call, "AddPartitionsToTxn")
        self.txn_partitions.update(new)

    def send_offsets(self, group: str, topic: str, partition: int, offset: int) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit: the offset commits with the transaction."""
        assert self.in_transaction

        def add() -> None:
            resp = self._txn_call(api.ApiKey.ADD_OFFSETS_TO_TXN, ADD_OFFSETS_VERSION, {
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "group_id": group})
            self._check(_error(resp.error_code), "AddOffsetsToTxn")

        self._retrying(add, "AddOffsetsToTxn")

        def commit() -> None:
            node = self._find_coordinator(0, group)
            resp = self._call(node, api.ApiKey.TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_VERSION, {
                "transactional_id": self.transactional_id, "group_id": group,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{
                    "partition_index": partition, "committed_offset": offset,
                    "committed_leader_epoch": -1, "committed_metadata": None}]}]})
            for t in resp.topics:
                for p in t.partitions:
                    self._check(_error(p.error_code), "TxnOffsetCommit")

        self._retrying(commit, "TxnOffsetCommit")

    def _end(self, committed: bool) -> None:
        assert self.in_transaction

        def call() -> None:
            resp = self._txn_call(api.ApiKey.END_TXN, END_TXN_VERSION, {
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "committed": committed})
            self._check(_error(resp.error_code), "EndTxn")

        self._retrying(call, "EndTxn")
        self.in_transaction = False

    def commit_transaction(self) -> None:
        self._end(True)

    def abort_transaction(self) -> None:
        self._end(False)

    def committed_offset(self, group: str, topic: str, partition: int) -> int:
        """The group's committed offset of topic-partition (-1: none), stable only."""
        def call() -> int:
            node = self._find_coordinator(0, group)
            resp = self._call(node, api.ApiKey.OFFSET_FETCH, OFFSET_FETCH_VERSION, {
                "group_id": group, "require_stable": True,
                "topics": [{"name": topic, "partition_indexes": [partition]}]})
            self._check(_error(resp.error_code), "OffsetFetch")
            for t in resp.topics:
                for p in t.partitions:
                    self._check(_error(p.error_code), "OffsetFetch")
                    if t.name == topic and p.partition_index == partition:
                        return int(p.committed_offset)
            return -1

        result: int = self._retrying(call, "OffsetFetch")
        return result

    # -- produce --------------------------------------------------------------

    def send(self, batches: list[tuple[str, int, bytes, int, int]]) -> int:
        """Write (topic, partition, records blob, record count, timestamp ms)
        batches; each partition's batches in the order given. Returns when every
        batch is acknowledged; raises ProducerError otherwise. Returns the records."""
        with self.lock:
            return self._send(batches)

    def _send(self, batches: list[tuple[str, int, bytes, int, int]]) -> int:
        queues: dict[TopicPartition, deque[bytes]] = {}
        records = 0
        for topic, partition, blob, count, ts in batches:
            tp = (topic, partition)
            seq = -1
            if self.producer_id >= 0:
                seq = self.sequences.get(tp, 0)
                self.sequences[tp] = (seq + count) & SEQUENCE_MAX
            queues.setdefault(tp, deque()).append(record_batch(
                blob, count, timestamp_ms=ts, compression=self.compression,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=seq, transactional=self.in_transaction))
            records += count
        if self.in_transaction:
            self._add_partitions(list(queues))
        deadline = time.monotonic() + self.delivery_timeout_s
        backoff = RETRY_BACKOFF_S
        while queues:
            missing = sorted({t for t, p in queues if (t, p) not in self.leaders})
            if missing:
                try:
                    self.refresh_metadata(missing)
                except _Retry:
                    pass
            by_node: dict[int, dict[TopicPartition, bytes]] = {}
            for tp, q in queues.items():
                node = self.leaders.get(tp)
                if node is not None:
                    by_node.setdefault(node, {})[tp] = q[0]
            progress = False
            last_error = f"no leader for {missing}" if missing else ""
            for node, heads in by_node.items():
                try:
                    done, retry_error = self._produce(node, heads)
                except _Retry as e:
                    for tp in heads:
                        self.leaders.pop(tp, None)
                    last_error = str(e)
                    continue
                for tp in done:
                    queues[tp].popleft()
                    if not queues[tp]:
                        del queues[tp]
                    progress = True
                if retry_error:
                    last_error = retry_error
            if not queues:
                break
            if progress:
                backoff = RETRY_BACKOFF_S
                continue
            if time.monotonic() + backoff > deadline:
                raise ProducerError(f"produce gave up after {self.delivery_timeout_s:.0f} s: "
                                    f"{last_error}")
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
        return records

    def _produce(self, node: int, heads: dict[TopicPartition, bytes]
                 ) -> tuple[list[TopicPartition], str]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), batch in heads.items():
            topics.setdefault(t, []).append({"index": p, "records": batch})
        self.requests += 1
        resp = self._call(node, api.ApiKey.PRODUCE, PRODUCE_VERSION, {
            "transactional_id": self.transactional_id, "acks": self.acks,
            "timeout": int(self.timeout_s * 1000),
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]})
        done: list[TopicPartition] = []
        retry_error = ""
        for t in resp.responses:
            for p in t.partition_responses:
                tp = (t.name, int(p.index))
                err = _error(p.error_code)
                if err in (0, DUPLICATE_SEQUENCE_NUMBER):
                    done.append(tp)
                elif err in PRODUCE_RETRIABLE:
                    self.leaders.pop(tp, None)
                    retry_error = f"{t.name}-{tp[1]}: Produce error {err}"
                elif err in FENCED:
                    raise ProducerFenced(f"{t.name}-{tp[1]}: producer fenced (error {err})")
                else:
                    raise ProducerError(f"{t.name}-{tp[1]}: Produce error {err} "
                                        f"{p.error_message or ''}".rstrip())
        return done, retry_error

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
