"""Small shared helpers for the integration tests: real clients with short
timeouts, produce-and-flush, consume-n with a deadline, wait-until.

Every helper is bounded in time: it either returns or raises within its
``timeout``.  Records are normalised to :class:`Rec` so that records read by
one client can be compared with records written by another.
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import crc32c
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

# Default deadline (seconds) for anything that waits on the broker.
TIMEOUT = 20.0


@dataclass(frozen=True)
class Rec:
    """A record as seen by a consumer, client-independent."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


@dataclass
class Out:
    """A record to produce."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None  # ms since epoch; None = client's "now"
    partition: int | None = None


def wait_until(
    pred: Callable[[], Any],
    timeout: float = TIMEOUT,
    interval: float = 0.05,
    desc: str = "condition",
) -> Any:
    """Poll ``pred`` until it returns a truthy value; return that value."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {desc}"
                + (f" (last error: {last_exc!r})" if last_exc else "")
            )
        time.sleep(interval)


# --------------------------------------------------------------------------
# confluent-kafka
# --------------------------------------------------------------------------


def ck_common(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 10000,
        "broker.address.family": "v4",
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 2000,
    }


def ck_admin(bootstrap: str, **conf: Any) -> AdminClient:
    return AdminClient({**ck_common(bootstrap), **conf})


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> None:
    """Create a topic through the AdminClient and wait until metadata shows
    all its partitions with a leader."""
    a = ck_admin(bootstrap)
    fs = a.create_topics(
        [NewTopic(name, partitions, 1, config=config or {})],
        request_timeout=timeout,
        operation_timeout=timeout,
    )
    fs[name].result(timeout=timeout)
    wait_for_topic(bootstrap, name, partitions, timeout)


def wait_for_topic(bootstrap: str, name: str, partitions: int, timeout: float = TIMEOUT) -> None:
    a = ck_admin(bootstrap)

    def ready() -> bool:
        md = a.list_topics(name, timeout=5)
        t = md.topics.get(name)
        return (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 for p in t.partitions.values())
        )

    wait_until(ready, timeout, desc=f"topic {name} with {partitions} partitions")


def ck_producer(bootstrap: str, **conf: Any) -> Producer:
    base = {
        **ck_common(bootstrap),
        "message.timeout.ms": 15000,
        "linger.ms": 5,
    }
    return Producer({**base, **conf})


@dataclass
class Delivery:
    partition: int
    offset: int
    timestamp: int
    error: KafkaError | None


def ck_produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Out],
    timeout: float = TIMEOUT,
    raise_on_error: bool = True,
    **conf: Any,
) -> list[Delivery]:
    """Produce ``records`` with a fresh confluent-kafka Producer, flush, and
    return one :class:`Delivery` per record in send order."""
    p = ck_producer(bootstrap, **conf)
    return ck_send(p, topic, records, timeout, raise_on_error)


def ck_send(
    p: Producer,
    topic: str,
    records: Iterable[Out],
    timeout: float = TIMEOUT,
    raise_on_error: bool = True,
) -> list[Delivery]:
    records = list(records)
    results: list[Delivery | None] = [None] * len(records)

    def cb(i: int) -> Callable[[KafkaError | None, Any], None]:
        def _cb(err: KafkaError | None, msg: Any) -> None:
            results[i] = Delivery(msg.partition(), msg.offset(), msg.timestamp()[1], err)

        return _cb

    for i, r in enumerate(records):
        kw: dict[str, Any] = {"value": r.value, "key": r.key, "on_delivery": cb(i)}
        if r.headers:
            kw["headers"] = r.headers
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        if r.partition is not None:
            kw["partition"] = r.partition
        p.produce(topic, **kw)
        p.poll(0)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} records still in flight after {timeout}s"
    assert all(d is not None for d in results), "missing delivery reports"
    out = [d for d in results if d is not None]
    if raise_on_error:
        errs = [d.error for d in out if d.error is not None]
        assert not errs, f"delivery errors: {errs[:3]}"
    return out


def ck_consumer(bootstrap: str, **conf: Any) -> Consumer:
    base = {
        **ck_common(bootstrap),
        # A group.id is required by the config but is never joined: assign() only.
        "group.id": "odradek-itest-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "session.timeout.ms": 10000,
    }
    return Consumer({**base, **conf})


def _ck_rec(m: Any) -> Rec:
    hdrs = m.headers() or []
    return Rec(
        m.partition(),
        m.offset(),
        m.key(),
        m.value(),
        tuple((k, v) for k, v in hdrs),
        m.timestamp()[1],
    )


