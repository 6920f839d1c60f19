"""API versions Kafka 4 added whose semantics odradek serves: ApiVersions v4,
Metadata v13 (top-level error code, KIP-1102), DescribeCluster v2 (fenced
brokers on request, KIP-1073), DescribeLogDirs v5 (is_cordoned, KIP-1066)."""

from __future__ import annotations

import time

import pytest

from odradek.protocol import api
from tests.integration.clients import ck_admin, create_topic
from tests.integration.cluster_proc import ClusterProcesses
from tests.integration.txn_helpers import call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]


def test_kafka4_versions_on_a_cluster_with_a_fenced_broker(tmp_path, broker_kind, topic_name):
    if broker_kind != "odradek":
        pytest.skip("a KRaft cluster of odradek nodes")
    c = ClusterProcesses(tmp_path, brokers=2).start()
    try:
        b1 = c.brokers[1].bootstrap
        create_topic(b1, topic_name, 2)
        versions = call(b1, api.ApiKey.API_VERSIONS, 4, {
            "client_software_name": "t", "client_software_version": "1"})
        assert versions.error_code.value == 0
        offered = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert offered == dict(api.SUPPORTED_VERSIONS)
        assert offered[api.ApiKey.METADATA][1] >= 13
        md = call(b1, api.ApiKey.METADATA, 13, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
        assert md.error_code.value == 0 and {b.node_id for b in md.brokers} == {1, 2}
        dirs = call(b1, api.ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})
        (result,) = dirs.results
        assert result.error_code.value == 0 and result.total_bytes > 0
        assert result.usable_bytes > 0 and result.is_cordoned is False
        assert {t.name for t in result.topics} >= {topic_name}

        c.brokers[2].stop()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shown = call(b1, api.ApiKey.DESCRIBE_CLUSTER, 2, {
                "include_cluster_authorized_operations": False, "endpoint_type": 1,
                "include_fenced_brokers": False})
            if [b.broker_id for b in shown.brokers] == [1]:
                break
            time.sleep(0.2)
        assert [(b.broker_id, b.is_fenced) for b in shown.brokers] == [(1, False)]
        every = call(b1, api.ApiKey.DESCRIBE_CLUSTER, 2, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": True})
        assert [(b.broker_id, b.is_fenced) for b in every.brokers] == [(1, False), (2, True)]
        # librdkafka's admin (DescribeCluster at its own version) sees the same
        admin = ck_admin(b1)
        assert {b.id for b in admin.describe_cluster().result(15).nodes} == {1}
    finally:
        c.close()
