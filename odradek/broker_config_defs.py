"""The table of broker config keys odradek knows: Kafka's names, types, defaults, rules.

Kept apart from odradek/config.py (which parses and checks a config against this table)
because it is long and changes for a different reason: a new key is a one-line change
here. Doc strings are odradek's own short summaries; Kafka's documentation has the full
story for every key.

Three lists:
- BROKER_CONFIGS: keys odradek models (parsed, validated, typed);
- IGNORED_KAFKA_CONFIGS: real Kafka broker keys odradek accepts without acting on them;
- REJECTED_KAFKA_CONFIGS: Kafka keys that ask for something odradek will never do.
"""

from __future__ import annotations

from odradek.configdef import (
    DOUBLE_MAX,
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigType,
    Importance,
    Validator,
    at_least,
    between,
    one_of,
)

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
       importance: Importance = MEDIUM, validator: Validator | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, doc, importance, validator)


_DEFS: list[ConfigDef] = [
    # --- identity and roles ---
    _d("node.id", I, 1, "The id of this node in the cluster, as a broker and as a "
       "controller voter. Must be unique.", HIGH, at_least(0)),
    _d("broker.id", I, None, "Older name of node.id; if both are set they must agree.", HIGH),
    _d("process.roles", LI, ["broker", "controller"], "What this node does: 'broker', "
       "'controller' or both (combined mode).", HIGH, one_of("broker", "controller")),
    _d("odradek.metrics.port", I, -1, "odradek only: serve Prometheus metrics over HTTP on "
       "this port (-1: off, 0: any free port).", LOW, at_least(-1)),
    _d("odradek.metrics.host", S, "127.0.0.1", "odradek only: the address the metrics "
       "endpoint binds.", LOW),
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
    _d("log.dir.free.space.min.bytes", L, 0, "Free bytes a log dir's filesystem keeps: "
       "below it, produce to the dir's partitions is refused with a retriable error until "
       "space is freed (0: no floor). Not in Kafka.", HIGH, at_least(0)),
    _d("log.dir.free.space.min.percent", D, 0.0, "Free space, in percent of its filesystem, "
       "a log dir keeps (the larger floor of this and log.dir.free.space.min.bytes "
       "applies; 0: no floor). Not in Kafka.", HIGH, between(0, 100)),
    _d("odradek.log.scrub.bytes.per.second", L, 4 * 1024 * 1024, "odradek only: how fast "
       "the scrubber re-reads closed segments to check every batch's CRC (a corrupt one is "
       "logged, counted in odradek_log_scrub_corrupt_segments and, on a follower, cut and "
       "fetched again from the leader); 0 turns the scrubber off.", LOW, at_least(0)),
    _d("odradek.log.scrub.interval.ms", L, 7 * 24 * 3600 * 1000, "odradek only: a closed "
       "segment is checked again after this long (a new one is checked once it closes).",
       LOW, at_least(1000)),
    _d("odradek.open.files.reserve", I, 128, "odradek only: open files kept free for "
       "connections and the broker's own files: a CreateTopics or CreatePartitions that "
       "would leave fewer free under the open-files limit is refused (POLICY_VIOLATION).",
       MEDIUM, at_least(0)),
    _d("odradek.log.segment.open.files.max", I, -1, "odradek only: at most this many "
       "segments' .log files (active ones included) are kept open (an LRU: the least "
       "recently used idle one is closed and opened again on its next use). -1: half "
       "of the open-files limit left after odradek.open.files.reserve (at least "
       "16); 0: no bound.", MEDIUM, at_least(-1)),
    _d("odradek.log.index.cache.max.bytes", L, 64 * 1024 * 1024, "odradek only: bytes of "
       "closed segments' index entries (.index and .timeindex, about 5 MiB per GiB of log "
       "at the default index.interval.bytes) kept in memory; past it the least recently "
       "used idle ones are dropped and read from their files again on their next use "
       "(reads in flight keep theirs). Active segments' indexes are not counted. "
       "0: no bound.", MEDIUM, at_least(0)),
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
    _d("remote.log.manager.task.interval.ms", L, 30000, "Interval of the tiered-storage "
       "task of each remote-enabled leader partition (copy, then retention).", MEDIUM,
       at_least(1)),
    _d("remote.log.manager.copier.thread.pool.size", I, 10, "Threads that upload segments "
       "to the remote tier.", MEDIUM, at_least(1)),
    _d("remote.log.manager.expiration.thread.pool.size", I, 10, "Threads that delete "
       "expired segments from the remote tier.", MEDIUM, at_least(1)),
    _d("remote.log.reader.threads", I, 10, "Threads that read the remote tier for fetches.",
       MEDIUM, at_least(1)),
    _d("remote.fetch.max.wait.ms", I, 500, "Most time a fetch waits for data read from the "
       "remote tier.", MEDIUM, at_least(1)),
    _d("remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, "Upload rate limit to "
       "the remote tier, over all partitions of this broker.", MEDIUM, at_least(1)),
    _d("remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, "Read rate limit from "
       "the remote tier, over all partitions of this broker.", MEDIUM, at_least(1)),
    _d("remote.log.index.file.cache.total.size.bytes", L, 1073741824, "Memory for the cache "
       "of remote segments' offset, time and transaction indexes.", MEDIUM, at_least(1)),
    _d("rsm.config.url", S, None, "odradek's remote storage manager: the fsspec URL of the "
       "remote tier (s3://bucket/prefix, hdfs://..., file:///path); unset: the directory "
       "remote-tier beside the first log dir. rsm.config.fs.<option> keys are passed to the "
       "fsspec filesystem (e.g. endpoint_url, key, secret for s3fs).", MEDIUM),
    _d("rlmm.config.remote.log.metadata.topic.num.partitions", I, 50, "Partitions of "
       "__remote_log_metadata.", MEDIUM, at_least(1)),
    _d("rlmm.config.remote.log.metadata.topic.replication.factor", SH, 3, "Replication factor "
       "of __remote_log_metadata (capped at the live brokers when it is created).", MEDIUM,
       at_least(1)),
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
    _d("odradek.log.cleaner.cgroup.idle", B, True, "odradek only: run the cleaner's worker "
       "processes in a cpu cgroup with cpu.idle=1 (Linux, where the broker may create one; "
       "otherwise they keep SCHED_IDLE alone), so a process that wakes elsewhere "
       "preempts cleaning at once.", LOW),
    _d("odradek.log.cleaner.idle.max.ms", L, 30000, "odradek only: the starvation bound of "
       "the cleaner's idle priority. A worker step (building the offset map, cleaning one "
       "group of segments) still running after this long is lifted to nice 19 "
       "SCHED_OTHER, out of the idle cgroup, for the rest of that step, so cleaning "
       "progresses on a CPU-saturated broker; 0 keeps it idle however long it waits.",
       LOW, at_least(0)),
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
    _d("queued.max.request.bytes", L, -1, "Bytes of requests read but not yet answered, "
       "across all connections, past which no socket is read (-1 or 0: no limit; else at "
       "least socket.request.max.bytes).", MEDIUM),
    _d("odradek.queued.max.request.bytes", L, 512 * 1024 * 1024, "odradek only: the "
       "queued.max.request.bytes pool that applies while queued.max.request.bytes is -1 "
       "or 0 (Kafka's default, no limit): bytes of requests read and not yet answered "
       "(produce requests parked for acks=all, requests queued behind a busy partition), "
       "all connections together, past which no socket is read, so that the broker sheds "
       "load instead of growing until it is killed. -1 or 0: no limit (Kafka's "
       "behaviour); a value below socket.request.max.bytes is raised to it.", MEDIUM),
    _d("max.incremental.fetch.session.cache.slots", I, 1000, "Most incremental fetch "
       "sessions (KIP-227) the broker keeps.", MEDIUM, at_least(0)),
    _d("odradek.fetch.memory.max.bytes", L, 512 * 1024 * 1024, "odradek only: bytes of "
       "records that consumer Fetch answers may hold at once, from the read until the "
       "answer is written; past it a fetch waits (up to its max wait) and is answered "
       "without records, so many consumers with a large fetch.max.bytes slow down instead "
       "of growing the broker's memory. Exceeded by at most one answer's first batch. "
       "-1 or 0: no limit.", MEDIUM),
    _d("quota.window.num", I, 11, "Samples kept to measure client quota rates.", LOW,
       at_least(1)),
    _d("quota.window.size.seconds", I, 1, "Length of each client quota sample.", LOW,
       at_least(1)),
    _d("connections.max.idle.ms", L, 600000, "A connection with nothing read or written "
       "for this long is closed (negative: never).", MEDIUM),
    _d("max.connections", I, INT_MAX, "Most connections the broker allows on its listeners "
       "(the inter-broker listener is exempt when there are others; "
       "listener.name.<listener>.max.connections limits one listener).", MEDIUM,
       at_least(0)),
    _d("max.connections.per.ip", I, INT_MAX, "Most connections from one address.", MEDIUM,
       at_least(0)),
    _d("max.connection.creation.rate", I, INT_MAX, "New connections per second the broker "
       "accepts on its listeners (KIP-612; the inter-broker listener is exempt; "
       "listener.name.<listener>.max.connection.creation.rate limits one listener); "
       "a connection over it waits for the throttle time before it is read.", MEDIUM,
       at_least(0)),
    _d("max.connections.per.ip.overrides", S, "", "Per-address exceptions to "
       "max.connections.per.ip, as 'host:count,host:count' (host: a name or an address).",
       MEDIUM),
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
    # Dynamic (IncrementalAlterConfigs on a BROKER resource, per broker id or the
    # cluster default ""), and static here; bytes/s, the default is unthrottled.
    _d("leader.replication.throttled.rate", L, LONG_MAX, "Bytes/s this broker sends to "
       "throttled out-of-sync followers (the topics' leader.replication.throttled.replicas).",
       MEDIUM, at_least(0)),
    _d("follower.replication.throttled.rate", L, LONG_MAX, "Bytes/s this broker fetches "
       "for its throttled out-of-sync replicas (follower.replication.throttled.replicas).",
       MEDIUM, at_least(0)),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX, "Bytes/s this broker "
       "copies when it moves replicas between its log dirs (AlterReplicaLogDirs); static "
       "here (dynamic in Kafka).", MEDIUM, at_least(1)),
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
    _d("group.consumer.session.timeout.ms", I, 45000, "Session timeout of members of "
       "KIP-848 consumer groups.", MEDIUM, at_least(1)),
    _d("group.consumer.heartbeat.interval.ms", I, 5000, "Heartbeat interval the broker "
       "gives KIP-848 consumer group members.", MEDIUM, at_least(1)),
    _d("group.consumer.min.session.timeout.ms", I, 45000, "Smallest session timeout a "
       "group may set (its consumer.session.timeout.ms).", MEDIUM, at_least(1)),
    _d("group.consumer.max.session.timeout.ms", I, 60000, "Largest session timeout a "
       "group may set (its consumer.session.timeout.ms).", MEDIUM, at_least(1)),
    _d("group.consumer.min.heartbeat.interval.ms", I, 5000, "Smallest heartbeat interval "
       "a group may set (its consumer.heartbeat.interval.ms).", MEDIUM, at_least(1)),
    _d("group.consumer.max.heartbeat.interval.ms", I, 15000, "Largest heartbeat interval "
       "a group may set (its consumer.heartbeat.interval.ms).", MEDIUM, at_least(1)),
    _d("group.consumer.max.size", I, INT_MAX, "Most members in one KIP-848 consumer "
       "group.", MEDIUM, at_least(1)),
    _d("group.consumer.assignors", LI, ["uniform", "range"], "Server-side assignors of "
       "KIP-848 groups; the first is the default.", MEDIUM),
    _d("group.consumer.migration.policy", S, "bidirectional", "Online migration of groups "
       "with members between the classic and the KIP-848 protocol: 'upgrade' (classic to "
       "consumer when a KIP-848 member joins), 'downgrade' (back when the last KIP-848 "
       "member leaves), both, or 'disabled'.", MEDIUM,
       one_of("bidirectional", "upgrade", "downgrade", "disabled", case_sensitive=False)),
    # --- share groups (KIP-932; docs/share_groups.md) ---
    _d("group.share.session.timeout.ms", I, 45000, "Session timeout of share group "
       "members.", MEDIUM, at_least(1)),
    _d("group.share.heartbeat.interval.ms", I, 5000, "Heartbeat interval the broker gives "
       "share group members.", MEDIUM, at_least(1)),
    _d("group.share.max.size", I, 200, "Most members in one share group.", MEDIUM,
       at_least(1)),
    _d("group.share.record.lock.duration.ms", I, 30000, "How long a share group member "
       "holds the records it acquired before they are released (the acquisition lock).",
       MEDIUM, at_least(1)),
    _d("group.share.delivery.count.limit", I, 5, "Deliveries of one record to a share "
       "group before it is archived.", MEDIUM, at_least(2)),
    _d("group.share.partition.max.record.locks", I, 2000, "Most in-flight records of one "
       "share partition (its window from start offset to end offset).", MEDIUM,
       at_least(100)),
    _d("group.share.max.share.sessions", I, 2000, "Most share sessions a broker keeps.",
       MEDIUM, at_least(1)),
    # the share coordinator (KIP-932; coordinator/share_coordinator.py)
    _d("share.coordinator.state.topic.num.partitions", I, 50, "Partitions of "
       "__share_group_state.", HIGH, at_least(1)),
    _d("share.coordinator.state.topic.replication.factor", SH, 3, "Replication factor of "
       "__share_group_state.", HIGH, at_least(1)),
    _d("share.coordinator.state.topic.min.isr", SH, 2, "min.insync.replicas of "
       "__share_group_state.", HIGH, at_least(1)),
    _d("share.coordinator.state.topic.segment.bytes", I, 104857600, "Segment size of "
       "__share_group_state.", HIGH, at_least(1)),
    _d("share.coordinator.write.timeout.ms", I, 5000, "How long a share coordinator's "
       "write waits for the in-sync replicas.", HIGH, at_least(1)),
    _d("share.coordinator.snapshot.update.records.per.snapshot", I, 500, "ShareUpdate "
       "records the share coordinator writes for a share partition between two "
       "ShareSnapshot records.", MEDIUM, between(0, 500)),
    _d("share.coordinator.state.topic.prune.interval.ms", I, 300000, "How often the share "
       "coordinator deletes the records of __share_group_state no state needs any more.",
       LOW, at_least(1)),
    _d("share.coordinator.cold.partition.snapshot.interval.ms", I, 300000, "How old the "
       "last snapshot of a share partition's state may get before the share coordinator "
       "writes it again (so that pruning passes quiet share partitions).", LOW,
       at_least(1)),
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
    _d("metadata.log.max.record.bytes.between.snapshots", L, 20971520, "Record bytes "
       "committed to the metadata log after which a new metadata snapshot is written.", HIGH,
       at_least(1)),
    _d("metadata.log.max.snapshot.interval.ms", L, 3600000, "Time after which a metadata "
       "snapshot is written if records were committed since the last one (0: never by "
       "time).", HIGH, at_least(0)),
    _d("metadata.max.retention.bytes", L, 104857600, "Accepted, not acted on: odradek keeps "
       "the two newest metadata snapshots and the log from the older one.", HIGH),
    _d("metadata.max.retention.ms", L, 604800000, "Accepted, not acted on: odradek keeps "
       "the two newest metadata snapshots and the log from the older one.", HIGH),
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
    _d("connections.max.reauth.ms", L, 0, "SASL session lifetime (KIP-368): a connection "
       "must re-authenticate within this many ms of its last authentication, else its "
       "next request closes it (0: sessions do not expire). Per listener as "
       "listener.name.<listener>.connections.max.reauth.ms.", MEDIUM,
       at_least(0)),
    _d("ssl.keystore.location", S, None, "Key store (or PEM) file of this node.", HIGH),
    _d("ssl.keystore.password", P, None, "Key store password.", HIGH),
    _d("ssl.keystore.type", S, "JKS", "Key store format: PEM or PKCS12 (JKS, Kafka's "
       "default, is refused with the keytool command that converts it).", MEDIUM),
    _d("ssl.key.password", P, None, "Private key password.", HIGH),
    _d("ssl.keystore.certificate.chain", P, None, "PEM certificate chain.", HIGH),
    _d("ssl.keystore.key", P, None, "PEM private key.", HIGH),
    _d("ssl.truststore.location", S, None, "Trust store file.", HIGH),
    _d("ssl.truststore.password", P, None, "Trust store password.", HIGH),
    _d("ssl.truststore.type", S, "JKS", "Trust store format: PEM or PKCS12.", MEDIUM),
    _d("ssl.truststore.certificates", P, None, "PEM trusted certificates.", HIGH),
    _d("ssl.client.auth", S, "none", "Whether clients must present a certificate.", MEDIUM,
       one_of("required", "requested", "none")),
    _d("ssl.enabled.protocols", LI, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
       MEDIUM),
    _d("ssl.protocol", S, "TLSv1.3", "TLS protocol of the SSL context.", MEDIUM),
    _d("ssl.cipher.suites", LI, [], "Cipher suites (empty: all supported).", LOW),
    _d("ssl.endpoint.identification.algorithm", S, "https", "Host name verification "
       "('https', or empty to disable).", LOW),
    _d("ssl.principal.mapping.rules", S, "DEFAULT", "Rules mapping a client certificate's "
       "distinguished name to a principal name: DEFAULT or RULE:pattern/replacement/[LU], "
       "comma-separated, first match wins.", LOW),
]

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}
assert len(BROKER_CONFIGS) == len(_DEFS), "duplicate broker config definition"