def ck_consume(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: Sequence[int] = (0,),
    offset: int = OFFSET_BEGINNING,
    timeout: float = TIMEOUT,
    **conf: Any,
) -> list[Rec]:
    """Assign ``partitions`` from ``offset`` and read exactly ``n`` records
    (fails if fewer arrive before the deadline; records past ``n`` are not
    read)."""
    c = ck_consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, p, offset) for p in partitions])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            assert left > 0, f"consumed {len(out)} of {n} records before the deadline"
            msgs = c.consume(n - len(out), timeout=min(left, 1.0))
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                out.append(_ck_rec(m))
        return out
    finally:
        c.close()


# --------------------------------------------------------------------------
# kafka-python
# --------------------------------------------------------------------------


def kp_producer(bootstrap: str, **conf: Any) -> Any:
    from kafka import KafkaProducer

    base = {
        "bootstrap_servers": bootstrap,
        "request_timeout_ms": 10000,
        "max_block_ms": 10000,
        "linger_ms": 5,
        "retry_backoff_ms": 100,
    }
    return KafkaProducer(**{**base, **conf})


def kp_produce(
    bootstrap: str, topic: str, records: Iterable[Out], timeout: float = TIMEOUT, **conf: Any
) -> list[Any]:
    """Produce with kafka-python; returns RecordMetadata in send order."""
    p = kp_producer(bootstrap, **conf)
    try:
        futs = []
        for r in records:
            futs.append(
                p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=r.headers or None,
                    timestamp_ms=r.timestamp,
                    partition=r.partition,
                )
            )
        p.flush(timeout)
        return [f.get(timeout=timeout) for f in futs]
    finally:
        p.close(timeout=5)


def kp_consumer(bootstrap: str, **conf: Any) -> Any:
    from kafka import KafkaConsumer

    base = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": 10000,
        "fetch_max_wait_ms": 100,
        "consumer_timeout_ms": 1000,
    }
    return KafkaConsumer(**{**base, **conf})


def kp_consume(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: Sequence[int] = (0,),
    timeout: float = TIMEOUT,
    **conf: Any,
) -> list[Rec]:
    from kafka import TopicPartition as KTP

    c = kp_consumer(bootstrap, **conf)
    try:
        tps = [KTP(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            assert left > 0, f"consumed {len(out)} of {n} records before the deadline"
            batch = c.poll(timeout_ms=int(min(left, 1.0) * 1000), max_records=n - len(out))
            for msgs in batch.values():
                for m in msgs:
                    out.append(
                        Rec(
                            m.partition,
                            m.offset,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in (m.headers or [])),
                            m.timestamp,
                        )
                    )
        return out
    finally:
        c.close()


# --------------------------------------------------------------------------
# aiokafka (driven through asyncio.run so tests stay synchronous)
# --------------------------------------------------------------------------


def run(coro: Any, timeout: float = TIMEOUT + 10) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def aio_produce_async(
    bootstrap: str, topic: str, records: Iterable[Out], **conf: Any
) -> list[Any]:
    from aiokafka import AIOKafkaProducer

    base = {
        "bootstrap_servers": bootstrap,
        "request_timeout_ms": 10000,
        "linger_ms": 5,
        "retry_backoff_ms": 100,
    }
    p = AIOKafkaProducer(**{**base, **conf})
    await p.start()
    try:
        futs = []
        for r in records:
            futs.append(
                await p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=r.headers or None,
                    timestamp_ms=r.timestamp,
                    partition=r.partition,
                )
            )
        await p.flush()
        return [await f for f in futs]
    finally:
        await p.stop()


def aio_produce(bootstrap: str, topic: str, records: Iterable[Out], **conf: Any) -> list[Any]:
    return run(aio_produce_async(bootstrap, topic, list(records), **conf))


async def aio_consume_async(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: Sequence[int] = (0,),
    timeout: float = TIMEOUT,
    **conf: Any,
) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    base = {
        "bootstrap_servers": bootstrap,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": 10000,
        "fetch_max_wait_ms": 100,
    }
    c = AIOKafkaConsumer(**{**base, **conf})
    await c.start()
    try:
        tps = [ATP(topic, p) for p in partitions]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < n:
            left = deadline - time.monotonic()
            assert left > 0, f"consumed {len(out)} of {n} records before the deadline"
            batch = await c.getmany(timeout_ms=int(min(left, 1.0) * 1000), max_records=n - len(out))
            for msgs in batch.values():
                for m in msgs:
                    out.append(
                        Rec(
                            m.partition,
                            m.offset,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in (m.headers or ())),
                            m.timestamp,
                        )
                    )
        return out
    finally:
        await c.stop()


