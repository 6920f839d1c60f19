"""ACLs against a real broker, driven by confluent-kafka (principal User:ANONYMOUS:
PLAINTEXT, no SASL yet).

The broker runs Kafka's StandardAuthorizer with `allow.everyone.if.no.acl.found`
so that ANONYMOUS can write the first ACLs (nothing has any yet); those ACLs
then give every resource type an ACL for somebody else (`User:nobody` on `*`),
so ANONYMOUS is denied everything it is not granted, and grant it what starts
with `ok-`. `super.users` names an operator, not ANONYMOUS.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.clients import (
    TIMEOUT,
    Out,
    ck_admin,
    ck_consume,
    ck_consumer,
    ck_produce,
    create_topic,
)

pytestmark = [pytest.mark.timeout(180), pytest.mark.odradek_only]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)


def binding(rtype, name, op, perm=ALLOW, who=ANON, pattern=LIT) -> AclBinding:
    return AclBinding(rtype, name, pattern, who, "*", op, perm)


BASE_ACLS = [
    binding(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
    binding(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
    binding(ResourceType.TOPIC, "*", AclOperation.READ, who="User:nobody"),
    binding(ResourceType.GROUP, "*", AclOperation.READ, who="User:nobody"),
    binding(ResourceType.TRANSACTIONAL_ID, "*", AclOperation.WRITE, who="User:nobody"),
    binding(ResourceType.TOPIC, "ok-", AclOperation.ALL, pattern=PRE),
    binding(ResourceType.GROUP, "ok-", AclOperation.ALL, pattern=PRE),
]


def _create_acls(admin, acls) -> None:
    for f in admin.create_acls(acls, request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def _error(fut) -> KafkaError:
    with pytest.raises(KafkaException) as ei:
        fut.result(timeout=TIMEOUT)
    return ei.value.args[0]


@pytest.fixture
def secured(broker_factory):
    broker = broker_factory({"authorizer.class.name": STANDARD,
                             "allow.everyone.if.no.acl.found": "true",
                             "super.users": "User:admin"})
    # before any ACL: everyone may do anything (allow.everyone.if.no.acl.found)
    create_topic(broker.bootstrap, "ok-topic")
    create_topic(broker.bootstrap, "no-topic")
    _create_acls(ck_admin(broker.bootstrap), BASE_ACLS)
    return broker


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker_factory):
    broker = broker_factory()
    admin = ck_admin(broker.bootstrap)
    # (librdkafka 2.x reports DescribeAcls' top-level error as an empty answer)
    (fut,) = admin.create_acls([BASE_ACLS[0]], request_timeout=TIMEOUT).values()
    assert _error(fut).code() == KafkaError.SECURITY_DISABLED


def test_acls_are_created_described_and_deleted(secured):
    admin = ck_admin(secured.bootstrap)
    listed = admin.describe_acls(EVERYTHING, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert sorted(map(str, listed)) == sorted(map(str, BASE_ACLS))
    matching = AclBindingFilter(ResourceType.TOPIC, "ok-topic", ResourcePatternType.MATCH,
                                None, None, AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(matching, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert sorted(b.name for b in found) == ["*", "ok-"]
    extra = binding(ResourceType.TOPIC, "tmp", AclOperation.READ)
    _create_acls(admin, [extra])
    only = AclBindingFilter(ResourceType.TOPIC, "tmp", LIT, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)
    (fut,) = admin.delete_acls([only], request_timeout=TIMEOUT).values()
    assert [str(b) for b in fut.result(timeout=TIMEOUT)] == [str(extra)]
    # a binding Kafka refuses: INVALID_REQUEST (a non-cluster name for CLUSTER)
    bad = binding(ResourceType.BROKER, "other", AclOperation.ALTER)
    (fut,) = admin.create_acls([bad], request_timeout=TIMEOUT).values()
    assert _error(fut).code() == KafkaError.INVALID_REQUEST


def test_metadata_hides_topics_the_principal_may_not_describe(secured):
    admin = ck_admin(secured.bootstrap)
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert "ok-topic" in topics and "no-topic" not in topics
    named = admin.list_topics("no-topic", timeout=TIMEOUT).topics["no-topic"]
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_produce_and_consume_need_write_read_and_the_group(secured):
    boot = secured.bootstrap
    ok = ck_produce(boot, "ok-topic", [Out(b"k", b"v")])
    assert all(d.error is None for d in ok)
    denied = ck_produce(boot, "no-topic", [Out(b"k", b"v")], timeout=20, raise_on_error=False)
    assert denied and all(d.error is not None for d in denied)
    assert {d.error.code() for d in denied} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    records = ck_consume(boot, "ok-topic", 1, **{"group.id": "ok-unused"})
    assert len(records) == 1
    committed = ck_consumer(boot, **{"group.id": "ok-group"})
    try:
        committed.commit(offsets=[TopicPartition("ok-topic", 0, 1)], asynchronous=False)
    finally:
        committed.close()
    refused = ck_consumer(boot, **{"group.id": "no-group"})
    try:
        with pytest.raises(KafkaException) as ei:
            refused.commit(offsets=[TopicPartition("ok-topic", 0, 1)], asynchronous=False)
        # FindCoordinator already answers GROUP_AUTHORIZATION_FAILED; librdkafka
        # then reports the commit as waiting for a coordinator
        assert ei.value.args[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                           KafkaError._WAIT_COORD)
    finally:
        refused.close()


def test_admin_topic_apis_check_create_and_delete(secured):
    admin = ck_admin(secured.bootstrap)
    fs = admin.create_topics([NewTopic("ok-new", 1, 1), NewTopic("no-new", 1, 1)],
                             request_timeout=TIMEOUT)
    fs["ok-new"].result(timeout=TIMEOUT)
    assert _error(fs["no-new"]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    fs = admin.delete_topics(["no-topic"], request_timeout=TIMEOUT)
    assert _error(fs["no-topic"]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a DENY wins over the prefixed ALL
    _create_acls(admin, [binding(ResourceType.TOPIC, "ok-new", AclOperation.DELETE, DENY)])
    fs = admin.delete_topics(["ok-new"], request_timeout=TIMEOUT)
    assert _error(fs["ok-new"]).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_without_alter_on_the_cluster_acls_cannot_be_changed(secured):
    admin = ck_admin(secured.bootstrap)
    alter = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", LIT, ANON, None,
                             AclOperation.ALTER, AclPermissionType.ALLOW)
    (fut,) = admin.delete_acls([alter], request_timeout=TIMEOUT).values()
    assert len(fut.result(timeout=TIMEOUT)) == 1
    (fut,) = admin.create_acls([BASE_ACLS[0]], request_timeout=TIMEOUT).values()
    assert _error(fut).code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acls_survive_kill_9_and_restart(secured):
    admin = ck_admin(secured.bootstrap)
    before = admin.describe_acls(EVERYTHING, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    secured.kill9()
    secured.start()
    admin = ck_admin(secured.bootstrap)
    after = admin.describe_acls(EVERYTHING, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert sorted(map(str, after)) == sorted(map(str, before))
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert "ok-topic" in topics and "no-topic" not in topics


def test_super_users_pass_every_check(broker_factory):
    broker = broker_factory({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "super.users": "User:admin;User:ANONYMOUS"})
    create_topic(broker.bootstrap, "anything")  # no ACL at all, allow.everyone false
    assert ck_produce(broker.bootstrap, "anything", [Out(b"k", b"v")])[0].error is None
