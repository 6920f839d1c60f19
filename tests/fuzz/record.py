"""Record the fuzzer's seed corpus from real clients (`scripts/fuzz --record`).

Theory of operation
-------------------
A real odradek broker runs behind a recording proxy (the fault proxy of the
integration tests with ``record_requests``; the broker advertises the proxy's
port, so clients come back through it after bootstrap). Three real clients
then do what applications do: confluent-kafka (produce with every codec,
idempotent and transactional producers, classic and KIP-848 consumer groups,
the admin APIs), kafka-python (its admin client reaches the APIs librdkafka
does not: log dirs, producers, transactions, features, reassignments) and
aiokafka (produce, transactions, a group). A scenario that fails is reported
and skipped: the corpus keeps what the others sent.

Controller APIs (Vote, BeginQuorumEpoch, BrokerRegistration, AllocateProducerIds,
AlterPartition, ...) and a Fetch of ``__cluster_metadata`` posing as a voter
are never sent by clients, so `synthesized_frames` writes one of each API
version from a filled-in sample and appends them: on the client listener the
fuzzed broker must refuse them all (pipeline.py's route stage, Fetch's
controller-listener check), mutated or not.

`select` keeps the corpus small: frames up to ``MAX_FRAME_BYTES``, no exact
duplicates, at most ``PER_GROUP`` frames per (api key, version, client,
produce flavour), so every version each client uses is in it and the file
stays far below 1 MB.
"""

from __future__ import annotations

import asyncio
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.metadata.quorum import METADATA_TOPIC, METADATA_TOPIC_ID
from odradek.protocol import api
from odradek.protocol.framing import parse_request_header
from odradek.protocol.guard import decode_message
from odradek.protocol.records import BATCH_OVERHEAD, parse_batch_header
from tests.fuzz.corpus import (
    BROKER_OVERRIDES,
    COMPACT_TOPIC,
    CORPUS_PATH,
    TOPIC,
    TOPIC_PARTITIONS,
    frame_api,
    write_frames,
)
from tests.fuzz.samples import encoded_sample, sample
from tests.integration.broker_proc import HOST, BrokerProcess, free_port
from tests.integration.fault_proxy import FaultProxy

MAX_FRAME_BYTES = 16 * 1024
PER_GROUP = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SCENARIO_TIMEOUT_S = 60.0
RECORDS_PER_SEND = 5
GROUP_STAY_S = 2.5
TEMP_TOPIC = "fuzz-temp"


def _values(tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"{tag}-{i}".encode() * 3) for i in range(RECORDS_PER_SEND)]


# -- confluent-kafka ------------------------------------------------------------


def _ck(bs: str, **conf: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bs, "client.id": "fuzz-ck", "broker.address.family": "v4",
            "socket.timeout.ms": 10000, **conf}


def ck_admin_create(bs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient(_ck(bs))
    fs = a.create_topics([
        NewTopic(TOPIC, TOPIC_PARTITIONS, 1),
        NewTopic(COMPACT_TOPIC, 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic(TEMP_TOPIC, 1, 1),
    ], operation_timeout=20)
    for f in fs.values():
        f.result(timeout=30)
    time.sleep(1.0)


def ck_produce_codecs(bs: str) -> None:
    from confluent_kafka import Producer

    for codec in CODECS:
        for extra in ({}, {"enable.idempotence": True, "acks": "all"}, {"acks": "0"}):
            p = Producer(_ck(bs, **{"compression.type": codec, "linger.ms": 5, **extra}))
            for k, v in _values(codec):
                p.produce(TOPIC, v, k)
            p.produce(COMPACT_TOPIC, b"compacted", b"key")
            p.flush(20)


def ck_transactions(bs: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(_ck(bs, **{"transactional.id": "fuzz-ck-txn", "linger.ms": 5}))
    p.init_transactions(20)
    c = Consumer(_ck(bs, **{"group.id": "fuzz-ck-txn-group", "enable.auto.commit": False}))
    for commit in (True, False):
        p.begin_transaction()
        for k, v in _values("txn"):
            p.produce(TOPIC, v, k, partition=0)
        p.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 3)],
                                      c.consumer_group_metadata(), 20)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    c.close()


