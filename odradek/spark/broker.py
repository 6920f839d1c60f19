"""Driver-side questions to the brokers: which partitions, which offsets.

Theory of operation
-------------------
`OffsetReader` wraps one confluent-kafka AdminClient for the life of a reader
(a batch read's planning, or a streaming query's long-lived source process on
the driver). It answers three questions, each with a bounded timeout:

- `partitions()`: the topic-partitions the subscription covers now
  (subscribe / subscribePattern / assign); internal topics (`__*`) never match
  a pattern;
- `list_offsets(specs)`: earliest, latest or by-timestamp offsets
  (ListOffsets; `latest` honours `kafka.isolation.level`, so under
  read_committed it is the last stable offset);
- `resolve(OffsetSpec, partitions)`: an option's start or end turned into one
  offset per partition, with Spark's rules for missing partitions and
  timestamps without a matching offset.

`broker_supports_transactions(bootstrap)` asks ApiVersions (v0, raw socket;
over TLS or SASL a transactional producer's InitProducerId alone) whether the
broker serves the transaction APIs; the streaming sink uses it to decide
whether exactly-once can be switched on.

`check_login(bootstrap, kafka)`: with `kafka.security.protocol` SSL, SASL_SSL or
SASL_PLAINTEXT, the driver logs in once before planning a read or starting a
write, so a wrong password or an untrusted certificate is an
`OdradekAuthenticationError` with the broker's reason, not a timeout.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterable
from typing import Any

from odradek.spark.options import (
    EARLIEST,
    LATEST,
    OdradekOptionError,
    OffsetSpec,
    SourceOptions,
    TopicPartitionKey,
)

ADMIN_TIMEOUT_S = 30.0
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit.
TRANSACTION_API_KEYS = (24, 25, 26, 28)


# A librdkafka configuration as confluent-kafka's clients take it.
ClientConf = dict[str, Any]  # librdkafka settings, plus the "logger" object


# librdkafka's own log lines (e.g. "%6|...|BGQUEUE| Purging 1 unserved events" when a
# batch read closes its consumer) go to this logger instead of stderr: its info lines
# stay out of the user's console, its warnings and errors still show (Python logging).
LIBRDKAFKA_LOG = logging.getLogger("odradek.spark.librdkafka")


def client_conf(bootstrap: str, kafka: dict[str, str]) -> ClientConf:
    return {"logger": LIBRDKAFKA_LOG, **kafka, "bootstrap.servers": bootstrap}


class OdradekAuthenticationError(OdradekOptionError):
    """The brokers refused the login (SASL or TLS) the kafka.* options describe."""


def is_secured(kafka: dict[str, str]) -> bool:
    return kafka.get("security.protocol", "plaintext").strip().lower() != "plaintext"


def check_login(bootstrap: str, kafka: dict[str, str], timeout_s: float = ADMIN_TIMEOUT_S) -> None:
    """On the driver, before any job: with a SASL or TLS security.protocol, log in once
    and raise OdradekAuthenticationError with the broker's reason if that is refused.
    librdkafka retries a refused login for ever and reports it only to error_cb, so a
    wrong password would otherwise show as a timeout minutes later (or a task hanging
    in flush). Without security settings there is nothing to check."""
    if not is_secured(kafka):
        return
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    refused: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL,
                          KafkaError.SASL_AUTHENTICATION_FAILED):
            refused.append(err.str())

    try:
        conf: dict[str, Any] = {**client_conf(bootstrap, kafka), "error_cb": on_error}
        admin = AdminClient(conf)
    except (KafkaException, ValueError, TypeError) as e:  # librdkafka names the bad property
        raise OdradekOptionError(f'format("odradek") kafka.* options: {e}') from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin.list_topics(timeout=1.0)
            return
        except KafkaException:
            pass
        admin.poll(0)  # serves error_cb
        if refused:
            raise OdradekAuthenticationError(
                f'format("odradek"): the brokers at {bootstrap} refused the login '
                f"(security.protocol {kafka.get('security.protocol')}, user "
                f"{kafka.get('sasl.username', '-')}): {refused[0]}; check kafka.sasl.jaas.config "
                "and kafka.ssl.*")
        if time.monotonic() > deadline:
            return  # unreachable rather than refused: the real request reports it


class OffsetReader:
    def __init__(self, opts: SourceOptions) -> None:
        from confluent_kafka.admin import AdminClient

        check_login(opts.bootstrap_servers, opts.kafka)
        self.opts = opts
        conf = client_conf(opts.bootstrap_servers, opts.kafka)
        # Consumer-only keys make AdminClient warn; they are checked by the executors' consumers.
        try:
            self.admin = AdminClient(conf)
        except Exception as e:  # noqa: BLE001 - librdkafka names the bad property
            raise OdradekOptionError(f'format("odradek") kafka.* options: {e}') from None

    def partitions(self) -> list[TopicPartitionKey]:
        md = self.admin.list_topics(timeout=ADMIN_TIMEOUT_S)
        present = {
            (name, pid)
            for name, t in md.topics.items()
            if t.error is None
            for pid in t.partitions
        }
        if self.opts.strategy == "assign":
            missing = sorted(set(self.opts.assigned) - present)
            if missing:
                raise OdradekOptionError(
                    "format(\"odradek\") option 'assign': no such topic-partition "
                    f"{[f'{t}-{p}' for t, p in missing]}"
                )
            return sorted(self.opts.assigned)
        return sorted(
            (t, p)
            for (t, p) in present
            if not (self.opts.strategy == "subscribePattern" and t.startswith("__"))
            and self.opts.matches(t)
        )

    def existing(self, tps: Iterable[TopicPartitionKey]) -> set[TopicPartitionKey]:
        md = self.admin.list_topics(timeout=ADMIN_TIMEOUT_S)
        return {
            (t, p) for t, p in tps if t in md.topics and md.topics[t].error is None
            and p in md.topics[t].partitions
        }

    def list_offsets(self, specs: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """specs: tp -> EARLIEST | LATEST | timestamp_ms (>= 0). Returns tp -> offset
        (-1 where no record has a timestamp at or after the one asked)."""
        if not specs:
            return {}
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec as CkSpec

        req = {}
        for (t, p), v in specs.items():
            spec = CkSpec.earliest() if v == EARLIEST else CkSpec.latest() if v == LATEST else (
                CkSpec.for_timestamp(v)
            )
            req[TopicPartition(t, p)] = spec
        level = (
            IsolationLevel.READ_COMMITTED
            if self.opts.isolation_level == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        futures = self.admin.list_offsets(
            req, isolation_level=level, request_timeout=ADMIN_TIMEOUT_S
        )
        return {
            (tp.topic, tp.partition): f.result(timeout=ADMIN_TIMEOUT_S).offset
            for tp, f in futures.items()
        }

    def earliest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return self.list_offsets({tp: LATEST for tp in tps})

    def resolve(
        self, spec: OffsetSpec, tps: list[TopicPartitionKey], *, is_start: bool
    ) -> dict[TopicPartitionKey, int]:
        """One concrete offset per partition for a start or end spec."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind in ("offsets", "timestamps"):
            missing = sorted(set(tps) - set(spec.offsets))
            unknown = sorted(set(spec.offsets) - set(tps))
            if unknown:  # Spark: "you must specify all TopicPartitions ... Specified: ..."
                raise OdradekOptionError(
                    f"format(\"odradek\") option '{spec.option}': names partitions that "
                    f"are not read (unknown topic or partition, or not subscribed): "
                    f"{[f'{t}-{p}' for t, p in unknown]}; read: "
                    f"{[f'{t}-{p}' for t, p in sorted(tps)]}"
                )
            if missing:
                raise OdradekOptionError(
                    f"format(\"odradek\") option '{spec.option}': must name every partition "
                    "read (use -1 for latest, -2 for earliest); missing "
                    f"{[f'{t}-{p}' for t, p in missing]}"
                )
        if spec.kind == "offsets":
            wanted = {tp: spec.offsets[tp] for tp in tps}
            special = {tp: v for tp, v in wanted.items() if v in (EARLIEST, LATEST)}
            return {**wanted, **self.list_offsets(special)}
        by_ts = (
            {tp: spec.offsets[tp] for tp in tps}
            if spec.kind == "timestamps"
            else {tp: int(spec.timestamp_ms or 0) for tp in tps}
        )
        found = self.list_offsets(by_ts)
        unmatched = [tp for tp, off in found.items() if off < 0]
        if unmatched:
            if is_start and self.opts.starting_by_timestamp_strategy == "error":
                raise OdradekOptionError(
                    f"format(\"odradek\") option '{spec.option}': no record at or after the "
                    f"timestamp in {[f'{t}-{p}' for t, p in unmatched]} "
                    "(set startingOffsetsByTimestampStrategy=latest to start at latest there)"
                )
            found.update(self.latest(unmatched))
        return found

    def close(self) -> None:
        self.admin = None  # type: ignore[assignment]


