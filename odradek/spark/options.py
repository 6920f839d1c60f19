"""Options of `format("odradek")`: parsing and validation, no I/O.

Theory of operation
-------------------
Spark hands a data source its options as a case-insensitive string map. This
module turns that map into frozen dataclasses (`SourceOptions`, `SinkOptions`)
or raises `OdradekOptionError` naming the option at fault. It runs on the driver
when a query is defined (`load()`, `save()`, `start()`), so a bad or missing
option fails before any job runs.

Names and meanings follow Spark's Kafka integration guide
("Structured Streaming + Kafka Integration Guide"): exactly one of `subscribe`,
`subscribePattern`, `assign`; `startingOffsets` / `endingOffsets` as
`earliest`, `latest` or JSON (`{"t":{"0":23,"1":-2}}`, -2 earliest, -1 latest);
the timestamp forms, which take precedence in the order `*Timestamp` >
`*OffsetsByTimestamp` > `*Offsets`; `maxOffsetsPerTrigger`,
`minOffsetsPerTrigger` + `maxTriggerDelay`; `failOnDataLoss`; `minPartitions`;
`includeHeaders`. Options prefixed `kafka.` go to librdkafka with the prefix
removed, except those this source manages itself (`UNSUPPORTED_KAFKA_OPTIONS`)
and the Java client's security keys (`kafka.security.protocol`, `kafka.sasl.*`,
`kafka.ssl.*`), which are mapped to librdkafka's (`_security_params`).

Differs from Spark: an option this source does not know is an error (Spark
ignores it), so a misspelt `startingOffset` does not silently read from latest.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KAFKA_PREFIX = "kafka."
BOOTSTRAP = "kafka.bootstrap.servers"

# kafka.* keys the source or sink must own: librdkafka would accept some of them,
# but they would break offset tracking or the delivery guarantee.
UNSUPPORTED_KAFKA_OPTIONS: dict[str, str] = {
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.enable.auto.commit": "the source never commits offsets to Kafka",
    "kafka.key.deserializer": "keys are always read as binary; cast them in the query",
    "kafka.value.deserializer": "values are always read as binary; cast them in the query",
    "kafka.key.serializer": "keys are written as binary or string columns",
    "kafka.value.serializer": "values are written as binary or string columns",
    "kafka.interceptor.classes": "Java interceptors do not apply to librdkafka",
    "kafka.transactional.id": "the exactly-once sink derives transactional ids itself",
    "kafka.enable.idempotence": "the sink always uses an idempotent producer",
}

EARLIEST = -2
LATEST = -1
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_POLL_TIMEOUT_MS = 120_000
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

# Spark hands a Python data source its options with lowercased names; these are
# the names as documented, to show in messages.
SOURCE_OPTION_NAMES = (
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets",
    "startingTimestamp", "startingOffsetsByTimestamp",
    "endingTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition",
    "includeHeaders", "kafkaConsumer.pollTimeoutMs", "groupIdPrefix",
    "path", "checkpointLocation", "remoteRead", "remote.rsm.config.url",
    "brokerReadPath",
)
SOURCE_OPTIONS = frozenset(s.lower() for s in SOURCE_OPTION_NAMES)
# The remote tier's filesystem options, as the broker's rsm.config.fs.<option>.
REMOTE_FS_PREFIX = "remote.rsm.config.fs."
REMOTE_READ_MODES = ("auto", "direct", "off")
# How a task reads through the brokers: odradek's Fetch client decoding record
# batches to Arrow in bulk (auto), or a librdkafka consumer (one object per record).
BROKER_READ_PATHS = ("auto", "fetch", "consumer")
SINK_OPTION_NAMES = ("topic", "deliveryGuarantee", "producerPath", "path", "checkpointLocation")
PRODUCER_PATHS = ("auto", "batch", "client")
# kafka.* sink keys the bulk producer (producerPath=batch) honours, besides the
# security keys and kafka.acks; any other kafka.* key is librdkafka's to interpret,
# so producerPath=auto then takes the client path and producerPath=batch refuses it.
BULK_KAFKA_KEYS = frozenset({"compression.type", "compression.codec", "client.id"})
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
SINK_OPTIONS = frozenset(s.lower() for s in SINK_OPTION_NAMES)
CANONICAL = {s.lower(): s for s in (*SOURCE_OPTION_NAMES, *SINK_OPTION_NAMES)}
# Options of the other side, refused with what to do instead.
SINK_REFUSED = {
    "includeheaders": "a source option; the sink writes the 'headers' column whenever the "
                      "DataFrame has one (as Spark's Kafka sink does) - drop the column to "
                      "write no headers",
}
ACKS = ("all", "-1", "0", "1")
DELIVERY_GUARANTEES = ("auto", "exactly-once", "at-least-once")

TopicPartitionKey = tuple[str, int]


class OdradekOptionError(ValueError):
    """A missing, unknown or malformed option; the message names it."""


def _err(option: str, problem: str) -> OdradekOptionError:
    return OdradekOptionError(f"format(\"odradek\") option '{option}': {problem}")


class _Opts:
    """Case-insensitive view that remembers the spelling the user gave."""

    def __init__(self, raw: Mapping[str, str]) -> None:
        self.values: dict[str, str] = {}
        self.spelling: dict[str, str] = {}
        for k, v in dict(raw).items():
            self.values[k.lower()] = "" if v is None else str(v)
            self.spelling[k.lower()] = k

    def get(self, name: str) -> str | None:
        return self.values.get(name.lower())

    def has(self, name: str) -> bool:
        return name.lower() in self.values


def _parse_bool(opts: _Opts, name: str, default: bool) -> bool:
    v = opts.get(name)
    if v is None:
        return default
    if v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise _err(name, f"expected true or false, got {v!r}")


def _parse_positive_int(opts: _Opts, name: str) -> int | None:
    v = opts.get(name)
    if v is None:
        return None
    try:
        n = int(v.strip())
    except ValueError:
        raise _err(name, f"expected a positive integer, got {v!r}") from None
    if n <= 0:
        raise _err(name, f"expected a positive integer, got {v!r}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(name: str, value: str) -> int:
    """'15m', '10s', '500ms', '1h', '2d'; a bare number is milliseconds."""
    m = _DURATION.match(value)
    if not m:
        raise _err(name, f"expected a duration such as 500ms, 10s, 15m or 1h, got {value!r}")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _parse_json_object(name: str, value: str) -> dict[str, Any]:
    try:
        obj = json.loads(value)
    except json.JSONDecodeError as e:
        raise _err(name, f"not valid JSON ({e.msg} at char {e.pos}): {value!r}") from None
    if not isinstance(obj, dict):
        raise _err(name, f"expected a JSON object, got {value!r}")
    return obj


def parse_partition_map(name: str, value: str) -> dict[TopicPartitionKey, int]:
    """'{"t":{"0":23,"1":-2}}' -> {("t", 0): 23, ("t", 1): -2}."""
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in _parse_json_object(name, value).items():
        if not isinstance(parts, dict) or not parts:
            raise _err(name, f"topic {topic!r}: expected an object of partition -> number")
        for p, n in parts.items():
            try:
                pid = int(p)
            except (TypeError, ValueError):
                raise _err(name, f"topic {topic!r}: partition {p!r} is not an integer") from None
            if isinstance(n, bool) or not isinstance(n, int):
                raise _err(name, f"{topic}-{pid}: expected an integer, got {n!r}")
            out[(topic, pid)] = n
    return out


def parse_assign(value: str) -> list[TopicPartitionKey]:
    """'{"t":[0,1]}' -> [("t", 0), ("t", 1)]."""
    out: list[TopicPartitionKey] = []
    for topic, parts in _parse_json_object("assign", value).items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise _err("assign", f"topic {topic!r}: expected a list of partition numbers")
        out.extend((topic, p) for p in parts)
    if not out:
        raise _err("assign", "assigns no partitions")
    return out


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: a kind plus its argument.

    kind: "earliest" | "latest" | "offsets" (per-partition offsets, -2/-1 allowed)
          | "timestamp" (one timestamp for all partitions)
          | "timestamps" (per-partition timestamps)
    """

    kind: str
    offsets: dict[TopicPartitionKey, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    option: str = ""


def _parse_offset_spec(opts: _Opts, prefix: str, default: str) -> OffsetSpec | None:
    ts_name, by_ts_name, off_name = f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets"
    # Precedence as in Spark: *Timestamp > *OffsetsByTimestamp > *Offsets.
    if opts.has(ts_name):
        raw = opts.get(ts_name) or ""
        try:
            ts = int(raw.strip())
        except ValueError:
            raise _err(ts_name, f"expected milliseconds since the epoch, got {raw!r}") from None
        if ts < 0:
            raise _err(ts_name, f"must not be negative, got {ts}")
        return OffsetSpec("timestamp", timestamp_ms=ts, option=ts_name)
    if opts.has(by_ts_name):
        m = parse_partition_map(by_ts_name, opts.get(by_ts_name) or "")
        for (t, p), ts in m.items():
            if ts < 0:
                raise _err(by_ts_name, f"{t}-{p}: timestamp must not be negative, got {ts}")
        return OffsetSpec("timestamps", offsets=m, option=by_ts_name)
    text = opts.get(off_name)
    if text is None:
        return OffsetSpec(default, option=off_name) if default else None
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word, option=off_name)
    m = parse_partition_map(off_name, text)
    for (t, p), off in m.items():
        if off < EARLIEST:
            raise _err(off_name, f"{t}-{p}: offset {off} is not an offset, -1 (latest) or -2 (earliest)")
    return OffsetSpec("offsets", offsets=m, option=off_name)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    strategy: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartitionKey, ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    starting_by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: str = "read_uncommitted"
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    group_id_prefix: str = "spark-odradek"
    kafka: dict[str, str] = field(default_factory=dict)  # librdkafka settings, prefix removed
    remote_read: str = "auto"  # "auto" | "direct" | "off"
    remote_url: str | None = None  # remote.rsm.config.url
    remote_fs: dict[str, Any] = field(default_factory=dict)  # remote.rsm.config.fs.*
    broker_read_path: str = "auto"  # "auto" | "fetch" | "consumer"
    # kafka.security.protocol, kafka.sasl.*, kafka.ssl.* as given (prefix removed)
    security: dict[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


def _kafka_params(opts: _Opts) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in opts.values.items():
        if not key.startswith(KAFKA_PREFIX):
            continue
        if key in UNSUPPORTED_KAFKA_OPTIONS:
            raise _err(opts.spelling[key], f"not supported: {UNSUPPORTED_KAFKA_OPTIONS[key]}")
        # librdkafka keys are lower case, so the case-insensitive map loses nothing.
        out[key[len(KAFKA_PREFIX):]] = value
    if any(k == "security.protocol" or k.startswith(("sasl.", "ssl.")) for k in out):
        out = _security_params(out, opts)
    return out


def _security_params(kafka: dict[str, str], opts: _Opts) -> dict[str, str]:
    """Kafka client security keys (`kafka.security.protocol`, `kafka.sasl.jaas.config`,
    `kafka.ssl.truststore.location`, ...) as librdkafka settings, by the mapping the
    CLI's --command-config uses (security/client_properties.py). Checked here, on the
    driver: files are read and passwords tried before any job runs. The result is plain
    strings, so executors get the same settings (PEM and PKCS12 trust stores as inline
    PEM or a path: the files a path names must exist on the executors too, as with
    Spark's Kafka connector)."""
    from odradek.security.client_properties import (
        HANDLED_KEYS,
        JAVA_ONLY_KEYS,
        ConfigError,
        client_security,
    )

    try:
        security = client_security(kafka)
    except ConfigError as e:
        name = KAFKA_PREFIX + e.key
        raise _err(opts.spelling.get(name, name), e.reason) from None
    rest = {k: v for k, v in kafka.items() if k not in HANDLED_KEYS and k not in JAVA_ONLY_KEYS}
    return {**security.librdkafka, **rest}


def _check_known(opts: _Opts, known: frozenset[str], what: str) -> None:
    for key in opts.values:
        if key.startswith(KAFKA_PREFIX) or key in known:
            continue
        if what == "source" and key.startswith(REMOTE_FS_PREFIX):
            continue
        if what == "sink" and key in SINK_REFUSED:
            raise _err(CANONICAL[key], f"not a sink option: {SINK_REFUSED[key]}")
        names = sorted(CANONICAL[k] for k in known - {"path", "checkpointlocation"})
        close = difflib.get_close_matches(key, [n.lower() for n in names], n=1, cutoff=0.75)
        hint = f"; did you mean '{CANONICAL[close[0]]}'?" if close else ""
        raise _err(
            opts.spelling[key],
            f"unknown {what} option{hint} (known: kafka.*, "
            + (f"{REMOTE_FS_PREFIX}*, " if what == "source" else "")
            + ", ".join(names) + ")",
        )


def _bootstrap(opts: _Opts) -> str:
    servers = (opts.get(BOOTSTRAP) or "").strip()
    if not servers:
        raise _err(BOOTSTRAP, "required (host:port[,host:port...])")
    return servers


def parse_source_options(raw: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """streaming=None checks what batch and streaming reads share (for schema())."""
    opts = _Opts(raw)
    _check_known(opts, SOURCE_OPTIONS, "source")
    servers = _bootstrap(opts)

    given = [s for s in ("subscribe", "subscribePattern", "assign") if opts.has(s)]
    if len(given) != 1:
        raise _err(
            "subscribe|subscribePattern|assign",
            f"exactly one of subscribe, subscribePattern, assign must be set; got {given or 'none'}",
        )
    strategy = given[0]
    topics: tuple[str, ...] = ()
    pattern = ""
    assigned: tuple[TopicPartitionKey, ...] = ()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in (opts.get("subscribe") or "").split(",") if t.strip())
        if not topics:
            raise _err("subscribe", "expected a comma-separated list of topic names")
    elif strategy == "subscribePattern":
        pattern = (opts.get("subscribePattern") or "").strip()
        if not pattern:
            raise _err("subscribePattern", "expected a regular expression")
        try:
            re.compile(pattern)
        except re.error as e:
            raise _err("subscribePattern", f"not a valid regular expression: {e}") from None
    else:
        assigned = tuple(parse_assign(opts.get("assign") or ""))

    starting = _parse_offset_spec(opts, "starting", "earliest" if streaming is False else "latest")
    assert starting is not None
    ending = OffsetSpec("latest", option="endingOffsets")
    if streaming is None:
        pass
    elif streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if opts.has(name):
                raise _err(name, "not supported in streaming queries (only in batch reads)")
    else:
        ending_spec = _parse_offset_spec(opts, "ending", "latest")
        assert ending_spec is not None
        ending = ending_spec
        # A batch range needs a fixed start and a fixed end.
        if starting.kind == "latest" or (
            starting.kind == "offsets" and any(v == LATEST for v in starting.offsets.values())
        ):
            raise _err(starting.option, "starting offset can't be latest (-1) for batch queries")
        if ending.kind == "earliest" or (
            ending.kind == "offsets" and any(v == EARLIEST for v in ending.offsets.values())
        ):
            raise _err(ending.option, "ending offset can't be earliest (-2) for batch queries")
        if strategy == "assign" and starting.kind in ("offsets", "timestamps"):
            _check_covers(starting, assigned)
        if strategy == "assign" and ending.kind in ("offsets", "timestamps"):
            _check_covers(ending, assigned)
    if streaming and strategy == "assign" and starting.kind in ("offsets", "timestamps"):
        _check_covers(starting, assigned)

    by_ts_strategy = (opts.get("startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if by_ts_strategy not in ("error", "latest"):
        raise _err("startingOffsetsByTimestampStrategy", f"expected error or latest, got {by_ts_strategy!r}")

    max_per_trigger = _parse_positive_int(opts, "maxOffsetsPerTrigger")
    min_per_trigger = _parse_positive_int(opts, "minOffsetsPerTrigger")
    if max_per_trigger and min_per_trigger and min_per_trigger > max_per_trigger:
        raise _err(
            "minOffsetsPerTrigger",
            f"{min_per_trigger} is larger than maxOffsetsPerTrigger {max_per_trigger}",
        )
    delay_raw = opts.get("maxTriggerDelay")
    delay_ms = (
        DEFAULT_MAX_TRIGGER_DELAY_MS if delay_raw is None else parse_duration_ms("maxTriggerDelay", delay_raw)
    )

    kafka = _kafka_params(opts)
    isolation = kafka.pop("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ISOLATION_LEVELS:
        raise _err("kafka.isolation.level", f"expected one of {ISOLATION_LEVELS}, got {isolation!r}")
    kafka.pop("bootstrap.servers", None)
    poll_timeout = _parse_positive_int(opts, "kafkaConsumer.pollTimeoutMs")
    remote_read, remote_url, remote_fs = _parse_remote(opts, streaming)
    read_path = (opts.get("brokerReadPath") or "auto").strip().lower()
    if read_path not in BROKER_READ_PATHS:
        raise _err("brokerReadPath", f"expected one of {BROKER_READ_PATHS}, got {read_path!r}")
    # The security keys as given (Kafka's names), for the Fetch client on the executors.
    security = _security_keys(opts)

    return SourceOptions(
        bootstrap_servers=servers,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=by_ts_strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay_ms,
        fail_on_data_loss=_parse_bool(opts, "failOnDataLoss", True),
        min_partitions=_parse_positive_int(opts, "minPartitions"),
        max_records_per_partition=_parse_positive_int(opts, "maxRecordsPerPartition"),
        include_headers=_parse_bool(opts, "includeHeaders", False),
        isolation_level=isolation,
        poll_timeout_ms=poll_timeout or DEFAULT_POLL_TIMEOUT_MS,
        group_id_prefix=(opts.get("groupIdPrefix") or "spark-odradek").strip(),
        kafka=kafka,
        remote_read=remote_read,
        remote_url=remote_url,
        remote_fs=remote_fs,
        broker_read_path=read_path,
        security=security,
    )


def _parse_remote(opts: _Opts, streaming: bool | None) -> tuple[str, str | None, dict[str, Any]]:
    """remoteRead, remote.rsm.config.url and remote.rsm.config.fs.* (values
    true/false become booleans, a JSON object a dict; the rest stay strings)."""
    mode = (opts.get("remoteRead") or "auto").strip().lower()
    if mode not in REMOTE_READ_MODES:
        raise _err("remoteRead", f"expected one of {REMOTE_READ_MODES}, got {mode!r}")
    url = (opts.get("remote.rsm.config.url") or "").strip() or None
    fs: dict[str, Any] = {}
    for key, value in opts.values.items():
        if not key.startswith(REMOTE_FS_PREFIX):
            continue
        name = opts.spelling[key][len(REMOTE_FS_PREFIX):]
        if not name:
            raise _err(opts.spelling[key], "names no filesystem option")
        text = value.strip()
        if text.lower() in ("true", "false"):
            fs[name] = text.lower() == "true"
        elif text.startswith("{"):
            fs[name] = _parse_json_object(opts.spelling[key], text)
        else:
            fs[name] = value
    if streaming and mode == "direct":
        raise _err("remoteRead", "direct is for batch reads; streaming queries read through the brokers")
    if mode == "direct" and not url:
        raise _err("remoteRead", "direct needs remote.rsm.config.url (the remote tier's fsspec URL)")
    if fs and not url:
        raise _err(next(opts.spelling[k] for k in opts.values if k.startswith(REMOTE_FS_PREFIX)),
                   "set remote.rsm.config.url too")
    return mode, url, fs


def _check_covers(spec: OffsetSpec, assigned: tuple[TopicPartitionKey, ...]) -> None:
    missing = sorted(set(assigned) - set(spec.offsets))
    extra = sorted(set(spec.offsets) - set(assigned))
    if missing or extra:
        raise _err(
            spec.option,
            "must name exactly the assigned partitions (use -1 for latest, -2 for earliest); "
            f"missing {[f'{t}-{p}' for t, p in missing]}, not assigned {[f'{t}-{p}' for t, p in extra]}",
        )


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    delivery_guarantee: str
    kafka: dict[str, str] = field(default_factory=dict)
    # kafka.acks: "all" (default; the idempotent producer) or 0/1 for batch writes and
    # deliveryGuarantee=at-least-once (then without idempotence, as the Java client)
    acks: str = "all"
    # "batch": odradek's bulk producer (Arrow to record batches, bulk_writer.py);
    # "client": a librdkafka producer, one Python object per row (before issue 17)
    producer_path: str = "batch"
    compression: str = "none"  # kafka.compression.type (or .codec)
    # kafka.security.protocol, kafka.sasl.*, kafka.ssl.* as given (prefix removed)
    security: dict[str, str] = field(default_factory=dict)


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    opts = _Opts(raw)
    _check_known(opts, SINK_OPTIONS, "sink")
    servers = _bootstrap(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise _err("topic", "must not be empty")
    guarantee = (opts.get("deliveryGuarantee") or "auto").strip().lower()
    if guarantee not in DELIVERY_GUARANTEES:
        raise _err("deliveryGuarantee", f"expected one of {DELIVERY_GUARANTEES}, got {guarantee!r}")
    kafka = _kafka_params(opts)
    kafka.pop("bootstrap.servers", None)
    acks = kafka.pop("acks", "all").strip().lower()
    if acks not in ACKS:
        raise _err(opts.spelling.get("kafka.acks", "kafka.acks"),
                   f"expected one of all, -1, 0, 1; got {acks!r}")
    acks = "all" if acks == "-1" else acks
    if acks != "all" and guarantee == "exactly-once":
        raise _err(opts.spelling.get("kafka.acks", "kafka.acks"),
                   f"acks={acks} writes without the idempotent producer, so it needs "
                   "deliveryGuarantee=at-least-once (exactly-once needs acks=all)")
    security = _security_keys(opts)
    compression = (kafka.get("compression.type") or kafka.get("compression.codec")
                   or "none").strip().lower()
    path = (opts.get("producerPath") or "auto").strip().lower()
    if path not in PRODUCER_PATHS:
        raise _err("producerPath", f"expected one of {PRODUCER_PATHS}, got {path!r}")
    # Why the bulk producer cannot take this write, if it cannot.
    others = sorted(opts.spelling[k] for k in opts.values
                    if k.startswith(KAFKA_PREFIX) and k[len(KAFKA_PREFIX):] not in security
                    and k[len(KAFKA_PREFIX):] not in BULK_KAFKA_KEYS
                    and k[len(KAFKA_PREFIX):] not in ("acks", "bootstrap.servers"))
    blocker = ""
    if acks == "0":
        blocker = "kafka.acks=0 (no answer to wait for: the client path)"
    elif compression not in COMPRESSION_TYPES:
        blocker = f"kafka.compression.type={compression} (known: {', '.join(COMPRESSION_TYPES)})"
    elif others:
        blocker = f"{', '.join(others)} (librdkafka settings: the client path)"
    if path == "batch" and blocker:
        raise _err("producerPath", f"batch cannot honour {blocker}; "
                                   "use producerPath=client or auto")
    return SinkOptions(
        bootstrap_servers=servers,
        topic=topic.strip() if topic else None,
        delivery_guarantee=guarantee,
        kafka=kafka,
        acks=acks,
        producer_path="client" if path == "client" or blocker else "batch",
        compression=compression,
        security=security,
    )


def _security_keys(opts: _Opts) -> dict[str, str]:
    """The security keys as given (Kafka's names, prefix removed), for the clients
    of odradek's own on the executors (the Fetch client, the bulk producer)."""
    return {k[len(KAFKA_PREFIX):]: v for k, v in opts.values.items()
            if k.startswith(KAFKA_PREFIX)
            and (k == KAFKA_PREFIX + "security.protocol"
                 or k.startswith((KAFKA_PREFIX + "sasl.", KAFKA_PREFIX + "ssl.")))}