def _ck_consume_group(bs: str, group: str, **conf: Any) -> None:
    from confluent_kafka import Consumer

    c = Consumer(_ck(bs, **{"group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "fetch.wait.max.ms": 100, **conf}))
    c.subscribe([TOPIC])
    got = 0
    started = time.monotonic()
    # a few seconds in the group, so heartbeats are recorded too
    while (got < 10 or time.monotonic() < started + GROUP_STAY_S) and (
            time.monotonic() < started + SCENARIO_TIMEOUT_S):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    c.committed(c.assignment(), timeout=10)
    c.close()


def ck_group_classic(bs: str) -> None:
    _ck_consume_group(bs, "fuzz-classic", **{"session.timeout.ms": 6000,
                                             "heartbeat.interval.ms": 500,
                                             "isolation.level": "read_committed"})


def ck_group_kip848(bs: str) -> None:
    _ck_consume_group(bs, "fuzz-848", **{"group.protocol": "consumer"})


def ck_admin_ops(bs: str) -> None:
    from confluent_kafka import (
        ConsumerGroupTopicPartitions,
        IsolationLevel,
        TopicCollection,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        OffsetSpec,
    )

    a = AdminClient(_ck(bs))
    t = 20

    def each(fs: Any) -> None:
        for f in (fs.values() if isinstance(fs, dict) else [fs]):
            try:
                f.result(timeout=t)
            except Exception as e:  # noqa: BLE001 - an error answer still recorded its request
                print(f"  admin: {e}", file=sys.stderr)

    topic_res = ConfigResource("topic", TOPIC)
    each(a.describe_configs([topic_res, ConfigResource("broker", "1")]))
    each(a.incremental_alter_configs([ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry("retention.ms", "86400000",
                    incremental_operation=AlterConfigOpType.SET)])]))
    each(a.alter_configs([ConfigResource("topic", TEMP_TOPIC,
                                         set_config={"retention.bytes": "1000000"})]))
    each(a.create_partitions([NewPartitions(TEMP_TOPIC, 2)]))
    each(a.describe_cluster(request_timeout=t))
    each(a.describe_topics(TopicCollection([TOPIC, COMPACT_TOPIC]), request_timeout=t))
    tp = TopicPartition(TOPIC, 0)
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.max_timestamp(),
                 OffsetSpec.for_timestamp(1)):
        each(a.list_offsets({tp: spec}, isolation_level=IsolationLevel.READ_COMMITTED))
    each(a.delete_records([TopicPartition(TOPIC, 1, 1)]))
    each(a.list_consumer_groups(request_timeout=t))
    each(a.describe_consumer_groups(["fuzz-classic", "fuzz-848"], request_timeout=t))
    each(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions("fuzz-classic")]))
    each(a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "fuzz-classic", [TopicPartition(TOPIC, 0, 1)])]))
    each(a.delete_consumer_groups(["fuzz-ck-txn-group"], request_timeout=t))
    each(a.delete_topics([TEMP_TOPIC], operation_timeout=t))


# -- kafka-python -----------------------------------------------------------------


