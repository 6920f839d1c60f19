"""KIP-848 group configs: GROUP config resources (type 32) in IncrementalAlterConfigs
and DescribeConfigs, stored in the metadata log and applied by the group coordinator."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.protocol import api
from tests.integration.clients import Wire, ck_admin, create_topic
from tests.integration.test_groups_helpers import kio_call, start_group_broker
from tests.integration.txn_helpers import call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

GROUP, INVALID_CONFIG, NONE = 32, 40, 0
# the share-group keys (KIP-932), at their defaults (DEFAULT_CONFIG)
SHARE_DEFAULTS = {
    "share.auto.offset.reset": ("latest", 5),
    "share.record.lock.duration.ms": ("30000", 5),
    "share.session.timeout.ms": ("45000", 5),
    "share.heartbeat.interval.ms": ("5000", 5),
    "share.isolation.level": ("read_uncommitted", 5),
}
BOUNDS = {
    "group.consumer.min.session.timeout.ms": 2000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.max.heartbeat.interval.ms": 15000,
}


def _alter(bootstrap: str, group: str, **configs: str | None) -> tuple[int, str | None]:
    r = call(bootstrap, api.ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configs": [
            {"name": k.replace("_", "."), "config_operation": 0 if v is not None else 1,
             "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    res = r.responses[0]
    return res.error_code.value, res.error_message


def _heartbeat(bootstrap: str, group: str, topic: str, member_id: str = "",
               epoch: int = 0) -> object:
    body = {"group_id": group, "member_id": member_id, "member_epoch": epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    deadline = time.monotonic() + 30
    while True:  # the offsets topic is created and loaded on first use
        with Wire(bootstrap) as w:
            r = kio_call(w, api.ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, body)
        if r.error_code.value not in (14, 15) or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def _interval_ms(r: object) -> int:
    return int(r.heartbeat_interval.total_seconds() * 1000)  # type: ignore[attr-defined]


def _describe(bootstrap: str, group: str) -> object:
    with Wire(bootstrap) as w:
        return kio_call(w, api.ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]


def test_group_configs_are_validated_stored_described_and_applied(tmp_path, broker_kind,
                                                                  topic_name):
    b = start_group_broker(tmp_path, broker_kind, **BOUNDS)
    try:
        create_topic(b.bootstrap, topic_name, 2)
        admin = ck_admin(b.bootstrap)
        group = "g-configured"
        # librdkafka's GROUP config resource (it sends type 32)
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("consumer.session.timeout.ms", "3000",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("consumer.heartbeat.interval.ms", "600",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)
        described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
        entries = next(iter(described.values())).result(15)
        assert {k: (e.value, e.source) for k, e in entries.items()} == {
            "consumer.session.timeout.ms": ("3000", 8),  # GROUP_CONFIG
            "consumer.heartbeat.interval.ms": ("600", 8), **SHARE_DEFAULTS}
        other = admin.describe_configs([ConfigResource(ResourceType.GROUP, "g-other")])
        entries = next(iter(other.values())).result(15)
        assert {k: (e.value, e.source) for k, e in entries.items()} == {
            # DEFAULT_CONFIG: the broker's group.consumer.* (GROUP_BROKER_OVERRIDES)
            "consumer.session.timeout.ms": ("6000", 5),
            "consumer.heartbeat.interval.ms": ("500", 5), **SHARE_DEFAULTS}

        # Kafka's GroupConfig validation: names, broker bounds, session > interval
        assert _alter(b.bootstrap, group, **{"consumer.session.timeout.ms": "1000"}) == (
            INVALID_CONFIG, ("consumer.session.timeout.ms must be greater than or equal to "
                             "group.consumer.min.session.timeout.ms"))
        assert _alter(b.bootstrap, group, **{"consumer.heartbeat.interval.ms": "20000"})[0] \
            == INVALID_CONFIG
        assert _alter(b.bootstrap, group, **{"consumer.heartbeat.interval.ms": "3000"}) == (
            INVALID_CONFIG, ("consumer.session.timeout.ms must be greater than "
                             "consumer.heartbeat.interval.ms"))
        assert _alter(b.bootstrap, group, **{"session.timeout.ms": "3000"}) == (
            INVALID_CONFIG, "Unknown group config name: session.timeout.ms")
        assert _alter(b.bootstrap, "", **{"consumer.session.timeout.ms": "3000"})[0] == 42

        # applied: the interval members are given, and the session they expire after
        hb = _heartbeat(b.bootstrap, group, topic_name)
        assert hb.error_code.value == NONE and _interval_ms(hb) == 600
        member, epoch = hb.member_id, hb.member_epoch
        assert len(_describe(b.bootstrap, group).members) == 1
        start = time.monotonic()
        while _describe(b.bootstrap, group).members and time.monotonic() - start < 20:
            time.sleep(0.1)
        gone = time.monotonic() - start
        assert not _describe(b.bootstrap, group).members
        assert 2.5 <= gone <= 3.0 + 2.0, gone  # consumer.session.timeout.ms=3000
        assert _heartbeat(b.bootstrap, group, topic_name, member, epoch).error_code.value \
            == 25  # UNKNOWN_MEMBER_ID: it was removed
        # a group without configs keeps the broker's values
        assert _interval_ms(_heartbeat(b.bootstrap, "g-other", topic_name)) == 500

        # KIP-1142: ListConfigResources lists the configured group with the topics
        # and brokers; v0 (client-metrics subscriptions) has none to list
        listed = call(b.bootstrap, api.ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
        assert listed.error_code.value == NONE
        assert {(r.resource_type, r.resource_name) for r in listed.config_resources} >= {
            (2, topic_name), (4, "1"), (GROUP, group)}
        only = call(b.bootstrap, api.ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [GROUP]})
        assert [(r.resource_type, r.resource_name) for r in only.config_resources] == [
            (GROUP, group)]
        assert call(b.bootstrap, api.ApiKey.LIST_CONFIG_RESOURCES, 1, {
            "resource_types": [8]}).error_code.value == 35  # BROKER_LOGGER: not listed
        v0 = call(b.bootstrap, api.ApiKey.LIST_CONFIG_RESOURCES, 0, {})
        assert (v0.error_code.value, v0.config_resources) == (NONE, ())

        # stored in the metadata log: they survive a restart; a delete restores the default
        b.restart()
        assert _interval_ms(_heartbeat(b.bootstrap, group, topic_name)) == 600
        assert _alter(b.bootstrap, group, **{"consumer.heartbeat.interval.ms": None}) == (
            NONE, None)
        assert _interval_ms(_heartbeat(b.bootstrap, group, topic_name)) == 500
    finally:
        b.close()
