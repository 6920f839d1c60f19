"""Kafka's authorization vocabulary: resource types, operations, principals.

The numbers are Kafka's wire values (`org.apache.kafka.common.resource.ResourceType`,
`org.apache.kafka.common.acl.AclOperation`), used in CreateAcls, DescribeAcls and
the authorized-operations bit fields of Metadata and DescribeCluster (KIP-430).

Implications follow Kafka's AclEntry: an ACL for ALL allows every operation;
READ, WRITE, DELETE and ALTER each imply DESCRIBE; ALTER_CONFIGS implies
DESCRIBE_CONFIGS (for ALLOW ACLs only; a DENY denies just what it names).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


# What an ALLOW of the key also allows (Kafka's AclEntry.implies... tables).
IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# The operations each resource type supports (Kafka's AclEntry.supportedOperations),
# which is what "authorized operations" lists when no authorizer is configured.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    # Kafka 4 (KIP-848 group configs): DESCRIBE_CONFIGS and ALTER_CONFIGS too
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka


@dataclass(frozen=True, slots=True)
class Principal:
    """A KafkaPrincipal: type and name, written `User:alice`."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = Principal("User", "ANONYMOUS")


@dataclass(frozen=True, slots=True)
class Action:
    """One thing to authorize: an operation on a named resource."""

    operation: AclOperation
    resource_type: ResourceType
    name: str