def kp_clients(bs: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        try:
            p = KafkaProducer(bootstrap_servers=bs, client_id="fuzz-kp", compression_type=codec,
                              request_timeout_ms=10000, linger_ms=5)
        except Exception as e:  # noqa: BLE001 - a codec whose Python library is missing
            print(f"  kafka-python {codec}: {e}", file=sys.stderr)
            continue
        for k, v in _values(f"kp-{codec}"):
            p.send(TOPIC, value=v, key=k)
        p.flush(10)
        p.close(5)
    c = KafkaConsumer(TOPIC, bootstrap_servers=bs, client_id="fuzz-kp", group_id="fuzz-kp-group",
                      auto_offset_reset="earliest", consumer_timeout_ms=3000,
                      enable_auto_commit=False, request_timeout_ms=10000)
    for n, _m in enumerate(c):
        if n >= 10:
            break
    c.commit()
    c.close()


def kp_admin(bs: str) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    a = KafkaAdminClient(bootstrap_servers=bs, client_id="fuzz-kp", request_timeout_ms=10000)
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("describe_log_dirs", a.describe_log_dirs),
        ("describe_cluster", a.describe_cluster),
        ("describe_topics", lambda: a.describe_topics([TOPIC])),
        ("describe_features", a.describe_features),
        ("list_groups", a.list_groups),
        ("describe_groups", lambda: a.describe_groups(["fuzz-kp-group"])),
        ("list_group_offsets", lambda: a.list_group_offsets("fuzz-kp-group")),
        ("list_transactions", a.list_transactions),
        ("describe_transactions", lambda: a.describe_transactions(["fuzz-ck-txn"])),
        ("describe_producers", lambda: a.describe_producers([TopicPartition(TOPIC, 0)])),
        ("delete_records", lambda: a.delete_records({TopicPartition(TOPIC, 2): 1})),
        ("elect_leaders", lambda: a.elect_leaders(0, [TopicPartition(TOPIC, 0)])),
        ("describe_acls", lambda: a.describe_acls(ACLFilter(
            None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY)))),
        ("list_partition_reassignments", a.list_partition_reassignments),
        ("describe_metadata_quorum", a.describe_metadata_quorum),
        ("describe_topic_partitions", lambda: a.describe_topic_partitions([TOPIC])),
    ]
    for name, call in calls:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - unsupported or refused: the request is recorded
            print(f"  kafka-python {name}: {type(e).__name__}: {e}", file=sys.stderr)
    a.close()


# -- aiokafka ---------------------------------------------------------------------------


def aio_clients(bs: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def scenario() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, client_id="fuzz-aio",
                             transactional_id="fuzz-aio-txn", compression_type="gzip")
        await p.start()
        try:
            async with p.transaction():
                for k, v in _values("aio"):
                    await p.send(TOPIC, value=v, key=k, partition=1)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(TOPIC, bootstrap_servers=bs, client_id="fuzz-aio",
                             group_id="fuzz-aio-group", auto_offset_reset="earliest",
                             enable_auto_commit=False, isolation_level="read_committed")
        await c.start()
        try:
            await c.getmany(timeout_ms=3000, max_records=10)
            await c.commit()
        finally:
            await c.stop()

    asyncio.run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT_S))


SCENARIOS: tuple[Callable[[str], None], ...] = (
    ck_admin_create, ck_produce_codecs, ck_transactions, ck_group_classic, ck_group_kip848,
    ck_admin_ops, kp_clients, kp_admin, aio_clients,
)


# -- synthesized: what only controllers and voters send ----------------------------

SYNTH_CLIENT_ID = b"fuzz-synth"
POSING_VOTER_ID = 1  # the fuzzed broker's own node id: a client posing as a voter