# Broker keys IncrementalAlterConfigs/AlterConfigs may change while brokers run
# (stored as ConfigRecords of the BROKER resource); every other key is static.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset({
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    # every topic without an override takes it (KIP-966 makes it cluster-wide:
    # metadata/elr.py); the partitions' logs follow a change
    "min.insync.replicas",
})
assert DYNAMIC_BROKER_CONFIGS <= BROKER_CONFIGS.keys()

# Real Kafka broker keys that odradek accepts but does not act on. Keeping a list (rather
# than accepting everything) is what lets a typo stop start-up.
IGNORED_KAFKA_CONFIGS: frozenset[str] = frozenset("""
    alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
    alter.log.dirs.replication.quota.window.size.seconds auto.include.jmx.reporter
    client.quota.callback.class config.providers connection.failed.authentication.delay.ms
    controlled.shutdown.enable controlled.shutdown.max.retries
    controlled.shutdown.retry.backoff.ms controller.quota.window.num
    controller.quota.window.size.seconds controller.socket.timeout.ms
    create.topic.policy.class.name delegation.token.expiry.check.interval.ms
    delegation.token.expiry.time.ms delegation.token.max.lifetime.ms
    delegation.token.secret.key delete.records.purgatory.purge.interval.requests
    early.start.listeners fetch.purgatory.purge.interval.requests
    group.coordinator.rebalance.protocols
    group.coordinator.threads inter.broker.protocol.version kafka.metrics.polling.interval.secs
    kafka.metrics.reporters log.cleaner.threads.per.dir log.message.format.version
    metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms
    num.replica.alter.log.dirs.threads password.encoder.cipher.algorithm
    password.encoder.iterations password.encoder.key.length
    password.encoder.keyfactory.algorithm password.encoder.old.secret
    password.encoder.secret principal.builder.class producer.purgatory.purge.interval.requests
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
    ssl.provider ssl.secure.random.implementation
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
# rsm.config.fs.<option>: passed to the remote tier's fsspec filesystem as <option>.
RSM_FS_PREFIX = "rsm.config.fs."
# Prefixes whose keys the broker config keeps as given (`ignored`) for the part that
# reads them: listener overrides, the remote tier's filesystem options.
PASSED_THROUGH_PREFIXES = (LISTENER_OVERRIDE_PREFIX, RSM_FS_PREFIX)
