"""The ACL authorizer's semantics (security/acl.py), Kafka's StandardAuthorizer's:
literal, wildcard and prefixed patterns, principals and hosts, implied
operations, DENY wins, super.users, allow.everyone.if.no.acl.found; filters;
ACLs in the metadata image and its snapshot records."""

from __future__ import annotations

import pytest

from odradek.metadata import acl_control
from odradek.metadata import image as I
from odradek.metadata import records as R
from odradek.security.acl import (
    AclAuthorizer,
    AclBinding,
    AclFilter,
    PatternType,
    Permission,
    authorized_operations,
)
from odradek.security.resources import AclOperation as Op
from odradek.security.resources import Action, Principal
from odradek.security.resources import ResourceType as Res

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(name: str = "orders", op: Op = Op.READ, perm: Permission = ALLOW,
        who: str = "User:alice", host: str = "*", pattern: PatternType = LIT,
        res: Res = Res.TOPIC) -> AclBinding:
    return AclBinding(res, name, pattern, who, host, op, perm)


def authorizer(*acls: AclBinding, supers: str = "", everyone: bool = False) -> AclAuthorizer:
    a = AclAuthorizer.from_config(supers, everyone)
    a.update({str(i): b for i, b in enumerate(acls)})
    return a


def may(a: AclAuthorizer, op: Op, name: str = "orders", who: Principal = ALICE,
        host: str = "10.0.0.1", res: Res = Res.TOPIC) -> bool:
    return a.authorize(who, host, [Action(op, res, name)])[0]


def test_a_literal_acl_allows_its_principal_its_operation_on_its_resource_only():
    a = authorizer(acl())
    assert may(a, Op.READ)
    assert not may(a, Op.WRITE)
    assert not may(a, Op.READ, who=BOB)
    assert not may(a, Op.READ, name="orders2")
    assert not may(a, Op.READ, res=Res.GROUP)


def test_a_prefixed_acl_covers_every_name_that_starts_with_it():
    a = authorizer(acl("ord", pattern=PRE))
    assert may(a, Op.READ, "ord") and may(a, Op.READ, "orders") and may(a, Op.READ, "ordx.y")
    assert not may(a, Op.READ, "or") and not may(a, Op.READ, "xorders")


def test_wildcard_resource_principal_and_host():
    assert may(authorizer(acl("*")), Op.READ, "anything")
    assert may(authorizer(acl(who="User:*")), Op.READ, who=BOB)
    assert not may(authorizer(acl(who="Group:*")), Op.READ, who=BOB)
    only_there = authorizer(acl(host="10.0.0.9"))
    assert not may(only_there, Op.READ) and may(only_there, Op.READ, host="10.0.0.9")


def test_deny_wins_over_any_allow():
    a = authorizer(acl("*", Op.ALL), acl("ord", Op.READ, DENY, pattern=PRE))
    assert not may(a, Op.READ, "orders")
    assert may(a, Op.WRITE, "orders") and may(a, Op.READ, "payments")
    everyone_denied = authorizer(acl(), acl(op=Op.READ, perm=DENY, who="User:*"))
    assert not may(everyone_denied, Op.READ)
    host_denied = authorizer(acl(), acl(perm=DENY, host="10.0.0.1"))
    assert not may(host_denied, Op.READ) and may(host_denied, Op.READ, host="10.0.0.2")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_alter_imply_describe(granted: Op):
    a = authorizer(acl(op=granted))
    assert may(a, Op.DESCRIBE)
    assert not may(a, Op.DESCRIBE_CONFIGS)


