"""A small blocking Kafka client for one partition: Metadata, ListOffsets, Fetch.

Theory of operation
-------------------
A broker read task (reader.py) reads one partition's offset range. Instead of
a librdkafka consumer, which hands Python one object per record, the task asks
the partition's leader itself and gets each Fetch response's records as raw
record batch bytes, which broker_read.py decodes in bulk into Arrow columns.

`PartitionClient` holds one socket, to the partition's leader, and speaks three
APIs, one request at a time, with kio's classes (protocol/api.py) and every
response walked by protocol/guard.py before it is decoded:

- Metadata v9, to a bootstrap server and then to any known broker: the
  partition's leader and leader epoch;
- ListOffsets v7 (earliest, latest with the isolation level);
- Fetch v12 with `isolation_level` (0 read_uncommitted, 1 read_committed),
  `current_leader_epoch` from Metadata (KIP-320), no fetch session.

What Kafka's consumer does on errors, it does too: NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
REPLICA_NOT_AVAILABLE, KAFKA_STORAGE_ERROR, OFFSET_NOT_AVAILABLE and a broken
connection drop the socket and look the leader up again after a backoff
(`RETRY_BACKOFF_S`, doubling to `MAX_RETRY_BACKOFF_S`) until the caller's
deadline; OFFSET_OUT_OF_RANGE is returned to the caller (broker_read.py
decides, with failOnDataLoss, as a consumer with no reset policy would).

Security: the `kafka.security.protocol`, `kafka.sasl.*` and `kafka.ssl.*`
options, as given, are mapped by security/client_properties.py (the mapping of
the CLI's --command-config and of the driver's librdkafka settings) to an
`ssl.SSLContext` and a SASL login: the socket is wrapped in TLS (the server
name is the broker's host) and, on a SASL listener, logs in with SaslHandshake
v1 and SaslAuthenticate v2 (PLAIN, SCRAM-SHA-256/512) before any request, as
Kafka's clients do. A read task is short, so a session lifetime (KIP-368) is
not renewed: a task outliving it fails and Spark retries it.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from odradek.protocol import api, entities
from odradek.protocol.guard import decode_message
from odradek.security.client_properties import ClientSecurity, client_security

CLIENT_ID = b"odradek-spark-fetch"
METADATA_VERSION = 9
LIST_OFFSETS_VERSION = 7
FETCH_VERSION = 12
# A response larger than this is refused (a bound on memory); above FETCH_MAX_BYTES.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
FETCH_MAX_BYTES = 64 * 1024 * 1024
PARTITION_MAX_BYTES = 16 * 1024 * 1024
FETCH_MAX_WAIT_MS = 500
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
MAX_RETRY_BACKOFF_S = 1.0

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

NONE = 0
OFFSET_OUT_OF_RANGE = 1
# Errors after which a Kafka consumer refreshes metadata and fetches again.
RETRIABLE = frozenset({
    3,   # UNKNOWN_TOPIC_OR_PARTITION
    5,   # LEADER_NOT_AVAILABLE
    6,   # NOT_LEADER_OR_FOLLOWER
    9,   # REPLICA_NOT_AVAILABLE
    56,  # KAFKA_STORAGE_ERROR
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
    78,  # OFFSET_NOT_AVAILABLE
})
ISOLATION = {"read_uncommitted": 0, "read_committed": 1}


class FetchClientError(RuntimeError):
    """A request failed for a reason retrying does not fix, or past the deadline."""


class _Retry(Exception):
    """Leadership moved or the connection broke: look the leader up again."""


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[tuple[int, int], ...]  # (producer id, first offset)
    records: bytes


def _error(value: Any) -> int:
    return int(getattr(value, "value", value))


class AuthenticationError(FetchClientError):
    """The broker refused the SASL login (or its answer did not verify)."""


class Connection:
    """One blocking socket to one broker; one request at a time; TLS and a SASL
    login first when ``security`` asks for them."""

    def __init__(self, host: str, port: int, timeout_s: float,
                 security: ClientSecurity | None = None) -> None:
        self.where = f"{host}:{port}"
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0
        try:
            if security is not None and security.ssl_context is not None:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            self.sock = sock
            if security is not None and security.sasl is not None:
                self._authenticate(security.sasl, timeout_s)
        except BaseException:
            sock.close()
            raise

    def _authenticate(self, sasl: Any, timeout_s: float) -> None:
        hs = self.call(api.ApiKey.SASL_HANDSHAKE, 1, {"mechanism": sasl.mechanism}, timeout_s)
        if _error(hs.error_code):
            raise AuthenticationError(
                f"{self.where} refused SASL mechanism {sasl.mechanism} "
                f"(error {_error(hs.error_code)}); it offers {', '.join(hs.mechanisms)}")
        exchange = sasl.exchange()
        token: bytes | None = next(exchange)
        while token is not None:
            resp = self.call(api.ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, timeout_s)
            if _error(resp.error_code):
                raise AuthenticationError(
                    f"SASL {sasl.mechanism} authentication to {self.where} as "
                    f"{sasl.username} failed: {resp.error_message}")
            try:
                token = exchange.send(bytes(resp.auth_bytes))
            except StopIteration:
                token = None
            except ValueError as e:  # the server's answer does not verify
                raise AuthenticationError(f"SASL {sasl.mechanism} with {self.where}: {e}"
                                          ) from None

    def call(self, key: int, version: int, data: dict[str, Any], timeout_s: float) -> Any:
        req_cls = api.request_class(key, version)
        body = io.BytesIO()
        entity_writer(req_cls)(body, entities.build(req_cls, data))
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        header = struct.pack(">hhih", key, version, self.correlation_id,
                             len(CLIENT_ID)) + CLIENT_ID
        if api.request_header_version(key, version) >= 2:
            header += b"\x00"
        payload = header + body.getvalue()
        self.sock.settimeout(timeout_s)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise OSError(f"{self.where}: bad response size {size}")
        frame = self._read(size)
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != self.correlation_id:
            raise OSError(f"{self.where}: correlation id {corr} answers {self.correlation_id}")
        pos = 4 + (1 if api.response_header_version(key, version) >= 1 else 0)
        return decode_message(api.response_class(key, version), frame, pos)

    def _read(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise OSError(f"{self.where}: connection closed by the broker")
            got += k
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


class PartitionClient:
    """Metadata, ListOffsets and Fetch for one topic-partition, at its leader."""

    def __init__(self, bootstrap: str, topic: str, partition: int, isolation_level: str,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 security: dict[str, str] | None = None) -> None:
        self.bootstrap = [_address(a) for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise FetchClientError(f"no bootstrap server in {bootstrap!r}")
        self.topic = topic
        self.partition = partition
        self.isolation = ISOLATION[isolation_level]
        self.timeout_s = request_timeout_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leader: Connection | None = None
        self.leader_epoch = -1
        self.partition_max_bytes = PARTITION_MAX_BYTES
        self.last_error = ""
        self.leader_lookups = 0  # Metadata answers (1 + the leader changes followed)
        # Files are read and checked once per task (the driver checked them already).
        self.security = client_security(security) if security else None

    def __repr__(self) -> str:
        return f"PartitionClient({self.topic}-{self.partition})"

    # -- leader --------------------------------------------------------------

    def _find_leader(self) -> Connection:
        if self.leader is not None:
            return self.leader
        candidates = list(dict.fromkeys([*self.brokers.values(), *self.bootstrap]))
        failures = []
        for host, port in candidates:
            try:
                conn = Connection(host, port, self.timeout_s, self.security)
            except OSError as e:
                failures.append(f"{host}:{port}: {e}")
                continue
            try:
                md = conn.call(api.ApiKey.METADATA, METADATA_VERSION, {
                    "topics": [{"name": self.topic}], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                }, self.timeout_s)
            except OSError as e:
                failures.append(f"{host}:{port}: {e}")
                conn.close()
                continue
            self.leader_lookups += 1
            self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in md.brokers}
            leader, epoch = self._leader_of(md)
            if leader is None or leader not in self.brokers:
                conn.close()
                raise _Retry(f"no leader for {self.topic}-{self.partition} ({self.last_error})")
            self.leader_epoch = epoch
            if self.brokers[leader] == (host, port):
                self.leader = conn
            else:
                conn.close()
                try:
                    self.leader = Connection(*self.brokers[leader], self.timeout_s,
                                             self.security)
                except OSError as e:
                    raise _Retry(f"leader {leader} at {self.brokers[leader]}: {e}") from e
            return self.leader
        raise _Retry("no broker answered Metadata: " + "; ".join(failures))

    def _leader_of(self, md: Any) -> tuple[int | None, int]:
        for t in md.topics:
            if t.name != self.topic:
                continue
            if _error(t.error_code):
                self.last_error = f"topic error {_error(t.error_code)}"
                return None, -1
            for p in t.partitions:
                if p.partition_index == self.partition:
                    if _error(p.error_code) or int(p.leader_id) < 0:
                        self.last_error = f"partition error {_error(p.error_code)}"
                        return None, -1
                    return int(p.leader_id), int(p.leader_epoch)
        self.last_error = "unknown topic or partition"
        return None, -1

    def _drop_leader(self) -> None:
        if self.leader is not None:
            self.leader.close()
        self.leader = None

    def _with_leader(self, call: Any, deadline: float) -> Any:
        """call(connection) at the leader, looking it up again after a
        retriable error, until ``deadline`` (time.monotonic())."""
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                return call(self._find_leader())
            except (_Retry, OSError) as e:
                self._drop_leader()
                self.last_error = str(e)
                if time.monotonic() + backoff > deadline:
                    raise FetchClientError(
                        f"{self.topic}-{self.partition}: gave up after retries: {e}") from e
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)

    # -- requests ------------------------------------------------------------

    def list_offset(self, timestamp: int, deadline: float) -> int:
        """The offset of EARLIEST_TIMESTAMP / LATEST_TIMESTAMP (latest honours
        the isolation level: under read_committed, the last stable offset)."""
        def call(conn: Connection) -> int:
            resp = conn.call(api.ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
                "replica_id": -1, "isolation_level": self.isolation,
                "topics": [{"name": self.topic, "partitions": [{
                    "partition_index": self.partition,
                    "current_leader_epoch": self.leader_epoch, "timestamp": timestamp}]}],
            }, self.timeout_s)
            p = resp.topics[0].partitions[0]
            err = _error(p.error_code)
            if err in RETRIABLE:
                raise _Retry(f"ListOffsets error {err}")
            if err:
                raise FetchClientError(f"{self.topic}-{self.partition}: ListOffsets error {err}")
            return int(p.offset)
        return int(self._with_leader(call, deadline))

    def fetch(self, offset: int, deadline: float,
              max_wait_ms: int = FETCH_MAX_WAIT_MS) -> FetchedPartition:
        """One Fetch from ``offset``; the partition's error is the caller's
        unless it is retriable (then the leader is looked up again)."""
        def call(conn: Connection) -> FetchedPartition:
            resp = conn.call(api.ApiKey.FETCH, FETCH_VERSION, {
                "cluster_id": None, "replica_id": -1, "max_wait": max_wait_ms,
                "min_bytes": 1, "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": self.isolation, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": self.topic, "partitions": [{
                    "partition": self.partition, "current_leader_epoch": self.leader_epoch,
                    "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": self.partition_max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": "",
            }, self.timeout_s + max_wait_ms / 1000)
            top = _error(resp.error_code)
            if top in RETRIABLE:
                raise _Retry(f"Fetch error {top}")
            if top:
                raise FetchClientError(f"{self.topic}-{self.partition}: Fetch error {top}")
            for t in resp.responses:
                for p in t.partitions:
                    if t.topic != self.topic or p.partition_index != self.partition:
                        continue
                    err = _error(p.error_code)
                    if err in RETRIABLE:
                        raise _Retry(f"Fetch error {err}")
                    return FetchedPartition(
                        err, int(p.high_watermark), int(p.last_stable_offset),
                        int(p.log_start_offset),
                        tuple((int(a.producer_id), int(a.first_offset))
                              for a in (p.aborted_transactions or ())),
                        bytes(p.records or b""))
            raise _Retry("Fetch response without the partition")
        result: FetchedPartition = self._with_leader(call, deadline)
        return result

    def close(self) -> None:
        self._drop_leader()


def _address(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)
