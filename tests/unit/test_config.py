"""BrokerConfig: Kafka's server.properties keys, types, defaults, precedence and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from odradek.config import (
    BROKER_CONFIGS,
    BrokerConfig,
    ConfigError,
    Endpoint,
    QuorumVoter,
    parse_overrides,
    parse_properties,
)
from odradek.configdef import LONG_MAX, ConfigType, Password, java_double
from odradek.storage.log_config import LogConfig


def cfg(**props: str) -> BrokerConfig:
    """Build a config from keyword args, with '_' standing for '.' in key names."""
    return BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


def error_for(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties(props)
    return info.value


# ---- parse_properties -----------------------------------------------------------------


def test_properties_separators_equals_colon_and_whitespace() -> None:
    assert parse_properties("a=1\nb: 2\nc 3\nd\t=\t4\n") == {"a": "1", "b": "2", "c": "3",
                                                            "d": "4"}


def test_properties_comments_and_blank_lines_are_skipped() -> None:
    text = "# hash comment\n! bang comment\n\n   \n   # indented comment\nkey=value\n"
    assert parse_properties(text) == {"key": "value"}


def test_properties_line_continuation_drops_leading_blanks_of_next_line() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n          SSL://b:2\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,SSL://b:2"}


def test_properties_even_number_of_backslashes_does_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}


def test_properties_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("#comment \\\nb=y\n") == {"b": "y"}


def test_properties_escapes_in_keys_and_values() -> None:
    text = "key\\ with\\=eq\\:colon = v\\tw\\u0041\\n\n"
    assert parse_properties(text) == {"key with=eq:colon": "v\twA\n"}


def test_properties_value_keeps_trailing_blanks_and_later_keys_win() -> None:
    assert parse_properties("a = x  \na=y\n") == {"a": "y"}
    assert parse_properties("a = x  \n") == {"a": "x  "}


def test_properties_key_without_value_and_crlf_line_endings() -> None:
    assert parse_properties("empty\r\nk=v\r\n") == {"empty": "", "k": "v"}


def test_properties_malformed_unicode_escape_is_an_error() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12\n")


# ---- defaults ---------------------------------------------------------------------------


def test_no_config_gives_a_working_single_node() -> None:
    c = BrokerConfig.from_properties({})
    assert c.node_id == 1
    assert c.process_roles == {"broker", "controller"}
    assert c.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == [Path("./data")]
    assert c.inter_broker_listener_name == "PLAINTEXT"


@pytest.mark.parametrize(("key", "value"), [
    ("num.partitions", 1),
    ("default.replication.factor", 1),
    ("auto.create.topics.enable", True),
    ("delete.topic.enable", True),
    ("log.segment.bytes", 1073741824),
    ("log.roll.hours", 168),
    ("log.index.size.max.bytes", 10485760),
    ("log.index.interval.bytes", 4096),
    ("log.retention.hours", 168),
    ("log.retention.bytes", -1),
    ("log.retention.check.interval.ms", 300000),
    ("log.flush.interval.messages", LONG_MAX),
    ("log.cleanup.policy", ["delete"]),
    ("log.message.timestamp.type", "CreateTime"),
    ("log.segment.delete.delay.ms", 60000),
    ("log.cleaner.enable", True),
    ("log.cleaner.min.cleanable.ratio", 0.5),
    ("log.cleaner.delete.retention.ms", 86400000),
    ("message.max.bytes", 1048588),
    ("socket.request.max.bytes", 104857600),
    ("socket.send.buffer.bytes", 102400),
    ("num.network.threads", 3),
    ("num.io.threads", 8),
    ("min.insync.replicas", 1),
    ("unclean.leader.election.enable", False),
    ("compression.type", "producer"),
    ("offsets.topic.num.partitions", 50),
    ("offsets.topic.replication.factor", 3),
    ("offsets.retention.minutes", 10080),
    ("offsets.topic.segment.bytes", 104857600),
    ("transaction.state.log.num.partitions", 50),
    ("transaction.max.timeout.ms", 900000),
    ("transactional.id.expiration.ms", 604800000),
    ("producer.id.expiration.ms", 86400000),
    ("group.initial.rebalance.delay.ms", 3000),
    ("group.min.session.timeout.ms", 6000),
    ("group.max.session.timeout.ms", 1800000),
    ("group.max.size", 2147483647),
    ("replica.lag.time.max.ms", 30000),
    ("fetch.max.bytes", 57671680),
    ("replica.fetch.max.bytes", 1048576),
    ("queued.max.requests", 500),
    ("connections.max.idle.ms", 600000),
    ("request.timeout.ms", 30000),
    ("log.retention.ms", None),
    ("broker.rack", None),
])
def test_kafka_defaults(key: str, value: object) -> None:
    assert BrokerConfig.from_properties({}).get(key) == value


def test_offsets_topic_replication_factor_is_a_short() -> None:
    assert BROKER_CONFIGS["offsets.topic.replication.factor"].type is ConfigType.SHORT
    err = error_for({"offsets.topic.replication.factor": "40000"})
    assert "Not a number of type SHORT" in err.message


def test_typed_accessors_follow_the_keys() -> None:
    c = cfg(num_partitions="3", message_max_bytes="2000", broker_rack="r1")
    assert (c.num_partitions, c.message_max_bytes, c.broker_rack) == (3, 2000, "r1")


def test_get_of_an_unmodelled_key_raises_key_error() -> None:
    with pytest.raises(KeyError, match="nope"):
        BrokerConfig.from_properties({}).get("nope")


def test_items_lists_every_modelled_key_sorted() -> None:
    names = [name for name, _ in BrokerConfig.from_properties({}).items()]
    assert names == sorted(BROKER_CONFIGS)


# ---- values and errors ----------------------------------------------------------------


def test_value_is_trimmed_and_booleans_are_case_insensitive() -> None:
    c = BrokerConfig.from_properties({"num.partitions": " 4 ", "log.preallocate": "TRUE"})
    assert c.get("num.partitions") == 4
    assert c.get("log.preallocate") is True


def test_not_a_number_names_key_and_type() -> None:
    err = error_for({"log.segment.bytes": "abc"})
    assert err.key == "log.segment.bytes"
    assert err.message == ("Invalid value 'abc' for configuration log.segment.bytes: "
                           "Not a number of type INT")


@pytest.mark.parametrize("text", ["1_000", "1.5", "", "0x10", "2147483648", "١٢"])
def test_int_rejects_what_java_parse_int_rejects(text: str) -> None:
    assert "Not a number of type INT" in error_for({"num.io.threads": text}).message


def test_long_accepts_64_bit_values() -> None:
    assert cfg(log_retention_bytes="9223372036854775807").get("log.retention.bytes") == LONG_MAX
    assert "LONG" in error_for({"log.retention.bytes": "9223372036854775808"}).message


def test_bad_boolean() -> None:
    err = error_for({"auto.create.topics.enable": "yes"})
    assert err.message == ("Invalid value 'yes' for configuration auto.create.topics.enable: "
                           "Expected value to be either true or false")


def test_out_of_range_says_the_bound() -> None:
    assert error_for({"num.partitions": "0"}).message.endswith("Value must be at least 1")
    assert error_for({"log.cleaner.min.cleanable.ratio": "1.5"}).message.endswith(
        "Value must be no more than 1")


def test_one_of_lists_the_choices() -> None:
    err = error_for({"log.message.timestamp.type": "createtime"})
    assert err.message.endswith("String must be one of: CreateTime, LogAppendTime")
    assert "compact, delete" in error_for({"log.cleanup.policy": "delete,forever"}).message


def test_several_errors_are_reported_together() -> None:
    err = error_for({"num.partitions": "x", "log.retention.ms": "y"})
    assert "2 configuration errors" in err.message
    assert "num.partitions" in err.message and "log.retention.ms" in err.message


def test_unknown_key_stops_start_up_and_suggests_the_close_one() -> None:
    err = error_for({"log.segmnt.bytes": "1"})
    assert err.key == "log.segmnt.bytes"
    assert "Unknown configuration 'log.segmnt.bytes'" in err.message
    assert "did you mean 'log.segment.bytes'" in err.message


def test_topic_key_at_broker_level_points_to_the_broker_synonym() -> None:
    err = error_for({"retention.ms": "1"})
    assert "topic-level" in err.message and "log.retention.ms" in err.message


def test_zookeeper_connect_is_refused_with_kraft_advice() -> None:
    err = error_for({"zookeeper.connect": "localhost:2181"})
    assert err.key == "zookeeper.connect"
    assert "KRaft" in err.message


def test_known_unmodelled_kafka_keys_are_accepted_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.config"):
        c = BrokerConfig.from_properties({"metric.reporters": "", "replication.quota.window.num": "11"})
    assert c.ignored == {"metric.reporters": "", "replication.quota.window.num": "11"}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "metric.reporters, replication.quota.window.num" in warnings[0]


def test_per_listener_overrides_are_kept_for_the_security_layer() -> None:
    c = BrokerConfig.from_properties({
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "x required;",
        "listener.name.other.ssl.keystore.location": "/k"})
    assert c.listener_overrides("SASL_SSL") == {"plain.sasl.jaas.config": "x required;"}


def test_password_is_hidden_in_repr_and_error() -> None:
    c = cfg(ssl_keystore_password="s3cret")
    value = c.get("ssl.keystore.password")
    assert isinstance(value, Password) and value.reveal() == "s3cret"
    assert "s3cret" not in repr(value)


def test_originals_and_is_set_remember_what_the_user_gave() -> None:
    c = cfg(num_partitions="3")
    assert c.is_set("num.partitions") and not c.is_set("log.retention.hours")
    assert c.originals == {"num.partitions": "3"}


def test_config_cannot_be_changed_after_it_is_built() -> None:
    c = cfg()
    with pytest.raises(TypeError):
        c.values["num.partitions"] = 9  # type: ignore[index]


# ---- node.id / broker.id --------------------------------------------------------------


def test_broker_id_alone_sets_node_id() -> None:
    c = cfg(broker_id="7")
    assert c.node_id == 7 and c.get("broker.id") == 7


def test_node_id_alone_sets_broker_id() -> None:
    assert cfg(node_id="4").get("broker.id") == 4


def test_node_id_and_broker_id_must_agree() -> None:
    err = error_for({"node.id": "2", "broker.id": "3"})
    assert err.key == "broker.id" and "node.id" in err.message
    assert cfg(node_id="3", broker_id="3").node_id == 3


def test_negative_node_id_is_refused() -> None:
    assert error_for({"node.id": "-1"}).key == "node.id"
    assert error_for({"broker.id": "-1"}).key == "broker.id"


# ---- listeners --------------------------------------------------------------------------


def test_listeners_parse_names_hosts_ports_and_ipv6() -> None:
    c = cfg(listeners="plaintext://:9092, SSL://[::1]:9093,SASL_SSL://host.example:0",
            advertised_listeners="PLAINTEXT://a.example:9092")
    assert c.listeners == [Endpoint("PLAINTEXT", "", 9092), Endpoint("SSL", "::1", 9093),
                           Endpoint("SASL_SSL", "host.example", 0)]
    assert c.advertised_listeners == [Endpoint("PLAINTEXT", "a.example", 9092)]
    assert c.security_protocol("ssl") == "SSL"


def test_custom_listener_names_through_the_protocol_map() -> None:
    c = cfg(listeners="CLIENT://127.0.0.1:9092,REPL://127.0.0.1:9094",
            listener_security_protocol_map="CLIENT:SASL_SSL,REPL:PLAINTEXT",
            inter_broker_listener_name="REPL")
    assert c.security_protocol("CLIENT") == "SASL_SSL"
    assert c.inter_broker_listener_name == "REPL"


def test_controller_listener_is_not_advertised() -> None:
    c = cfg(listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            controller_listener_names="CONTROLLER")
    assert c.advertised_listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 9092)]


def test_empty_advertised_host_becomes_this_machines_name() -> None:
    import socket

    c = cfg(listeners="PLAINTEXT://:9092")
    assert c.advertised_listeners == [Endpoint("PLAINTEXT", socket.getfqdn(), 9092)]


@pytest.mark.parametrize(("listeners", "reason"), [
    ("PLAINTEXT//host:9092", "not a valid listener"),
    ("PLAINTEXT://host", "not a valid listener"),
    ("PLAINTEXT://host:port", "not a valid listener"),
    ("PLAINTEXT://host:70000", "out of range"),
    ("FOO://host:1", "listener.security.protocol.map"),
    ("PLAINTEXT://a:1,PLAINTEXT://b:2", "appears twice"),
    ("PLAINTEXT://a:1,SSL://b:1", "different port"),
    ("", "at least one listener"),
])
def test_bad_listeners_name_the_key(listeners: str, reason: str) -> None:
    err = error_for({"listeners": listeners, "inter.broker.listener.name": "PLAINTEXT"})
    assert err.key == "listeners"
    assert reason in err.message


def test_wildcard_listener_needs_advertised_listeners() -> None:
    err = error_for({"listeners": "PLAINTEXT://0.0.0.0:9092"})
    assert err.key == "advertised.listeners" and "0.0.0.0" in err.message
    c = cfg(listeners="PLAINTEXT://0.0.0.0:9092",
            advertised_listeners="PLAINTEXT://broker1:9092")
    assert c.listeners[0].host == "0.0.0.0"


def test_inter_broker_listener_must_exist() -> None:
    err = error_for({"listeners": "SSL://127.0.0.1:9093"})
    assert err.key == "security.inter.broker.protocol"
    err = error_for({"inter.broker.listener.name": "REPL"})
    assert err.key == "inter.broker.listener.name"


def test_bad_protocol_map_names_its_key() -> None:
    err = error_for({"listener.security.protocol.map": "CLIENT:TLS"})
    assert err.key == "listener.security.protocol.map" and "TLS" in err.message


# ---- precedence and LogConfig -----------------------------------------------------------


def test_log_dirs_wins_over_log_dir() -> None:
    assert cfg(log_dir="/x").log_dirs == [Path("/x")]
    assert cfg(log_dir="/x", log_dirs="/a, /b").log_dirs == [Path("/a"), Path("/b")]


def test_duplicate_log_dirs_are_refused() -> None:
    assert error_for({"log.dirs": "/a,/a"}).key == "log.dirs"


def test_roll_ms_wins_over_roll_hours() -> None:
    assert cfg(log_roll_hours="2").log_config().segment_ms == 7_200_000
    assert cfg(log_roll_hours="2", log_roll_ms="1000").log_config().segment_ms == 1000
    assert cfg(log_roll_jitter_hours="1").log_config().segment_jitter_ms == 3_600_000
    assert cfg(log_roll_jitter_hours="1",
               log_roll_jitter_ms="5").log_config().segment_jitter_ms == 5


def test_retention_ms_over_minutes_over_hours() -> None:
    assert cfg().log_retention_time_ms == 168 * 3_600_000
    assert cfg(log_retention_hours="1").log_retention_time_ms == 3_600_000
    assert cfg(log_retention_hours="1", log_retention_minutes="2").log_retention_time_ms == 120_000
    assert cfg(log_retention_hours="1", log_retention_minutes="2",
               log_retention_ms="5").log_retention_time_ms == 5


def test_negative_retention_means_forever() -> None:
    assert cfg(log_retention_ms="-5").log_config().retention_ms == -1
    assert cfg(log_retention_hours="-1").log_config().retention_ms == -1


def test_flush_ms_defaults_to_the_scheduler_interval() -> None:
    assert cfg(log_flush_scheduler_interval_ms="3000").log_config().flush_ms == 3000
    assert cfg(log_flush_scheduler_interval_ms="3000",
               log_flush_interval_ms="10").log_config().flush_ms == 10


def test_default_log_config_equals_kafka_topic_defaults() -> None:
    assert BrokerConfig.from_properties({}).log_config() == LogConfig()


def test_log_config_maps_every_broker_key() -> None:
    c = BrokerConfig.from_properties({
        "log.segment.bytes": "1000", "log.index.size.max.bytes": "4096",
        "log.index.interval.bytes": "100", "log.retention.bytes": "5000",
        "log.flush.interval.messages": "10", "message.max.bytes": "900",
        "log.message.timestamp.type": "LogAppendTime", "log.cleanup.policy": "compact,delete",
        "log.segment.delete.delay.ms": "7", "min.insync.replicas": "2",
        "log.cleaner.delete.retention.ms": "8", "log.cleaner.min.compaction.lag.ms": "9",
        "log.cleaner.max.compaction.lag.ms": "99", "log.cleaner.min.cleanable.ratio": "0.25",
        "compression.type": "zstd", "log.preallocate": "true",
        "unclean.leader.election.enable": "true",
    })
    assert c.log_config() == LogConfig(
        segment_bytes=1000, segment_index_bytes=4096, index_interval_bytes=100,
        retention_bytes=5000, flush_messages=10, max_message_bytes=900,
        message_timestamp_type="LogAppendTime", cleanup_policy="compact,delete",
        file_delete_delay_ms=7, min_insync_replicas=2, delete_retention_ms=8,
        min_compaction_lag_ms=9, max_compaction_lag_ms=99, min_cleanable_dirty_ratio=0.25,
        compression_type="zstd", preallocate=True, unclean_leader_election_enable=True)


def test_min_compaction_lag_above_max_is_refused() -> None:
    err = error_for({"log.cleaner.min.compaction.lag.ms": "10",
                     "log.cleaner.max.compaction.lag.ms": "5"})
    assert err.key == "log.cleaner.min.compaction.lag.ms"


# ---- load: file, overrides and log dirs -------------------------------------------------


def test_load_reads_file_then_overrides_win(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"# test\nnum.partitions=3\nlog.dirs={tmp_path / 'logs'}\n"
                     "log.retention.hours=1\n", encoding="utf-8")
    c = BrokerConfig.load(str(props), ["num.partitions=5", "log.cleaner.enable=false"])
    assert c.num_partitions == 5
    assert c.get("log.retention.hours") == 1
    assert c.get("log.cleaner.enable") is False
    assert (tmp_path / "logs").is_dir()  # created


def test_load_without_file_uses_overrides_only(tmp_path: Path) -> None:
    c = BrokerConfig.load(None, [f"log.dirs={tmp_path / 'd'}"])
    assert c.log_dirs == [tmp_path / "d"]


def test_load_of_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Cannot read config file"):
        BrokerConfig.load(str(tmp_path / "nope.properties"), [])


def test_override_must_be_key_equals_value() -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["num.partitions"])
    assert parse_overrides(["a=b=c", " k = v "]) == {"a": "b=c", "k": "v"}


def test_log_dir_under_a_regular_file_is_unusable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # The metadata log dir (the first) must be usable...
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [f"log.dirs={blocker / 'sub'},{tmp_path / 'ok'}"])
    assert info.value.key == "log.dirs"
    assert str(blocker / "sub") in info.value.message
    # ...another one starts offline (storage/log_manager.py), as in Kafka...
    config = BrokerConfig.load(None, [f"log.dirs={tmp_path / 'ok'},{blocker / 'sub'}"])
    assert config.log_dirs == [tmp_path / "ok", blocker / "sub"]
    # ...unless no log dir is usable at all.
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, [f"log.dirs={blocker / 'a'},{blocker / 'b'}",
                                 f"metadata.log.dir={tmp_path / 'meta'}"])


def test_log_dir_that_is_a_file_is_unusable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [f"log.dir={blocker}"])
    assert info.value.key == "log.dir"
    assert "not usable: Not a directory" in info.value.message


def test_metadata_log_dir_is_checked_too(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(None, [f"log.dirs={tmp_path / 'd'}", f"metadata.log.dir={blocker}"])
    assert info.value.key == "metadata.log.dir"
    assert cfg(log_dirs="/a,/b").metadata_log_dir == Path("/a")


def test_java_double_formatting() -> None:
    assert [java_double(v) for v in (0.5, 1.0, 1e7, 1.7976931348623157e308, 5e-4)] == [
        "0.5", "1.0", "1.0E7", "1.7976931348623157E308", "5.0E-4"]


# ---- roles and the controller quorum ----------------------------------------------------


def test_quorum_voters_and_bootstrap_servers_are_parsed() -> None:
    c = cfg(process_roles="broker", controller_quorum_voters="1@127.0.0.1:9093, 2@[::1]:9094",
            controller_quorum_bootstrap_servers="a.example:9093")
    assert c.quorum_voters == [QuorumVoter(1, "127.0.0.1", 9093), QuorumVoter(2, "::1", 9094)]
    assert c.quorum_bootstrap_servers == [("a.example", 9093)]
    assert cfg().quorum_voters == []


@pytest.mark.parametrize("voters", ["1@host", "x@host:1", "1:host:1", "1@h:1,1@h:2",
                                    "1@h:99999"])
def test_bad_quorum_voters_name_the_key(voters: str) -> None:
    assert error_for({"controller.quorum.voters": voters}).key == "controller.quorum.voters"


def test_bad_bootstrap_server_names_the_key() -> None:
    err = error_for({"controller.quorum.bootstrap.servers": "nohostport"})
    assert err.key == "controller.quorum.bootstrap.servers"


def test_combined_mode_may_be_one_of_several_voters() -> None:
    assert cfg(process_roles="broker,controller",
               controller_quorum_voters="1@h:9093,2@h:9094").node_id == 1
    assert cfg(process_roles="controller",
               controller_quorum_voters="1@h:9093,2@h:9094").node_id == 1


def test_a_controller_must_be_one_of_the_voters() -> None:
    err = error_for({"node.id": "1", "controller.quorum.voters": "2@h:9093"})
    assert err.key == "controller.quorum.voters" and "node.id 1" in err.message
    assert cfg(process_roles="broker", controller_quorum_voters="2@h:9093").node_id == 1


@pytest.mark.parametrize("roles", ["", "broker,broker", "broker,zookeeper"])
def test_bad_process_roles(roles: str) -> None:
    assert error_for({"process.roles": roles}).key == "process.roles"


def test_a_controller_listens_on_a_controller_listener() -> None:
    err = error_for({"controller.listener.names": "CONTROLLER"})
    assert err.key == "controller.listener.names"
    c = cfg(listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            controller_listener_names="CONTROLLER")
    assert c.controller_listener_names == {"CONTROLLER"}