def test_alter_configs_implies_describe_configs_and_all_implies_everything():
    assert may(authorizer(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    a = authorizer(acl(op=Op.ALL))
    assert all(may(a, op) for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.ALTER))


def test_a_deny_denies_only_what_it_names_not_what_it_would_imply():
    a = authorizer(acl(op=Op.ALL), acl(op=Op.READ, perm=DENY))
    assert not may(a, Op.READ)
    assert may(a, Op.DESCRIBE)  # DENY READ does not deny DESCRIBE
    assert not may(authorizer(acl(op=Op.ALL), acl(op=Op.ALL, perm=DENY)), Op.DESCRIBE)


def test_super_users_are_allowed_everything_even_when_denied():
    a = authorizer(acl(op=Op.ALL, perm=DENY, who="User:*"), supers="User:admin; User:alice")
    assert may(a, Op.WRITE) and may(a, Op.CLUSTER_ACTION, "kafka-cluster", res=Res.CLUSTER)
    assert not may(a, Op.WRITE, who=BOB)


def test_allow_everyone_applies_only_to_resources_without_any_acl():
    a = authorizer(acl("orders", Op.READ, who="User:bob"), everyone=True)
    assert may(a, Op.WRITE, "payments")  # no ACL on it: everyone
    assert not may(a, Op.READ, "orders")  # an ACL exists, not for alice
    assert not may(authorizer(everyone=False), Op.READ, "payments")


def test_authorize_by_resource_type_finds_an_allow_not_covered_by_a_deny():
    a = authorizer(acl("ord", Op.WRITE, pattern=PRE))
    assert a.authorize_by_resource_type(ALICE, "h", Op.WRITE, Res.TOPIC)
    assert not a.authorize_by_resource_type(BOB, "h", Op.WRITE, Res.TOPIC)
    denied = authorizer(acl("ord", Op.WRITE, pattern=PRE), acl("o", Op.WRITE, DENY, pattern=PRE))
    assert not denied.authorize_by_resource_type(ALICE, "h", Op.WRITE, Res.TOPIC)
    assert authorizer(everyone=True).authorize_by_resource_type(BOB, "h", Op.WRITE, Res.TOPIC)


def test_authorized_operations_is_kip430s_bit_field():
    a = authorizer(acl(op=Op.WRITE))
    bits = authorized_operations(a, ALICE, "h", Res.TOPIC, "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_filters_any_and_match():
    lit, pre, wild = acl("orders"), acl("ord", pattern=PRE), acl("*")
    other = acl("payments", who="User:bob")
    everything = [lit, pre, wild, other]
    assert [b for b in everything if AclFilter().matches(b)] == everything
    match = AclFilter(Res.TOPIC, "orders", PatternType.MATCH)
    assert [b for b in everything if match.matches(b)] == [lit, pre, wild]
    exact = AclFilter(Res.TOPIC, "ord", PatternType.PREFIXED)
    assert [b for b in everything if exact.matches(b)] == [pre]
    by_principal = AclFilter(principal="User:bob", permission=ALLOW)
    assert [b for b in everything if by_principal.matches(b)] == [other]


def test_create_refuses_what_kafka_refuses():
    assert acl(pattern=PatternType.MATCH).problem()
    assert acl(op=Op.ANY).problem()
    assert acl(res=Res.ANY).problem()
    assert acl("other", Op.ALTER, res=Res.CLUSTER).problem()
    assert acl("kafka-cluster", Op.READ, res=Res.CLUSTER).problem()  # not a cluster op
    assert acl(who="alice").problem()
    assert acl("kafka-cluster", Op.CLUSTER_ACTION, res=Res.CLUSTER).problem() is None


def test_acls_live_in_the_image_and_its_snapshot_records():
    image = I.MetadataImage()
    results, records = acl_control.create_acls(image, [acl(), acl("ord", pattern=PRE), acl()])
    assert [r.error_code for r in results] == [0, 0, 0]
    assert len(records) == 2  # the same binding twice is stored once
    image = I.apply(image, [R.decode(R.encode(r)) for r in records], 5)
    assert sorted(image.acls.values(), key=str) == sorted([acl(), acl("ord", pattern=PRE)], key=str)
    again = I.apply(I.MetadataImage(), I.records_of(image), image.offset)
    assert again == image
    deletions, removes = acl_control.delete_acls(image, [AclFilter(pattern_type=PRE),
                                                         AclFilter(resource_name="ord")])
    assert [d.deleted for d in deletions] == [[acl("ord", pattern=PRE)]] * 2
    assert len(removes) == 1
    image = I.apply(image, removes, 6)
    assert list(image.acls.values()) == [acl()]


def test_the_authorizer_reindexes_only_when_the_acls_change():
    a = AclAuthorizer()
    image = I.apply(I.MetadataImage(), acl_control.create_acls(I.MetadataImage(), [acl()])[1], 1)
    a.update(image.acls)
    index = a.index
    a.update(I.apply(image, [R.producer_ids_record(1, 1000)], 2).acls)
    assert a.index is index
    assert may(a, Op.READ)