def broker_supports_transactions(
    bootstrap: str, kafka: dict[str, str] | None = None, timeout_s: float = 15.0
) -> bool:
    """True if the brokers advertise the transaction APIs (ApiVersions) *and* a
    transactional producer can initialise (InitProducerId with a transactional.id
    finds a transaction coordinator). Advertised APIs alone are not enough: a
    broker may list them while its coordinator is not there yet."""
    # The ApiVersions probe is a raw PLAINTEXT socket; over TLS or SASL the
    # transactional producer below is the whole check.
    if not is_secured(kafka or {}) and not advertises_transactions(bootstrap, timeout_s):
        return False
    import uuid

    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            **client_conf(bootstrap, kafka or {}),
            "transactional.id": f"odradek-spark-probe-{uuid.uuid4().hex}",
            "transaction.timeout.ms": 60_000,
        }
    )
    try:
        producer.init_transactions(timeout_s)
        return True
    except KafkaException:
        return False
    finally:
        producer.flush(1)


def advertises_transactions(bootstrap: str, timeout_s: float = 10.0) -> bool:
    """True if the first reachable bootstrap broker lists the transaction APIs."""
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            keys = _api_keys(host or "127.0.0.1", int(port), timeout_s)
            return set(TRANSACTION_API_KEYS) <= keys
        except (OSError, ValueError, struct.error) as e:
            last = e
    raise ConnectionError(f"no bootstrap broker answered ApiVersions ({bootstrap}): {last}")


def _api_keys(host: str, port: int, timeout_s: float) -> set[int]:
    client_id = b"odradek-spark"
    header = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(struct.pack(">i", len(header)) + header)
        size = struct.unpack(">i", _recv(s, 4))[0]
        body = _recv(s, size)
    _corr, error, n = struct.unpack_from(">ihi", body, 0)
    if error != 0:
        raise ValueError(f"ApiVersions error {error}")
    return {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(n)}


def _recv(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)