def aio_consume(
    bootstrap: str,
    topic: str,
    n: int,
    partitions: Sequence[int] = (0,),
    timeout: float = TIMEOUT,
    **conf: Any,
) -> list[Rec]:
    return run(aio_consume_async(bootstrap, topic, n, partitions, timeout, **conf), timeout + 10)


# --------------------------------------------------------------------------
# Dispatch by client name, for parametrised tests
# --------------------------------------------------------------------------

CLIENTS = ("confluent", "kafka-python", "aiokafka")


def produce(
    client: str, bootstrap: str, topic: str, records: Iterable[Out], **conf: Any
) -> list[tuple[int, int]]:
    """Produce with the named client; returns (partition, offset) per record."""
    records = list(records)
    if client == "confluent":
        return [(d.partition, d.offset) for d in ck_produce(bootstrap, topic, records, **conf)]
    if client == "kafka-python":
        return [(m.partition, m.offset) for m in kp_produce(bootstrap, topic, records, **conf)]
    if client == "aiokafka":
        # aiokafka resolves acks=0 sends to None: no partition or offset known.
        return [
            (-1, -1) if m is None else (m.partition, m.offset)
            for m in aio_produce(bootstrap, topic, records, **conf)
        ]
    raise ValueError(client)


def consume(
    client: str,
    bootstrap: str,
    topic: str,
    n: int,
    partitions: Sequence[int] = (0,),
    timeout: float = TIMEOUT,
    **conf: Any,
) -> list[Rec]:
    if client == "confluent":
        return ck_consume(bootstrap, topic, n, partitions, timeout=timeout, **conf)
    if client == "kafka-python":
        return kp_consume(bootstrap, topic, n, partitions, timeout=timeout, **conf)
    if client == "aiokafka":
        return aio_consume(bootstrap, topic, n, partitions, timeout=timeout, **conf)
    raise ValueError(client)


# Per-client spelling of common producer settings.
def acks_conf(client: str, acks: str) -> dict[str, Any]:
    """acks is "0", "1" or "all"."""
    if client == "confluent":
        return {"acks": acks}
    v: Any = acks if acks == "all" else int(acks)
    return {"acks": v}


def compression_conf(client: str, codec: str) -> dict[str, Any]:
    if client == "confluent":
        return {"compression.type": codec}
    return {"compression_type": None if codec == "none" else codec}


# --------------------------------------------------------------------------
# Raw wire access (for hand-built frames)
# --------------------------------------------------------------------------


class Wire:
    """One raw TCP connection to the broker, speaking size-prefixed frames."""

    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 source_ip: str | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout,
            source_address=(source_ip, 0) if source_ip else None)
        self.sock.settimeout(timeout)
        self.timeout = timeout

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def send_request(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        body: bytes,
        client_id: str | None = "odradek-itest",
        header_version: int = 2,
    ) -> None:
        """Send a request with request header v1 (non-flexible) or v2 (flexible)."""
        hdr = struct.pack(">hhi", api_key, api_version, correlation_id)
        if client_id is None:
            hdr += struct.pack(">h", -1)
        else:
            cid = client_id.encode()
            hdr += struct.pack(">h", len(cid)) + cid
        if header_version >= 2:
            hdr += b"\x00"  # empty tagged fields
        self.send_frame(hdr + body)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def read_frame(self) -> bytes | None:
        """Read one size-prefixed frame; None if the peer closed the connection."""
        try:
            head = self._recv_exact(4)
            if head is None:
                return None
            (size,) = struct.unpack(">i", head)
            assert 0 <= size < 200 * 1024 * 1024, f"bad response size {size}"
            return self._recv_exact(size)
        except ConnectionResetError:
            return None

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closes the connection (EOF or reset) within
        ``timeout``; False if the connection is still open and silent after it.
        Any bytes the broker sends first (e.g. an error response) are drained."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.sock.settimeout(left)
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(self.timeout)


