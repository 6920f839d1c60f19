"""DescribeConfigs synonyms and sources as Kafka's ConfigHelper orders and filters
them, one case per source, read with librdkafka (which asks for synonyms) and at
the protocol level for the cluster-default BROKER resource ("")."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.protocol import api
from tests.integration.clients import ck_admin, create_topic
from tests.integration.txn_helpers import call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

TOPIC, BROKER, DEFAULT_BROKER, STATIC, DEFAULT = 1, 2, 3, 4, 5
SERVER = {"log.segment.bytes": 2_000_000, "log.retention.minutes": 5}


def _describe(bootstrap: str, rtype: int, name: str) -> dict:
    """Every entry as (value, source, synonyms), read with DescribeConfigs v4 (the
    synonym list exactly: librdkafka keys its synonyms by name, so a key listed
    twice, set in the file and by default, would show once)."""
    r = call(bootstrap, api.ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": rtype, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    assert r.results[0].error_code.value == 0
    return {c.name: (c.value, c.config_source, [(s.name, s.value, s.source)
                                                 for s in c.synonyms])
            for c in r.results[0].configs}


def _ck_sources(admin, rtype: ResourceType, name: str) -> dict:
    """(value, source) of every entry as librdkafka's admin reads them."""
    res = ConfigResource(rtype, name)
    entries = admin.describe_configs([res], request_timeout=15)[res].result(15)
    return {k: (e.value, e.source) for k, e in entries.items()}


@pytest.fixture
def configured(broker_factory):
    return broker_factory(SERVER)


def test_topic_sources_and_synonyms(configured, topic_name):
    b = configured
    create_topic(b.bootstrap, topic_name, 1, config={"max.message.bytes": "2000"})
    got = _describe(b.bootstrap, 2, topic_name)
    # DYNAMIC_TOPIC_CONFIG: the override, then the broker key's own synonyms
    assert got["max.message.bytes"] == ("2000", TOPIC, [
        ("max.message.bytes", "2000", TOPIC), ("message.max.bytes", "1048588", DEFAULT)])
    # STATIC_BROKER_CONFIG: set in the file, then its default
    assert got["segment.bytes"] == ("2000000", STATIC, [
        ("log.segment.bytes", "2000000", STATIC), ("log.segment.bytes", "1073741824", DEFAULT)])
    # DEFAULT_CONFIG with a synonym: the broker key's default
    assert got["cleanup.policy"] == ("delete", DEFAULT, [
        ("log.cleanup.policy", "delete", DEFAULT)])
    # Kafka drops what comes before the first log.retention.ms entry: with only
    # log.retention.minutes set (and log.retention.hours' default), none is listed
    assert got["retention.ms"] == ("300000", DEFAULT, [])
    assert got["segment.ms"] == ("604800000", DEFAULT, [])  # log.roll.ms has no value
    # DEFAULT_CONFIG without a broker synonym
    assert got["remote.storage.enable"] == ("false", DEFAULT, [])
    # librdkafka's admin reads the same values and sources
    assert _ck_sources(ck_admin(b.bootstrap), ResourceType.TOPIC, topic_name) == {
        k: (v, src) for k, (v, src, _) in got.items()}


def test_broker_sources_and_synonyms(configured):
    b = configured
    admin = ck_admin(b.bootstrap)
    rate = "leader.replication.throttled.rate"
    follower = "follower.replication.throttled.rate"
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(rate, "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(15)
    # the cluster default (librdkafka refuses an empty broker name)
    r = call(b.bootstrap, api.ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "config_operation": 0, "value": v}
            for k, v in ((rate, "2000"), (follower, "3000"))]}], "validate_only": False})
    assert r.responses[0].error_code.value == 0
    got = _describe(b.bootstrap, 4, "1")
    maximum = str(2**63 - 1)
    # DYNAMIC_BROKER_CONFIG, then the cluster default, then the default
    assert got[rate] == ("1000", BROKER, [
        (rate, "1000", BROKER), (rate, "2000", DEFAULT_BROKER), (rate, maximum, DEFAULT)])
    # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert got[follower] == ("3000", DEFAULT_BROKER, [
        (follower, "3000", DEFAULT_BROKER), (follower, maximum, DEFAULT)])
    # STATIC_BROKER_CONFIG; and the retention keys: each lists from its own name on
    assert got["log.segment.bytes"][1] == STATIC
    assert got["log.retention.minutes"] == ("5", STATIC, [
        ("log.retention.minutes", "5", STATIC), ("log.retention.hours", "168", DEFAULT)])
    assert got["log.retention.ms"] == (None, DEFAULT, [])
    assert got["log.retention.hours"] == ("168", DEFAULT, [
        ("log.retention.hours", "168", DEFAULT)])
    assert _ck_sources(admin, ResourceType.BROKER, "1") == {
        k: (v, src) for k, (v, src, _) in got.items()}
    # the cluster default (resource ""): only the keys it sets, only their
    # DYNAMIC_DEFAULT_BROKER_CONFIG synonyms (Kafka's createBrokerConfigEntry);
    # min.insync.replicas: the new cluster's controller set it with eligible
    # leader replicas (KIP-966), as Kafka 4.1's does
    min_isr = "min.insync.replicas"
    assert _describe(b.bootstrap, 4, "") == {
        min_isr: ("1", DEFAULT_BROKER, [(min_isr, "1", DEFAULT_BROKER)]),
        rate: ("2000", DEFAULT_BROKER, [(rate, "2000", DEFAULT_BROKER)]),
        follower: ("3000", DEFAULT_BROKER, [(follower, "3000", DEFAULT_BROKER)])}