def _request_frame(key: int, version: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", key, version, 0x5EED, len(SYNTH_CLIENT_ID)) + SYNTH_CLIENT_ID
    if api.request_header_version(key, version) >= 2:
        header += b"\x00"  # no tagged fields
    return struct.pack(">i", len(header) + len(body)) + header + body


def synthesized_frames() -> list[bytes]:
    """One request of every controller API version, and Fetches of
    __cluster_metadata posing as a voter (name-based and topic-id versions)."""
    import dataclasses
    import io

    from kio.serial import entity_writer

    frames = []
    for key, (lo, hi) in sorted(api.CONTROLLER_VERSIONS.items()):
        for version in range(lo, hi + 1):
            frames.append(_request_frame(key, version,
                                         encoded_sample(api.request_class(key, version))))
    for version in (12, 13, 16):
        cls = api.request_class(api.ApiKey.FETCH, version)
        req = sample(cls)
        topics = tuple(dataclasses.replace(t, topic=METADATA_TOPIC) if version < 13
                       else dataclasses.replace(t, topic_id=METADATA_TOPIC_ID)
                       for t in req.topics)
        req = dataclasses.replace(req, topics=topics)
        if version < 15:
            req = dataclasses.replace(req, replica_id=POSING_VOTER_ID)
        else:
            req = dataclasses.replace(req, replica_state=dataclasses.replace(
                req.replica_state, replica_id=POSING_VOTER_ID))
        buf = io.BytesIO()
        entity_writer(cls)(buf, req)
        frames.append(_request_frame(api.ApiKey.FETCH, version, buf.getvalue()))
    return frames


def with_synthesized(recorded: list[bytes]) -> list[bytes]:
    """The recorded frames (any earlier synthesized ones dropped) and the synthesized."""
    def synthesized(f: bytes) -> bool:
        return f[14:14 + len(SYNTH_CLIENT_ID)] == SYNTH_CLIENT_ID
    return [f for f in recorded if not synthesized(f)] + synthesized_frames()


# -- selection ----------------------------------------------------------------------------


def _group(frame: bytes) -> tuple[Any, ...]:
    key, version = frame_api(frame)
    (cid_len,) = struct.unpack_from(">h", frame, 12)
    client = frame[14:14 + max(cid_len, 0)]
    flavour: tuple[Any, ...] = ()
    if key == api.ApiKey.PRODUCE:  # one group per acks, codec, idempotent / transactional
        header = parse_request_header(frame[4:])
        req = decode_message(api.request_class(key, version), frame[4:], header.body_offset)
        records = req.topic_data[0].partition_data[0].records or b""
        batch = parse_batch_header(records) if len(records) >= BATCH_OVERHEAD else None
        flavour = (req.acks, batch.attributes if batch else None,
                   batch.producer_id >= 0 if batch else None)
    return key, version, client, flavour


def select(frames: list[bytes]) -> list[bytes]:
    seen: set[bytes] = set()
    per_group: dict[tuple[Any, ...], int] = {}
    kept = []
    for f in frames:
        if len(f) > MAX_FRAME_BYTES or f in seen or len(f) < 14:
            continue
        seen.add(f)
        g = _group(f)
        if per_group.get(g, 0) >= PER_GROUP:
            continue
        per_group[g] = per_group.get(g, 0) + 1
        kept.append(f)
    return kept


def record(out: Path = CORPUS_PATH) -> list[bytes]:
    """Run every scenario through a recording proxy; write and return the selected frames."""
    proxy_port = free_port()
    base = Path(tempfile.mkdtemp(prefix="odradek-fuzz-record-"))
    broker = BrokerProcess(overrides={
        **BROKER_OVERRIDES, "advertised.listeners": f"PLAINTEXT://{HOST}:{proxy_port}",
    }, data_dir=base / "data", log_path=base / "broker.log")
    broker.start()
    proxy = FaultProxy(proxy_port, broker.port, api_key=-1, record_requests=True)
    bs = f"{HOST}:{proxy_port}"
    try:
        for scenario in SCENARIOS:
            started = time.monotonic()
            try:
                scenario(bs)
                status = "ok"
            except Exception as e:  # noqa: BLE001 - the other scenarios still record
                status = f"FAILED {type(e).__name__}: {e}"
            print(f"record: {scenario.__name__}: {status} ({time.monotonic() - started:.1f}s)",
                  file=sys.stderr)
    finally:
        proxy.close()
        broker.close()
    frames = with_synthesized(select(list(proxy.requests)))
    write_frames(out, frames)
    apis = sorted({frame_api(f) for f in frames})
    print(f"record: {len(proxy.requests)} frames seen, {len(frames)} kept "
          f"({sum(map(len, frames))} bytes, {len(apis)} api/version pairs) in {out}",
          file=sys.stderr)
    return frames
