"""Broker configuration in Kafka's own words: `server.properties` keys, types and defaults.

Size (about 600 lines): the key table already lives in broker_config_defs.py;
what stays is the loader and the typed view of one immutable object, which
every layer reads. The next seam is the listener/endpoint parsing.

Theory of operation. `BrokerConfig.load(path, overrides)` reads a Java .properties file
(`parse_properties`), applies `--override key=value` pairs on top, and checks every key against
BROKER_CONFIGS, the table of broker keys odradek models (Kafka's name, type, default,
validator, doc; in odradek/broker_config_defs.py). The result is an immutable object with
typed attributes for the keys the broker uses (`config.num_partitions`, `config.log_dirs`,
...), a generic `get(key)`, `items()` for DescribeConfigs, and `log_config()`, the
broker-wide defaults mapped onto the topic-level LogConfig.

Rules for keys (a broker that starts with a typo in its config is worse than one that stops):

- a key in BROKER_CONFIGS is parsed and validated; a bad value is a ConfigError;
- a key in IGNORED_KAFKA_CONFIGS is a real Kafka broker key odradek does not act on
  (yet): accepted, kept as text, and listed in one warning at start-up;
- `listener.name.<listener>.<key>` (`listener_overrides()`) and `rsm.config.fs.<option>`
  (tiered/settings.py) are kept as text for the part that reads them;
- `zookeeper.connect` is an error: odradek runs KRaft only (a ZooKeeper-mode
  server.properties would start a broker with an unintended cluster layout);
- anything else is an unknown key and a ConfigError naming it.

Where the code lives: the key table in broker_config_defs.py, the text formats in
properties.py (.properties files, --override pairs) and endpoints.py (listeners, protocol
map, quorum voters, per-IP connection overrides), and here loading, validation and typed
access (BrokerConfig).

Where odradek's defaults differ from Kafka's (so that `odradek server` with no config starts
a working single node), the table says so in DIFFERENCES_FROM_KAFKA.
Precedence as in Kafka: `log.roll.ms` over `log.roll.hours`, `log.roll.jitter.ms` over
`log.roll.jitter.hours`, `log.retention.ms` over `.minutes` over `.hours`, `log.dirs`
over `log.dir`; `node.id` and `broker.id` are one setting under two names.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from odradek.broker_config_defs import (
    BROKER_CONFIGS,
    DIFFERENCES_FROM_KAFKA,
    IGNORED_KAFKA_CONFIGS,
    LISTENER_OVERRIDE_PREFIX,
    PASSED_THROUGH_PREFIXES,
    REJECTED_KAFKA_CONFIGS,
)
from odradek.configdef import ConfigError, closest, format_value
from odradek.endpoints import (
    Endpoint,
    QuorumVoter,
    normalize_address,
    parse_connections_per_ip_overrides,
    parse_endpoints,
    parse_host_port,
    parse_protocol_map,
)
from odradek.properties import parse_overrides, parse_properties
from odradek.storage.log_config import LogConfig
from odradek.topic_config_defs import TOPIC_CONFIGS

# Endpoint, QuorumVoter, normalize_address, parse_overrides and parse_properties are
# re-exported: callers import them from here.
__all__ = [
    "BROKER_CONFIGS",
    "DIFFERENCES_FROM_KAFKA",
    "IGNORED_KAFKA_CONFIGS",
    "BrokerConfig",
    "ConfigError",
    "Endpoint",
    "QuorumVoter",
    "normalize_address",
    "parse_overrides",
    "parse_properties",
]

log = logging.getLogger(__name__)

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
                elif key in IGNORED_KAFKA_CONFIGS or key.startswith(PASSED_THROUGH_PREFIXES):
                    ignored[key] = raw
                else:
                    raise _unknown_key(key)
            except ConfigError as e:
                errors.append(e)
        if not errors:
            try:
                _resolve_node_id(values, originals)
                config = cls(MappingProxyType(values), MappingProxyType(originals),
                             MappingProxyType(ignored))
                config._check_cross_key_rules()
            except ConfigError as e:
                errors.append(e)
        if errors:
            raise errors[0] if len(errors) == 1 else _combined(errors)
        unmodelled = sorted(k for k in ignored if not k.startswith(PASSED_THROUGH_PREFIXES))
        if unmodelled:
            log.warning("These Kafka configs are accepted but not used by odradek: %s",
                        ", ".join(unmodelled))
        return config

    def _check_cross_key_rules(self) -> None:
        """Rules that involve more than one key. Parsing the listeners validates them."""
        self._check_roles_and_quorum()
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
        self._check_connection_limits()

    def _check_connection_limits(self) -> None:
        """Kafka's rules for the keys that bound what clients can hold (KafkaConfig's
        `require`s and the parsing of the overrides and listener limits)."""
        queued = self._int("queued.max.request.bytes")
        if 0 < queued < self.socket_request_max_bytes:
            raise ConfigError("queued.max.request.bytes", "must be at least "
                              f"socket.request.max.bytes ({self.socket_request_max_bytes}) "
                              "or -1 for no limit", queued)
        overrides = self.max_connections_per_ip_overrides  # parses and resolves
        if self._int("max.connections.per.ip") == 0 and not overrides:
            raise ConfigError("max.connections.per.ip", "can be set to zero only if "
                              "max.connections.per.ip.overrides is set", 0)
        for endpoint in self.listeners:
            self.listener_max_connections(endpoint.name)

    def _check_roles_and_quorum(self) -> None:
        roles = self.get("process.roles")
        if not roles or len(roles) != len(set(roles)):
            raise ConfigError("process.roles", "must be 'broker', 'controller' or "
                              "'broker,controller', each at most once", ",".join(roles))
        voters = self.quorum_voters  # parses, so a bad entry is reported here
        self.quorum_bootstrap_servers  # noqa: B018 - same: parse to validate
        if "controller" in self.process_roles:
            if voters and self.node_id not in {v.node_id for v in voters}:
                raise ConfigError("controller.quorum.voters", f"node.id {self.node_id} "
                                  "has the controller role, so it must be one of the voters",
                                  ",".join(self.get("controller.quorum.voters")))
            names = self.controller_listener_names
            if names and not names & {e.name for e in self.listeners}:
                raise ConfigError("controller.listener.names", "a node with the controller "
                                  "role must listen on at least one of these listeners",
                                  self.get("controller.listener.names"))

    def check_log_dirs(self) -> None:
        """Create missing log dirs and prove each is a writable directory.

        Writing a probe file (rather than os.access) is what catches a read-only mount
        and a root-owned tree alike. The metadata log dir (``metadata.log.dir``, else
        the first log dir) must be usable, and so must one log dir; any other log
        dir that is not starts offline (storage/log_manager.py), as in Kafka.
        """
        dirs = [(self._log_dirs_key, d) for d in self.log_dirs]
        if self.get("metadata.log.dir"):
            dirs.append(("metadata.log.dir", Path(str(self.get("metadata.log.dir")))))
        unusable: list[ConfigError] = []
        for key, directory in dirs:
            try:
                if directory.exists() and not directory.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
                directory.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=directory, prefix=".odradek-probe-"):
                    pass
            except OSError as e:
                error = ConfigError(key, f"log directory {directory} is not usable: "
                                         f"{e.strerror or e}", self.get(key))
                if directory == self.metadata_log_dir:
                    raise error from None
                unusable.append(error)
        if len(unusable) == len(self.log_dirs):
            raise unusable[0]

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
    def quorum_voters(self) -> list[QuorumVoter]:
        """controller.quorum.voters parsed: `id@host:port`, IPv6 hosts in brackets."""
        voters: list[QuorumVoter] = []
        for item in self.get("controller.quorum.voters"):
            node_id, sep, address = item.partition("@")
            parsed = parse_host_port(address) if sep and node_id.isdigit() else None
            if parsed is None:
                raise ConfigError("controller.quorum.voters", f"'{item}' is not "
                                  "id@host:port", ",".join(self.get("controller.quorum.voters")))
            voters.append(QuorumVoter(int(node_id), *parsed))
        if len({v.node_id for v in voters}) != len(voters):
            raise ConfigError("controller.quorum.voters", "a voter id appears twice",
                              ",".join(self.get("controller.quorum.voters")))
        return voters

    @property
    def quorum_bootstrap_servers(self) -> list[tuple[str, int]]:
        """controller.quorum.bootstrap.servers parsed as (host, port) pairs."""
        servers: list[tuple[str, int]] = []
        for item in self.get("controller.quorum.bootstrap.servers"):
            parsed = parse_host_port(item)
            if parsed is None:
                raise ConfigError("controller.quorum.bootstrap.servers", f"'{item}' is not "
                                  "host:port",
                                  ",".join(self.get("controller.quorum.bootstrap.servers")))
            servers.append(parsed)
        return servers

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
    def queued_request_max_bytes(self) -> int:
        """The pool of requests read and not yet answered: `queued.max.request.bytes`
        when set, else odradek's own bound, raised to one request's most
        (`socket.request.max.bytes`) as Kafka requires of its key (<= 0: none)."""
        queued = self._int("queued.max.request.bytes")
        if queued > 0:
            return queued
        own = self._int("odradek.queued.max.request.bytes")
        return max(own, self.socket_request_max_bytes) if own > 0 else own

    @property
    def queued_max_requests(self) -> int:
        return self._int("queued.max.requests")

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """`max.connections.per.ip.overrides` as address -> most connections, host
        names resolved once (Kafka resolves them with InetAddress.getByName)."""
        return parse_connections_per_ip_overrides(
            str(self.values["max.connections.per.ip.overrides"] or ""))

    def listener_max_connections(self, listener: str) -> int:
        """`listener.name.<listener>.max.connections`, else `max.connections`: Kafka
        configures each listener's quota with the prefixed value overriding the plain one."""
        key = f"{LISTENER_OVERRIDE_PREFIX}{listener.lower()}.max.connections"
        raw = self.listener_overrides(listener).get("max.connections")
        if raw is None:
            return self._int("max.connections")
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, "Expected value to be a 32-bit integer", raw) from None
        if not 0 <= value <= 2**31 - 1:
            raise ConfigError(key, "Value must be at least 0", raw)
        return value

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
            # KIP-937: the deprecated difference bound caps both new bounds.
            message_timestamp_before_max_ms=min(
                self._int("log.message.timestamp.before.max.ms"),
                self._int("log.message.timestamp.difference.max.ms"),
            ),
            message_timestamp_after_max_ms=min(
                self._int("log.message.timestamp.after.max.ms"),
                self._int("log.message.timestamp.difference.max.ms"),
            ),
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
            local_retention_ms=self._int("log.local.retention.ms"),
            local_retention_bytes=self._int("log.local.retention.bytes"),
        )


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
    hint = closest(key, [*BROKER_CONFIGS, *IGNORED_KAFKA_CONFIGS])
    if key in TOPIC_CONFIGS:
        synonyms = TOPIC_CONFIGS[key].broker_synonyms
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
