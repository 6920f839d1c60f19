"""Broker configuration in Kafka's own words: `server.properties` keys, types and defaults.

Theory of operation. `BrokerConfig.load(path, overrides)` reads a Java .properties file
(`parse_properties`), applies `--override key=value` pairs on top, and checks every key
against BROKER_CONFIGS, the table of broker keys odradek models (Kafka's name, type,
default, validator, doc). The result is an immutable object with typed attributes for
the keys the broker uses (`config.num_partitions`, `config.log_dirs`, ...), a generic
`get(key)`, `items()` for DescribeConfigs, and `log_config()`, the broker-wide defaults
mapped onto the topic-level LogConfig.

Rules for keys, because a broker that starts with a typo in its config is worse than one
that refuses to start:

- a key in BROKER_CONFIGS is parsed and validated; a bad value is a ConfigError;
- a key in IGNORED_KAFKA_CONFIGS is a real Kafka broker key odradek does not act on
  (yet): accepted, kept as text, and listed in one warning at start-up;
- `listener.name.<listener>.<key>` per-listener overrides are kept as text for the
  security layer (`listener_overrides()`);
- `zookeeper.connect` is an error: odradek runs KRaft only, and a ZooKeeper-mode
  server.properties would otherwise start a broker with an unintended cluster layout;
- anything else is an unknown key and a ConfigError naming it.

Where odradek's defaults differ from Kafka's (so that `odradek server` with no config
starts a working single node), the table says so in DIFFERENCES_FROM_KAFKA.
Precedence as in Kafka: `log.roll.ms` over `log.roll.hours`, `log.roll.jitter.ms` over
`log.roll.jitter.hours`, `log.retention.ms` over `.minutes` over `.hours`, `log.dirs`
over `log.dir`; `node.id` and `broker.id` are one setting under two names.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from odradek.configdef import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigType,
    Importance,
    at_least,
    between,
    closest,
    format_value,
    one_of,
)
from odradek.storage.log_config import LogConfig

__all__ = [
    "BROKER_CONFIGS",
    "DIFFERENCES_FROM_KAFKA",
    "IGNORED_KAFKA_CONFIGS",
    "BrokerConfig",
    "ConfigError",
    "Endpoint",
    "parse_properties",
]

log = logging.getLogger(__name__)

B, S, I, SH, L, D, LI, P, C = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.SHORT,
    ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST, ConfigType.PASSWORD,
    ConfigType.CLASS,
)
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# The smallest segment that can hold one record (Kafka: LegacyRecord.RECORD_OVERHEAD_V0).
MIN_SEGMENT_BYTES = 14

# key -> (odradek default, Kafka default, why). Shown by `odradek server --help`.
DIFFERENCES_FROM_KAFKA: dict[str, tuple[str, str, str]] = {
    "node.id": ("1", "-1 (required)", "a config-less single node needs an id"),
    "process.roles": ("broker,controller", "(required)", "a single node is a one-voter quorum"),
    "listeners": ("PLAINTEXT://127.0.0.1:9092", "PLAINTEXT://:9092",
                  "a config-less node listens on loopback only"),
    "log.dir": ("./data", "/tmp/kafka-logs", "data lives next to where it was started"),
    "listener.security.protocol.map": (
        ("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
         "SASL_SSL:SASL_SSL"),
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "a CONTROLLER listener works without mapping it"),
    "cluster.id": ("(generated)", "(none: set by kafka-storage format)",
                   "odradek formats log dirs itself on first start"),
}


def _d(name: str, type_: ConfigType, default: object, doc: str,
       importance: Importance = MEDIUM, validator: object = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, importance, validator)  # type: ignore[arg-type]


_DEFS: list[ConfigDef] = [
    # --- identity and roles ---
    _d("node.id", I, 1, "The id of this node in the cluster, as a broker and as a "
       "controller voter. Must be unique.", HIGH, at_least(0)),
    _d("broker.id", I, None, "Older name of node.id; if both are set they must agree.", HIGH),
    _d("process.roles", LI, ["broker", "controller"], "What this node does: 'broker', "
       "'controller' or both (combined mode).", HIGH, one_of("broker", "controller")),
    _d("cluster.id", S, None, "odradek only: the cluster id written to meta.properties of "
       "new log dirs; generated when unset. Existing log dirs must match it.", LOW),
    _d("broker.rack", S, None, "Rack (failure domain) of this broker, used in replica "
       "placement and follower fetching.", MEDIUM),
    # --- listeners ---
    _d("listeners", S, "PLAINTEXT://127.0.0.1:9092", "Comma-separated NAME://host:port "
       "addresses to listen on. An empty host binds the default interface, 0.0.0.0 all.",
       HIGH),
    _d("advertised.listeners", S, None, "Addresses given to clients in metadata, when they "
       "differ from listeners. Defaults to listeners.", HIGH),
    _d("listener.security.protocol.map", S, DIFFERENCES_FROM_KAFKA[
        "listener.security.protocol.map"][0], "NAME:PROTOCOL pairs saying which security "
       "protocol each listener speaks.", LOW),
    _d("inter.broker.listener.name", S, None, "Listener that brokers use to reach each "
       "other. Defaults to the listener for security.inter.broker.protocol.", MEDIUM),
    _d("security.inter.broker.protocol", S, "PLAINTEXT", "Security protocol between "
       "brokers when inter.broker.listener.name is not set.", MEDIUM,
       one_of(*SECURITY_PROTOCOLS)),
    _d("controller.listener.names", S, None, "Comma-separated names of the listeners the "
       "controller uses.", HIGH),
    _d("controller.quorum.voters", LI, [], "Static controller quorum: id@host:port,...", HIGH),
    _d("controller.quorum.bootstrap.servers", LI, [], "host:port addresses used to find "
       "the controller quorum (dynamic quorum).", HIGH),
    # --- storage ---
    _d("log.dirs", S, None, "Comma-separated directories holding partition data. Overrides "
       "log.dir.", HIGH),
    _d("log.dir", S, "./data", "The partition data directory, used when log.dirs is not "
       "set.", HIGH),
    _d("metadata.log.dir", S, None, "Directory of the metadata (KRaft) log; defaults to the "
       "first log dir.", HIGH),
    _d("num.recovery.threads.per.data.dir", I, 1, "Threads per log dir for recovery at "
       "start-up and flushing at shutdown.", HIGH, at_least(1)),
    # --- topic defaults ---
    _d("num.partitions", I, 1, "Partitions of an auto-created topic or one created without "
       "a count.", MEDIUM, at_least(1)),
    _d("default.replication.factor", I, 1, "Replication factor of auto-created topics.",
       MEDIUM),
    _d("auto.create.topics.enable", B, True, "Create a topic on Metadata/Produce for an "
       "unknown topic.", HIGH),
    _d("delete.topic.enable", B, True, "Allow DeleteTopics; when false it is refused.", HIGH),
    _d("log.segment.bytes", I, 1073741824, "Largest size of one segment file before a new "
       "one is rolled.", HIGH, at_least(MIN_SEGMENT_BYTES)),
    _d("log.roll.ms", L, None, "Longest time before a new segment is rolled; overrides "
       "log.roll.hours.", HIGH),
    _d("log.roll.hours", I, 168, "Longest time in hours before a new segment is rolled.",
       HIGH, at_least(1)),
    _d("log.roll.jitter.ms", L, None, "Random jitter subtracted from the roll time; "
       "overrides log.roll.jitter.hours.", HIGH),
    _d("log.roll.jitter.hours", I, 0, "Roll jitter in hours.", HIGH, at_least(0)),
    _d("log.index.size.max.bytes", I, 10485760, "Largest size of an offset or time index "
       "file; a full index rolls the segment.", MEDIUM, at_least(4)),
    _d("log.index.interval.bytes", I, 4096, "Bytes of log between two offset index "
       "entries.", MEDIUM, at_least(0)),
    _d("log.retention.ms", L, None, "How long to keep a segment before deleting it "
       "(-1: forever). Overrides log.retention.minutes and log.retention.hours.", HIGH),
    _d("log.retention.minutes", I, None, "Retention in minutes; overrides "
       "log.retention.hours.", HIGH),
    _d("log.retention.hours", I, 168, "Retention in hours.", HIGH),
    _d("log.retention.bytes", L, -1, "Largest size of a partition log before old segments "
       "are deleted (-1: no limit).", HIGH),
    _d("log.retention.check.interval.ms", L, 300000, "How often retention is checked.",
       MEDIUM, at_least(1)),
    _d("log.flush.interval.messages", L, LONG_MAX, "Messages appended to a partition before "
       "it is fsynced.", HIGH, at_least(1)),
    _d("log.flush.interval.ms", L, None, "Longest time a message stays unflushed; defaults "
       "to log.flush.scheduler.interval.ms.", HIGH),
    _d("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the flusher checks "
       "whether a log needs flushing.", HIGH),
    _d("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often the recovery point "
       "checkpoint is written.", HIGH, at_least(0)),
    _d("log.flush.start.offset.checkpoint.interval.ms", I, 60000, "How often the log start "
       "offset checkpoint is written.", HIGH, at_least(0)),
    _d("log.cleanup.policy", LI, ["delete"], "What happens to old segments: 'delete' "
       "(retention), 'compact' (keep the last value per key), or both.", MEDIUM,
       one_of(*CLEANUP_POLICIES)),
    _d("log.message.timestamp.type", S, "CreateTime", "Whether a batch keeps the producer's "
       "timestamp or gets the broker's append time.", MEDIUM, one_of(*TIMESTAMP_TYPES)),
    _d("log.message.timestamp.difference.max.ms", L, LONG_MAX, "Deprecated: largest allowed "
       "gap between a CreateTime timestamp and the broker's clock.", MEDIUM, at_least(0)),
    _d("log.message.timestamp.before.max.ms", L, LONG_MAX, "How far in the past a "
       "CreateTime timestamp may be.", MEDIUM, at_least(0)),
    _d("log.message.timestamp.after.max.ms", L, LONG_MAX, "How far in the future a "
       "CreateTime timestamp may be.", MEDIUM, at_least(0)),
    _d("log.message.downconversion.enable", B, True, "Whether old fetch versions get "
       "down-converted data.", LOW),
    _d("log.segment.delete.delay.ms", L, 60000, "Time between marking a segment deleted "
       "and removing its files.", HIGH, at_least(0)),
    _d("log.preallocate", B, False, "Preallocate segment files.", MEDIUM),
    _d("log.local.retention.ms", L, -2, "Local retention of tiered topics (-2: same as "
       "log.retention.ms).", MEDIUM, at_least(-2)),
    _d("log.local.retention.bytes", L, -2, "Local size limit of tiered topics (-2: same as "
       "log.retention.bytes).", MEDIUM, at_least(-2)),
    _d("remote.log.storage.system.enable", B, False, "Enable the remote (tiered) storage "
       "system on this broker.", MEDIUM),
    # --- cleaner ---
    _d("log.cleaner.enable", B, True, "Run the log cleaner (needed for compacted topics).",
       MEDIUM),
    _d("log.cleaner.threads", I, 1, "Cleaner threads.", MEDIUM, at_least(0)),
    _d("log.cleaner.io.max.bytes.per.second", D, DOUBLE_MAX, "Cleaner I/O throttle.",
       MEDIUM),
    _d("log.cleaner.dedupe.buffer.size", L, 134217728, "Memory for the cleaner's key map, "
       "over all threads.", MEDIUM),
    _d("log.cleaner.io.buffer.size", I, 524288, "Memory for cleaner I/O buffers, over all "
       "threads.", MEDIUM, at_least(0)),
    _d("log.cleaner.io.buffer.load.factor", D, 0.9, "Fill ratio of the dedupe map.", MEDIUM),
    _d("log.cleaner.backoff.ms", L, 15000, "Sleep when there is nothing to clean.", MEDIUM,
       at_least(0)),
    _d("log.cleaner.min.cleanable.ratio", D, 0.5, "Smallest dirty/total ratio that makes a "
       "log eligible for cleaning.", MEDIUM, between(0, 1)),
    _d("log.cleaner.delete.retention.ms", L, 86400000, "How long tombstones are kept in a "
       "compacted log.", MEDIUM, at_least(0)),
    _d("log.cleaner.min.compaction.lag.ms", L, 0, "Least time a message stays uncompacted.",
       MEDIUM, at_least(0)),
    _d("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Most time a message stays "
       "uncompacted.", MEDIUM, at_least(1)),
    # --- request limits and threads ---
    _d("message.max.bytes", I, 1048588, "Largest record batch the broker accepts "
       "(topic-level max.message.bytes).", HIGH, at_least(0)),
    _d("socket.request.max.bytes", I, 104857600, "Largest request frame.", HIGH,
       at_least(1)),
    _d("socket.send.buffer.bytes", I, 102400, "SO_SNDBUF of sockets (-1: OS default).",
       HIGH),
    _d("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of sockets (-1: OS default).",
       HIGH),
    _d("socket.listen.backlog.size", I, 50, "Pending connection backlog per listener.",
       MEDIUM, at_least(1)),
    _d("num.network.threads", I, 3, "Network threads.", HIGH, at_least(1)),
    _d("num.io.threads", I, 8, "Request handler threads.", HIGH, at_least(1)),
    _d("background.threads", I, 10, "Threads for background work.", HIGH, at_least(1)),
    _d("queued.max.requests", I, 500, "Requests queued for handlers before reading from "
       "the network stops.", HIGH, at_least(1)),
    _d("queued.max.request.bytes", L, -1, "Bytes of queued requests before reading stops "
       "(-1: no limit).", MEDIUM),
    _d("connections.max.idle.ms", L, 600000, "Idle connections are closed after this.",
       MEDIUM),
    _d("max.connections", I, INT_MAX, "Most connections the broker allows.", MEDIUM,
       at_least(0)),
    _d("max.connections.per.ip", I, INT_MAX, "Most connections from one address.", MEDIUM,
       at_least(0)),
    _d("request.timeout.ms", I, 30000, "Timeout of requests this node sends.", HIGH,
       at_least(0)),
    _d("fetch.max.bytes", I, 57671680, "Largest Fetch response the broker returns.", MEDIUM,
       at_least(1024)),
    _d("compression.type", S, "producer", "Final compression of a topic's data; 'producer' "
       "keeps what the producer sent.", HIGH, one_of(*COMPRESSION_TYPES)),
    _d("compression.gzip.level", I, -1, "gzip level when the broker compresses.", MEDIUM),
    _d("compression.lz4.level", I, 9, "lz4 level when the broker compresses.", MEDIUM,
       between(1, 17)),
    _d("compression.zstd.level", I, 3, "zstd level when the broker compresses.", MEDIUM,
       between(-131072, 22)),
    # --- replication ---
    _d("min.insync.replicas", I, 1, "In-sync replicas needed for an acks=all write.", HIGH,
       at_least(1)),
    _d("unclean.leader.election.enable", B, False, "Allow an out-of-sync replica to become "
       "leader, losing data.", HIGH),
    _d("replica.lag.time.max.ms", L, 30000, "A follower that has not caught up for this "
       "long leaves the ISR.", HIGH),
    _d("replica.fetch.max.bytes", I, 1048576, "Bytes per partition a follower fetches.",
       MEDIUM, at_least(0)),
    _d("replica.fetch.response.max.bytes", I, 10485760, "Bytes per follower fetch "
       "response.", MEDIUM, at_least(0)),
    _d("replica.fetch.wait.max.ms", I, 500, "Longest wait of a follower fetch.", MEDIUM),
    _d("replica.fetch.min.bytes", I, 1, "Least bytes a follower fetch waits for.", MEDIUM),
    _d("replica.fetch.backoff.ms", I, 1000, "Sleep after a follower fetch error.", MEDIUM,
       at_least(0)),
    _d("replica.socket.timeout.ms", I, 30000, "Socket timeout of follower fetches.", HIGH),
    _d("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often high "
       "watermarks are checkpointed.", HIGH),
    _d("num.replica.fetchers", I, 1, "Fetcher threads per source broker.", HIGH),
    _d("auto.leader.rebalance.enable", B, True, "Move leadership back to preferred "
       "replicas.", HIGH),
    _d("leader.imbalance.check.interval.seconds", L, 300, "How often leadership balance is "
       "checked.", HIGH, at_least(1)),
    _d("leader.imbalance.per.broker.percentage", I, 10, "Allowed leader imbalance per "
       "broker, percent.", HIGH),
    # --- internal topics, groups, transactions ---
    _d("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets.", HIGH,
       at_least(1)),
    _d("offsets.topic.replication.factor", SH, 3, "Replication factor of __consumer_offsets "
       "(capped at the live broker count when it is created).", HIGH, at_least(1)),
    _d("offsets.topic.segment.bytes", I, 104857600, "Segment size of __consumer_offsets.",
       HIGH, at_least(1)),
    _d("offsets.retention.minutes", I, 10080, "How long committed offsets of an empty group "
       "are kept.", HIGH, at_least(1)),
    _d("offsets.retention.check.interval.ms", L, 600000, "How often stale offsets are "
       "looked for.", HIGH, at_least(1)),
    _d("offsets.commit.timeout.ms", I, 5000, "Timeout of an offset commit's replication.",
       HIGH, at_least(1)),
    _d("offsets.load.buffer.size", I, 5242880, "Read buffer when loading offsets.", HIGH,
       at_least(1)),
    _d("offset.metadata.max.bytes", I, 4096, "Largest metadata string of a committed "
       "offset.", HIGH),
    _d("transaction.state.log.num.partitions", I, 50, "Partitions of __transaction_state.",
       HIGH, at_least(1)),
    _d("transaction.state.log.replication.factor", SH, 3, "Replication factor of "
       "__transaction_state.", HIGH, at_least(1)),
    _d("transaction.state.log.segment.bytes", I, 104857600, "Segment size of "
       "__transaction_state.", HIGH, at_least(1)),
    _d("transaction.state.log.min.isr", I, 2, "min.insync.replicas of "
       "__transaction_state.", HIGH, at_least(1)),
    _d("transaction.state.log.load.buffer.size", I, 5242880, "Read buffer when loading "
       "transactions.", HIGH, at_least(1)),
    _d("transaction.max.timeout.ms", I, 900000, "Largest transaction timeout a producer may "
       "ask for.", HIGH, at_least(1)),
    _d("transactional.id.expiration.ms", I, 604800000, "A transactional id unused this long "
       "expires.", HIGH, at_least(1)),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, "How often "
       "timed-out transactions are aborted.", LOW, at_least(1)),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, "How often "
       "expired transactional ids are removed.", LOW, at_least(1)),
    _d("producer.id.expiration.ms", I, 86400000, "Idempotent producer state unused this "
       "long expires.", LOW, at_least(1)),
    _d("producer.id.expiration.check.interval.ms", I, 600000, "How often expired producer "
       "ids are removed.", LOW, at_least(1)),
    _d("group.initial.rebalance.delay.ms", I, 3000, "Wait for more members before the first "
       "rebalance of an empty group.", MEDIUM),
    _d("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member may "
       "ask for.", MEDIUM),
    _d("group.max.session.timeout.ms", I, 1800000, "Largest session timeout a member may "
       "ask for.", MEDIUM),
    _d("group.max.size", I, INT_MAX, "Most members in one group.", MEDIUM, at_least(1)),
    # --- KRaft ---
    _d("broker.heartbeat.interval.ms", I, 2000, "Broker heartbeat to the controller.",
       MEDIUM),
    _d("broker.session.timeout.ms", I, 9000, "A broker without heartbeats this long is "
       "fenced.", MEDIUM),
    _d("controller.quorum.election.timeout.ms", I, 1000, "Raft election timeout.", HIGH),
    _d("controller.quorum.fetch.timeout.ms", I, 2000, "Raft fetch timeout before a voter "
       "becomes a candidate.", HIGH),
    _d("controller.quorum.election.backoff.max.ms", I, 1000, "Largest Raft election "
       "backoff.", HIGH),
    _d("controller.quorum.append.linger.ms", I, 25, "Raft append linger.", MEDIUM),
    _d("controller.quorum.request.timeout.ms", I, 2000, "Raft request timeout.", MEDIUM),
    _d("controller.quorum.retry.backoff.ms", I, 20, "Raft retry backoff.", LOW),
    _d("metadata.log.segment.bytes", I, 1073741824, "Segment size of the metadata log.",
       HIGH, at_least(12)),
    _d("metadata.log.segment.ms", L, 604800000, "Roll time of the metadata log.", HIGH),
    _d("metadata.max.retention.bytes", L, 104857600, "Metadata log size kept beyond the "
       "latest snapshot.", HIGH),
    _d("metadata.max.retention.ms", L, 604800000, "Metadata log age kept beyond the latest "
       "snapshot.", HIGH),
    # --- security (parsed here, used by the security layer) ---
    _d("authorizer.class.name", S, "", "Authorizer; empty means no authorization.", LOW),
    _d("super.users", S, None, "Semicolon-separated principals that pass every ACL check.",
       LOW),
    _d("allow.everyone.if.no.acl.found", B, False, "Allow access to a resource with no "
       "ACLs.", LOW),
    _d("sasl.enabled.mechanisms", LI, ["GSSAPI"], "SASL mechanisms the broker offers.",
       MEDIUM),
    _d("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism between "
       "brokers.", MEDIUM),
    _d("sasl.mechanism.controller.protocol", S, "GSSAPI", "SASL mechanism to the "
       "controller.", MEDIUM),
    _d("ssl.keystore.location", S, None, "Key store (or PEM) file of this node.", HIGH),
    _d("ssl.keystore.password", P, None, "Key store password.", HIGH),
    _d("ssl.keystore.type", S, "JKS", "Key store format.", MEDIUM),
    _d("ssl.key.password", P, None, "Private key password.", HIGH),
    _d("ssl.keystore.certificate.chain", P, None, "PEM certificate chain.", HIGH),
    _d("ssl.keystore.key", P, None, "PEM private key.", HIGH),
    _d("ssl.truststore.location", S, None, "Trust store file.", HIGH),
    _d("ssl.truststore.password", P, None, "Trust store password.", HIGH),
    _d("ssl.truststore.type", S, "JKS", "Trust store format.", MEDIUM),
    _d("ssl.truststore.certificates", P, None, "PEM trusted certificates.", HIGH),
    _d("ssl.client.auth", S, "none", "Whether clients must present a certificate.", MEDIUM,
       one_of("required", "requested", "none")),
    _d("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
       MEDIUM),
    _d("ssl.protocol", S, "TLSv1.3", "TLS protocol of the SSL context.", MEDIUM),
    _d("ssl.cipher.suites", LI, [], "Cipher suites (empty: all supported).", LOW),
    _d("ssl.endpoint.identification.algorithm", S, "https", "Host name verification "
       "('https', or empty to disable).", LOW),
]

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
assert len(BROKER_CONFIGS) == len(_DEFS), "duplicate broker config definition"

# Real Kafka broker keys that odradek accepts but does not act on. Keeping a list (rather
# than accepting everything) is what lets a typo stop start-up.
IGNORED_KAFKA_CONFIGS: frozenset[str] = frozenset("""
    alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
    alter.log.dirs.replication.quota.window.size.seconds auto.include.jmx.reporter
    client.quota.callback.class config.providers connection.failed.authentication.delay.ms
    connections.max.reauth.ms controlled.shutdown.enable controlled.shutdown.max.retries
    controlled.shutdown.retry.backoff.ms controller.quota.window.num
    controller.quota.window.size.seconds controller.socket.timeout.ms
    create.topic.policy.class.name delegation.token.expiry.check.interval.ms
    delegation.token.expiry.time.ms delegation.token.max.lifetime.ms
    delegation.token.secret.key delete.records.purgatory.purge.interval.requests
    early.start.listeners fetch.purgatory.purge.interval.requests
    group.consumer.assignors group.consumer.heartbeat.interval.ms group.consumer.max.size
    group.consumer.session.timeout.ms group.coordinator.rebalance.protocols
    group.coordinator.threads inter.broker.protocol.version kafka.metrics.polling.interval.secs
    kafka.metrics.reporters log.cleaner.threads.per.dir log.message.format.version
    max.connection.creation.rate max.connections.per.ip.overrides max.incremental.fetch.session.cache.slots
    metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
    metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms
    num.replica.alter.log.dirs.threads password.encoder.cipher.algorithm
    password.encoder.iterations password.encoder.key.length
    password.encoder.keyfactory.algorithm password.encoder.old.secret
    password.encoder.secret principal.builder.class producer.purgatory.purge.interval.requests
    quota.window.num quota.window.size.seconds remote.log.manager.task.interval.ms
    remote.log.manager.thread.pool.size remote.log.metadata.manager.class.name
    remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
    remote.log.metadata.manager.listener.name remote.log.storage.manager.class.name
    remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
    replica.selector.class replication.quota.window.num replication.quota.window.size.seconds
    reserved.broker.max.id sasl.jaas.config sasl.kerberos.kinit.cmd
    sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
    sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter
    sasl.kerberos.ticket.renew.window.factor sasl.login.callback.handler.class
    sasl.login.class sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
    sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
    sasl.server.callback.handler.class sasl.server.max.receive.size security.providers
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
    ssl.allow.dn.changes ssl.allow.san.changes ssl.engine.factory.class ssl.keymanager.algorithm
    ssl.principal.mapping.rules ssl.provider ssl.secure.random.implementation
    ssl.trustmanager.algorithm telemetry.max.bytes transaction.partition.verification.enable
    unstable.api.versions.enable unstable.feature.versions.enable zookeeper.connection.timeout.ms
    zookeeper.session.timeout.ms zookeeper.set.acl
