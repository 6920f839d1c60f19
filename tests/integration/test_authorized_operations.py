"""KIP-430 authorized operations: without an authorizer every operation the
resource type supports (Kafka's AclEntry.supportedOperations, GROUP with its
Kafka 4 config operations); with the ACL authorizer the allowed subset. Read with
the Java admin (kafka-clients 3.9), librdkafka's admin and Metadata v10."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Rt

from odradek.protocol import api
from tests.integration.clients import TIMEOUT, ck_admin, create_topic
from tests.integration.test_java_client import kafka_jars
from tests.integration.txn_helpers import call

pytestmark = [pytest.mark.integration, pytest.mark.odradek_only]

SOURCE = Path(__file__).parent / "java" / "OdradekJavaAuthOps.java"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC_OPS = {"ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS",
             "READ", "WRITE"}
CLUSTER_OPS = {"ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
               "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"}
GROUP_OPS = {"DELETE", "DESCRIBE", "READ", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def _names(ops) -> set[str]:
    return {op.name for op in ops}


def _bits(names: set[str]) -> int:
    return sum(1 << AclOperation[n].value for n in names)


def _ck_ops(bootstrap: str, topic: str, group: str) -> tuple[set, set, set]:
    admin = ck_admin(bootstrap)
    t = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                              request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    c = admin.describe_cluster(include_authorized_operations=True,
                               request_timeout=TIMEOUT).result(TIMEOUT)
    g = admin.describe_consumer_groups([group], include_authorized_operations=True,
                                       request_timeout=TIMEOUT)[group].result(TIMEOUT)
    return (_names(t.authorized_operations), _names(c.authorized_operations),
            _names(g.authorized_operations))


def _metadata_v10(bootstrap: str, topic: str) -> tuple[int, int]:
    r = call(bootstrap, api.ApiKey.METADATA, 10, {
        "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True})
    return r.topics[0].topic_authorized_operations, r.cluster_authorized_operations


def _java_ops(bootstrap: str, topic: str, group: str, tmp: Path) -> dict[str, set[str]]:
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    jars = os.pathsep.join(str(j) for j in kafka_jars())
    out = tmp / "classes"
    compiled = subprocess.run(["javac", "-Xlint:none", "-cp", jars, "-d", str(out),
                               str(SOURCE)], capture_output=True, text=True, timeout=180,
                              check=False)
    assert compiled.returncode == 0, compiled.stderr
    run = subprocess.run(["java", "-Xmx256m", "-cp", f"{out}{os.pathsep}{jars}",
                          "OdradekJavaAuthOps", bootstrap, topic, group],
                         capture_output=True, text=True, timeout=180, check=False)
    assert run.stdout.rstrip().endswith("DONE"), run.stdout + run.stderr[-3000:]
    return {what: set(ops.split(",")) - {""}
            for what, ops in re.findall(r"^OPS (\S+) (\S*)$", run.stdout, re.MULTILINE)}


def test_without_an_authorizer_every_supported_operation(broker_factory, topic_name,
                                                         tmp_path):
    b = broker_factory({"offsets.topic.num.partitions": 2})
    create_topic(b.bootstrap, topic_name, 1)
    assert _ck_ops(b.bootstrap, topic_name, "g-any") == (TOPIC_OPS, CLUSTER_OPS, GROUP_OPS)
    assert _metadata_v10(b.bootstrap, topic_name) == (_bits(TOPIC_OPS), _bits(CLUSTER_OPS))
    assert _java_ops(b.bootstrap, topic_name, "g-any", tmp_path) == {
        "topic": TOPIC_OPS, "cluster": CLUSTER_OPS, "group": GROUP_OPS}


def test_with_the_acl_authorizer_the_allowed_subset(broker_factory, tmp_path):
    b = broker_factory({"authorizer.class.name": STANDARD,
                        "allow.everyone.if.no.acl.found": "true",
                        "super.users": "User:admin", "offsets.topic.num.partitions": 2})
    create_topic(b.bootstrap, "rd-topic", 1)
    admin = ck_admin(b.bootstrap)

    def allow(rtype: Rt, name: str, op: AclOperation) -> AclBinding:
        return AclBinding(rtype, name, Pattern.LITERAL, "User:ANONYMOUS", "*", op,
                          AclPermissionType.ALLOW)

    acls = [allow(Rt.BROKER, "kafka-cluster", AclOperation.ALTER),
            allow(Rt.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
            allow(Rt.TOPIC, "rd-topic", AclOperation.READ),
            allow(Rt.GROUP, "rd-group", AclOperation.READ),
            allow(Rt.GROUP, "rd-group", AclOperation.ALTER_CONFIGS)]
    for f in admin.create_acls(acls, request_timeout=TIMEOUT).values():
        f.result(TIMEOUT)
    # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's rules)
    expected = ({"READ", "DESCRIBE"}, {"ALTER", "DESCRIBE"},
                {"READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"})
    assert _ck_ops(b.bootstrap, "rd-topic", "rd-group") == expected
    assert _metadata_v10(b.bootstrap, "rd-topic") == (_bits(expected[0]), _bits(expected[1]))
    assert _java_ops(b.bootstrap, "rd-topic", "rd-group", tmp_path) == {
        "topic": expected[0], "cluster": expected[1], "group": expected[2]}