def encode_varint(v: int) -> bytes:
    """Zig-zag signed varint, as used inside record batch v2."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes_field(b: bytes | None) -> bytes:
    return encode_varint(-1) if b is None else encode_varint(len(b)) + b


def record_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    base_timestamp: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """An uncompressed record batch v2 (magic 2) with a correct CRC32C."""
    body = bytearray()
    for i, (k, v) in enumerate(records):
        rec = (
            b"\x00"
            + encode_varint(0)
            + encode_varint(i)
            + _bytes_field(k)
            + _bytes_field(v)
            + encode_varint(0)
        )
        body += encode_varint(len(rec)) + rec
    after_crc = struct.pack(
        ">hiqqqhii",
        0,
        len(records) - 1,
        base_timestamp,
        base_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + bytes(body)
    crc = crc32c.crc32c(after_crc)
    after_len = struct.pack(">ibI", 0, 2, crc) + after_crc
    return struct.pack(">qi", 0, len(after_len)) + after_len


# Offset of the CRC field inside a record batch v2.
BATCH_CRC_OFFSET = 8 + 4 + 4 + 1


def produce_request_v9(
    topic: str, partition: int, batch: bytes, acks: int = -1, timeout_ms: int = 10000
) -> bytes:
    """The body (no header) of a ProduceRequest v9, encoded with kio."""
    import datetime

    from kio.schema.produce.v9.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32, i32Timedelta

    req = ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=i32(partition), records=batch),),
            ),
        ),
    )
    buf = io.BytesIO()
    entity_writer(ProduceRequest)(buf, req)
    return buf.getvalue()


def parse_response(
    frame: bytes, response_type: Any, flexible_header: bool = True
) -> tuple[int, Any]:
    """Split a response frame into (correlation_id, decoded body) using kio.
    Flexible responses use response header v1 (correlation id + tagged
    fields); ApiVersions always uses header v0."""
    (corr,) = struct.unpack_from(">i", frame, 0)
    pos = 4
    if flexible_header:
        assert frame[pos] == 0, "expected empty tagged fields in response header"
        pos += 1
    from kio.serial import entity_reader

    body, _size = entity_reader(response_type)(memoryview(frame), pos)
    return corr, body


def api_versions_v0(bootstrap_or_wire: Any, correlation_id: int = 1) -> tuple[int, int]:
    """Send ApiVersions v0 and return (correlation_id, error_code)."""
    w = Wire(bootstrap_or_wire) if isinstance(bootstrap_or_wire, str) else bootstrap_or_wire
    try:
        w.send_request(18, 0, correlation_id, b"", header_version=1)
        frame = w.read_frame()
        assert frame is not None, "broker closed the connection instead of answering ApiVersions"
        corr, err = struct.unpack_from(">ih", frame, 0)
        return corr, err
    finally:
        if isinstance(bootstrap_or_wire, str):
            w.close()


def assert_broker_serves(bootstrap: str) -> None:
    """The broker still answers a fresh raw connection and a real client."""
    corr, err = api_versions_v0(bootstrap, correlation_id=4242)
    assert (corr, err) == (4242, 0), f"ApiVersions v0 on a fresh connection: corr={corr} err={err}"
    md = ck_admin(bootstrap).list_topics(timeout=10)
    assert len(md.brokers) >= 1


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) watermark offsets, asked of the broker (ListOffsets)."""
    c = ck_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def answered_or_closed(w: Wire, timeout: float = 10.0) -> bytes | None:
    """Wait for the broker to answer (returns the first frame) or close the
    connection (returns None). Fails if it does neither within ``timeout``."""
    w.sock.settimeout(timeout)
    try:
        return w.read_frame()
    except TimeoutError:
        raise AssertionError(f"broker neither answered nor closed within {timeout}s") from None
    finally:
        w.sock.settimeout(w.timeout)


def fetch_v12(
    bootstrap: str,
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int,
    min_bytes: int,
    correlation_id: int = 1,
    partition_max_bytes: int = 1048576,
) -> tuple[float, Any]:
    """One raw Fetch v12 on a fresh connection; returns (seconds until the
    answer came, the PartitionData for the partition)."""
    import datetime

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.serial import entity_writer
    from kio.static.primitive import i32, i32Timedelta, i64

    req = FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(min_bytes),
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(
                        partition=i32(partition),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(partition_max_bytes),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    buf = io.BytesIO()
    entity_writer(FetchRequest)(buf, req)
    with Wire(bootstrap, timeout=max_wait_ms / 1000 + 15) as w:
        t0 = time.monotonic()
        w.send_request(1, 12, correlation_id, buf.getvalue())
        frame = w.read_frame()
        elapsed = time.monotonic() - t0
    assert frame is not None, "broker closed the connection instead of answering Fetch"
    corr, resp = parse_response(frame, FetchResponse)
    assert corr == correlation_id
    assert int(resp.error_code) == 0
    [t] = resp.responses
    [p] = t.partitions
    assert p.partition_index == partition
    return elapsed, p


def upsert_scram(admin_conf: dict[str, Any], user: str, password: str,
                 mechanism: str = "SCRAM-SHA-512", iterations: int = 8192,
                 timeout: float = 30) -> None:
    """AlterUserScramCredentials as the admin whose librdkafka settings are `admin_conf`."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    kind = ScramMechanism[mechanism.replace("-", "_")]
    admin = AdminClient(admin_conf)
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(kind, iterations),
                                          password.encode())
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=timeout)