""".split())  # noqa: SIM905 - a word list reads better than 110 quoted strings

# Keys that must stop start-up because they ask for something odradek will never do.
REJECTED_KAFKA_CONFIGS: dict[str, str] = {
    "zookeeper.connect": "ZooKeeper mode is not supported: odradek runs in KRaft mode only. "
                         "Remove zookeeper.connect and set process.roles, node.id and "
                         "controller.quorum.voters (see config/kraft/server.properties).",
}

LISTENER_OVERRIDE_PREFIX = "listener.name."


# ----------------------------------------------------------------------------------------
# Java .properties


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text the way java.util.Properties.load does.

    Kafka reads server.properties with Properties.load, so odradek accepts the same
    syntax: `#`/`!` comment lines, `key=value`, `key: value` or `key value`, logical lines
    continued by an odd number of trailing backslashes (the next line's leading blanks
    dropped), and escapes (\\t \\n \\r \\f \\uXXXX, backslash before any other character
    keeps that character). Later keys win. Unlike Java (ISO-8859-1), callers decode files
    as UTF-8.
    """
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key)] = _unescape(value)
    return result


_BLANKS = " \t\f"


def _logical_lines(text: str) -> Iterator[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue  # comment lines never continue, even when they end in a backslash
        parts: list[str] = []
        while _continues(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_BLANKS)
            i += 1
        parts.append(line)
        yield "".join(parts)


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANKS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANKS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANKS:
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            code = text[i + 2:i + 6]
            if len(code) != 4 or not all(c in "0123456789abcdefABCDEF" for c in code):
                raise ConfigError("(properties)", f"Malformed \\uxxxx encoding: \\u{code}",
                                  message=f"Malformed \\uxxxx encoding in properties: "
                                          f"\\u{code}")
            out.append(chr(int(code, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


# ----------------------------------------------------------------------------------------
# Listeners


class Endpoint(NamedTuple):
    """One listener address. An empty host means the default interface."""

    name: str
    host: str
    port: int


_ENDPOINT_RE = re.compile(r"\A([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)\Z")


def parse_endpoints(key: str, text: str,
                    protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse `NAME://host:port,...` (IPv6 hosts in brackets); names are upper-cased."""
    endpoints: list[Endpoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT_RE.match(item)
        if match is None:
            raise ConfigError(key, f"'{item}' is not a valid listener; expected "
                                   "NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092", text)
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"port {port} of listener {name} is out of range "
                                   "0..65535", text)
        if name not in protocol_map:
            raise ConfigError(key, f"listener name {name} has no security protocol in "
                                   "listener.security.protocol.map", text)
        if any(e.name == name for e in endpoints):
            raise ConfigError(key, f"each listener must have a different name; {name} "
                                   "appears twice", text)
        endpoints.append(Endpoint(name, host, port))
    return endpoints


def parse_protocol_map(text: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    result: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(key, f"'{item}' is not NAME:PROTOCOL", text)
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"unknown security protocol {protocol} for listener "
                                   f"{name}; expected one of {', '.join(SECURITY_PROTOCOLS)}",
                              text)
        result[name] = protocol
    return result


# ----------------------------------------------------------------------------------------
# BrokerConfig


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's configuration, immutable. Build it with `load` or `from_properties`.

    `values` holds every modelled key's typed value (defaults filled in); `originals` the
    text the user gave, exactly; `ignored` the known-but-unmodelled Kafka keys.
    """

    values: Mapping[str, object]
    originals: Mapping[str, str]
    ignored: Mapping[str, str]

    # ---- construction -----------------------------------------------------------------

    @classmethod
    def load(cls, properties_path: str | os.PathLike[str] | None = None,
             overrides: Iterable[str] = ()) -> BrokerConfig:
        """Read server.properties (if given), apply `key=value` overrides, validate all,
        and check that the log dirs are usable (creating them when missing)."""
        props: dict[str, str] = {}
        if properties_path is not None:
            try:
                text = Path(properties_path).read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError("config", f"cannot read {properties_path}: "
                                            f"{e.strerror or e}",
                                  message=f"Cannot read config file {properties_path}: "
                                          f"{e.strerror or e}") from None
            props.update(parse_properties(text))
        props.update(parse_overrides(overrides))
        config = cls.from_properties(props)
        config.check_log_dirs()
        return config

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate and type `props` without touching the file system."""
        values: dict[str, object] = {name: d.default for name, d in BROKER_CONFIGS.items()}
        originals: dict[str, str] = {}
        ignored: dict[str, str] = {}
        errors: list[ConfigError] = []
        for key, raw in props.items():
            try:
                if key in BROKER_CONFIGS:
                    values[key] = BROKER_CONFIGS[key].parse(raw)
                    originals[key] = raw
                elif key in REJECTED_KAFKA_CONFIGS:
                    raise ConfigError(key, REJECTED_KAFKA_CONFIGS[key],
                                      message=f"{key}: {REJECTED_KAFKA_CONFIGS[key]}")
                elif key in IGNORED_KAFKA_CONFIGS or key.startswith(LISTENER_OVERRIDE_PREFIX):
                    ignored[key] = raw
                else:
                    raise _unknown_key(key)
            except ConfigError as e:
                errors.append(e)
        if not errors:
            try:
                _resolve_node_id(values, originals)
                config = cls(values, originals, ignored)
                config._check_cross_key_rules()
            except ConfigError as e:
                errors.append(e)
        if errors:
            raise errors[0] if len(errors) == 1 else _combined(errors)
        unmodelled = sorted(k for k in ignored if not k.startswith(LISTENER_OVERRIDE_PREFIX))
        if unmodelled:
            log.warning("These Kafka configs are accepted but not used by odradek: %s",
                        ", ".join(unmodelled))
        return config

    def _check_cross_key_rules(self) -> None:
        """Rules that involve more than one key. Parsing the listeners validates them."""
        listeners = self.listeners
        if not listeners:
            raise ConfigError("listeners", "at least one listener is required",
                              self.get("listeners"))
        ports = [e.port for e in listeners if e.port != 0]
        if len(ports) != len(set(ports)):
            raise ConfigError("listeners", "each listener must have a different port",
                              self.get("listeners"))
        for endpoint in self._advertised_endpoints():
            if endpoint.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", "cannot use the nonroutable "
                                  f"meta-address {endpoint.host}; use a routable address "
                                  "(set advertised.listeners)",
                                  self.get("advertised.listeners") or self.get("listeners"))
        names = {e.name for e in self._advertised_endpoints()}
        inter_broker = self.inter_broker_listener_name
        if "broker" in self.process_roles and inter_broker not in names:
            key = ("inter.broker.listener.name" if self.get("inter.broker.listener.name")
                   else "security.inter.broker.protocol")
            raise ConfigError(key, f"listener {inter_broker} is not defined in listeners",
                              self.get(key))
        if self.get("log.cleaner.min.compaction.lag.ms") > self.get(  # type: ignore[operator]
                "log.cleaner.max.compaction.lag.ms"):
            raise ConfigError("log.cleaner.min.compaction.lag.ms", "must not exceed "
                              "log.cleaner.max.compaction.lag.ms",
                              self.get("log.cleaner.min.compaction.lag.ms"))
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms", "must not exceed "
                              "group.max.session.timeout.ms",
                              self.group_min_session_timeout_ms)
        if len(self.log_dirs) != len(set(self.log_dirs)):
            key = self._log_dirs_key
            raise ConfigError(key, "duplicate log directory", self.get(key))

    def check_log_dirs(self) -> None:
        """Create missing log dirs and prove each is a writable directory.

        Writing a probe file (rather than os.access) is what catches a read-only mount
        and a root-owned tree alike.
        """
        dirs = [(self._log_dirs_key, d) for d in self.log_dirs]
        if self.get("metadata.log.dir"):
            dirs.append(("metadata.log.dir", Path(str(self.get("metadata.log.dir")))))
        for key, directory in dirs:
            try:
                directory.mkdir(parents=True, exist_ok=True)
                if not directory.is_dir():
                    raise NotADirectoryError(20, "Not a directory")
                with tempfile.NamedTemporaryFile(dir=directory, prefix=".odradek-probe-"):
                    pass
            except OSError as e:
                raise ConfigError(key, f"log directory {directory} is not usable: "
                                       f"{e.strerror or e}", self.get(key)) from None

    # ---- generic access ---------------------------------------------------------------

    def get(self, key: str) -> Any:
        """The typed value of a modelled key (its default when not set): int, float, bool,
        str, list[str], Password or None. Typed as Any so call sites need no casts."""
        try:
            return self.values[key]
        except KeyError:
            raise KeyError(f"{key} is not a broker config odradek models") from None

    def is_set(self, key: str) -> bool:
        """Whether the user gave `key` (in the file or an override)."""
        return key in self.originals

    def items(self) -> list[tuple[str, object]]:
        """(key, typed value) for every modelled key, sorted by name (DescribeConfigs)."""
        return sorted(self.values.items())

    def formatted(self, key: str) -> str | None:
        """The value of `key` as Kafka's DescribeConfigs shows it."""
        return format_value(BROKER_CONFIGS[key].type, self.get(key))

    def listener_overrides(self, listener: str) -> dict[str, str]:
        """`listener.name.<listener>.<key>` settings for one listener, prefix removed."""
        prefix = f"{LISTENER_OVERRIDE_PREFIX}{listener.lower()}."
        return {k[len(prefix):]: v for k, v in self.ignored.items()
                if k.lower().startswith(prefix)}

    # ---- typed accessors --------------------------------------------------------------

    def _int(self, key: str) -> int:
        value = self.values[key]
        assert isinstance(value, int)
        return value

    @property
    def node_id(self) -> int:
        return self._int("node.id")

    @property
    def cluster_id(self) -> str | None:
        return self.values["cluster.id"] or None  # type: ignore[return-value]

    @property
    def process_roles(self) -> frozenset[str]:
        return frozenset(self.values["process.roles"])  # type: ignore[call-overload]

    @property
    def broker_rack(self) -> str | None:
        return self.values["broker.rack"] or None  # type: ignore[return-value]

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(str(self.values["listener.security.protocol.map"]))

    @property
    def listeners(self) -> list[Endpoint]:
        return parse_endpoints("listeners", str(self.values["listeners"]),
                               self.listener_security_protocol_map)

    @property
    def controller_listener_names(self) -> frozenset[str]:
        text = self.values["controller.listener.names"] or ""
        return frozenset(n.strip().upper() for n in str(text).split(",") if n.strip())

    @property
    def advertised_listeners(self) -> list[Endpoint]:
        """What clients are told. Defaults to the non-controller listeners; an empty host
        is replaced by this machine's name, as Kafka does."""
        return [e._replace(host=socket.getfqdn()) if e.host == "" else e
                for e in self._advertised_endpoints()]

    def _advertised_endpoints(self) -> list[Endpoint]:
        text = self.values["advertised.listeners"]
        if text is None:
            return [e for e in self.listeners if e.name not in self.controller_listener_names]
        return parse_endpoints("advertised.listeners", str(text),
                               self.listener_security_protocol_map)

    @property
    def inter_broker_listener_name(self) -> str:
        name = self.values["inter.broker.listener.name"]
        if name:
            return str(name).upper()
        protocol = str(self.values["security.inter.broker.protocol"])
        for listener, mapped in self.listener_security_protocol_map.items():
            if mapped == protocol and listener == protocol:
                return listener
        return protocol

    def security_protocol(self, listener_name: str) -> str:
        return self.listener_security_protocol_map[listener_name.upper()]

    @property
    def _log_dirs_key(self) -> str:
        return "log.dirs" if self.values["log.dirs"] is not None else "log.dir"

    @property
    def log_dirs(self) -> list[Path]:
        """log.dirs if set, else log.dir (Kafka's precedence)."""
        text = str(self.values[self._log_dirs_key])
        return [Path(part.strip()) for part in text.split(",") if part.strip()]

    @property
    def metadata_log_dir(self) -> Path:
        value = self.values["metadata.log.dir"]
        return Path(str(value)) if value else self.log_dirs[0]

    @property
    def num_partitions(self) -> int:
        return self._int("num.partitions")

    @property
    def default_replication_factor(self) -> int:
        return self._int("default.replication.factor")

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.values["auto.create.topics.enable"])

    @property
    def delete_topic_enable(self) -> bool:
        return bool(self.values["delete.topic.enable"])

    @property
    def message_max_bytes(self) -> int:
        return self._int("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self._int("socket.request.max.bytes")

    @property
    def fetch_max_bytes(self) -> int:
        return self._int("fetch.max.bytes")

    @property
    def min_insync_replicas(self) -> int:
        return self._int("min.insync.replicas")

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self._int("offsets.topic.num.partitions")

    @property
    def offsets_topic_replication_factor(self) -> int:
        return self._int("offsets.topic.replication.factor")

    @property
    def transaction_state_log_num_partitions(self) -> int:
        return self._int("transaction.state.log.num.partitions")

    @property
    def transaction_max_timeout_ms(self) -> int:
        return self._int("transaction.max.timeout.ms")

    @property
    def group_min_session_timeout_ms(self) -> int:
        return self._int("group.min.session.timeout.ms")

    @property
    def group_max_session_timeout_ms(self) -> int:
        return self._int("group.max.session.timeout.ms")

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return self._int("group.initial.rebalance.delay.ms")

    @property
    def replica_lag_time_max_ms(self) -> int:
        return self._int("replica.lag.time.max.ms")

    @property
    def connections_max_idle_ms(self) -> int:
        return self._int("connections.max.idle.ms")

    @property
    def queued_max_requests(self) -> int:
        return self._int("queued.max.requests")

    @property
    def request_timeout_ms(self) -> int:
        return self._int("request.timeout.ms")

    # ---- derived log settings (Kafka's precedence rules) ------------------------------

    @property
    def log_roll_time_ms(self) -> int:
        """log.roll.ms if set, else log.roll.hours in ms."""
        ms = self.values["log.roll.ms"]
        return int(ms) if ms is not None else self._int("log.roll.hours") * 3_600_000  # type: ignore[call-overload]

    @property
    def log_roll_time_jitter_ms(self) -> int:
        ms = self.values["log.roll.jitter.ms"]
        if ms is not None:
            return int(ms)  # type: ignore[call-overload]
        return self._int("log.roll.jitter.hours") * 3_600_000

    @property
    def log_retention_time_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours; any negative value means -1
        (keep forever), as in Kafka."""
        ms = self.values["log.retention.ms"]
        minutes = self.values["log.retention.minutes"]
        if ms is not None:
            millis = int(ms)  # type: ignore[call-overload]
        elif minutes is not None:
            millis = int(minutes) * 60_000  # type: ignore[call-overload]
        else:
            millis = self._int("log.retention.hours") * 3_600_000
        return -1 if millis < 0 else millis

    @property
    def log_flush_interval_ms(self) -> int:
        """log.flush.interval.ms, defaulting to log.flush.scheduler.interval.ms."""
        ms = self.values["log.flush.interval.ms"]
        return int(ms) if ms is not None else self._int("log.flush.scheduler.interval.ms")  # type: ignore[call-overload]

    def log_config(self) -> LogConfig:
        """The broker-wide defaults of every topic-level log setting."""
        v = self.values
        return LogConfig(
            segment_bytes=self._int("log.segment.bytes"),
            segment_ms=self.log_roll_time_ms,
            segment_jitter_ms=self.log_roll_time_jitter_ms,
            segment_index_bytes=self._int("log.index.size.max.bytes"),
            index_interval_bytes=self._int("log.index.interval.bytes"),
            retention_ms=self.log_retention_time_ms,
            retention_bytes=self._int("log.retention.bytes"),
            flush_messages=self._int("log.flush.interval.messages"),
            flush_ms=self.log_flush_interval_ms,
            max_message_bytes=self._int("message.max.bytes"),
            message_timestamp_type=str(v["log.message.timestamp.type"]),
            cleanup_policy=",".join(v["log.cleanup.policy"]),  # type: ignore[arg-type]
            file_delete_delay_ms=self._int("log.segment.delete.delay.ms"),
            min_insync_replicas=self._int("min.insync.replicas"),
            delete_retention_ms=self._int("log.cleaner.delete.retention.ms"),
            min_compaction_lag_ms=self._int("log.cleaner.min.compaction.lag.ms"),
            max_compaction_lag_ms=self._int("log.cleaner.max.compaction.lag.ms"),
            min_cleanable_dirty_ratio=float(v["log.cleaner.min.cleanable.ratio"]),  # type: ignore[arg-type]
            compression_type=str(v["compression.type"]),
            preallocate=bool(v["log.preallocate"]),
            unclean_leader_election_enable=bool(v["unclean.leader.election.enable"]),
        )


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """`key=value` strings (from --override) to a dict; the value may contain '='."""
    result: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("--override", f"'{item}' is not key=value",
                              message=f"Invalid override '{item}': expected key=value, "
                                      "e.g. --override num.partitions=3")
        result[key] = value.strip()
    return result


def _resolve_node_id(values: dict[str, object], originals: Mapping[str, str]) -> None:
    """node.id and broker.id are one setting: either name sets it; both must agree."""
    broker_id = values["broker.id"]
    if broker_id is None:
        values["broker.id"] = values["node.id"]
        return
    if "node.id" not in originals:
        values["node.id"] = broker_id
    elif values["node.id"] != broker_id:
        raise ConfigError("broker.id", f"must equal node.id ({values['node.id']}) when both "
                          "are set", broker_id)
    if not isinstance(values["node.id"], int) or values["node.id"] < 0:
        raise ConfigError("broker.id", "Value must be at least 0", broker_id)


def _unknown_key(key: str) -> ConfigError:
    from odradek import topic_config  # local import: topic_config imports this module

    hint = closest(key, [*BROKER_CONFIGS, *IGNORED_KAFKA_CONFIGS])
    if key in topic_config.TOPIC_CONFIGS:
        synonyms = topic_config.TOPIC_CONFIGS[key].broker_synonyms
        reason = "a topic-level config, not a broker config" + (
            f"; the broker-wide default is '{synonyms[0]}'" if synonyms else "")
    elif hint is not None:
        reason = f"not a broker config; did you mean '{hint}'?"
    else:
        reason = "not a Kafka broker config odradek knows"
    return ConfigError(key, reason, message=f"Unknown configuration '{key}': {reason}")


def _combined(errors: list[ConfigError]) -> ConfigError:
    lines = "\n".join(f"  - {e.message}" for e in errors)
    return ConfigError(errors[0].key, errors[0].reason, errors[0].value,
                       message=f"{len(errors)} configuration errors:\n{lines}")
