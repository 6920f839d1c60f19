"""The services each handler family sees: small Protocols, never the Broker.

A handler is `handler(node, ctx, request)`; `node` is typed with its family's
Protocol below, which names only what that family reads. The Broker is the one
object that satisfies them all (it wires the services and owns their lifecycle);
`broker.py` asserts that statically, and `tests/unit/test_services.py` checks
that each name is there at run time. A handler that needs something new adds it
to its family's Protocol here, in sight of review.

Read-only properties are used throughout, so that a plain attribute of the
Broker satisfies them and no handler can rebind a service.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from ..coordinator.service import GroupCoordinatorService
from ..coordinator.transaction_service import TransactionCoordinatorService
from ..metadata.controller import Controller
from ..metadata.quorum import MetadataQuorum
from ..replication.leader_replication import LeaderReplication
from ..replication.node import NodeView
from ..replication.replica_manager import ReplicaManager
from ..storage.log_manager import LogManager
from ..tiered.service import RemoteTier
from .controller_service import ControllerService
from .fd_budget import FdBudget
from .fetch_memory import FetchMemory
from .fetch_session import FetchSessionCache
from .lifecycle import BrokerLifecycle
from .log_dir_moves import LogDirMoves
from .share_service import ShareService

# -- building blocks -------------------------------------------------------------------


class Identity(NodeView, Protocol):
    """Who this node is and what the cluster looks like to it."""

    @property
    def cluster_id(self) -> str: ...


class Replicas(Protocol):
    """The partitions this node hosts."""

    @property
    def replica_manager(self) -> ReplicaManager: ...


class MetadataWrites(Protocol):
    """Appending metadata records (on the active controller, or a lone voter)."""

    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def metadata_lock(self) -> asyncio.Lock: ...
    @property
    def is_active_controller(self) -> bool: ...


# -- one Protocol per handler family ---------------------------------------------------


class AdminServices(Identity, Replicas, MetadataWrites, Protocol):
    """handlers/admin.py: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords."""

    @property
    def lifecycle(self) -> BrokerLifecycle | None: ...
    @property
    def fd_budget(self) -> FdBudget | None: ...
    @property
    def remote_tier(self) -> RemoteTier | None: ...


class ConfigServices(Identity, MetadataWrites, Protocol):
    """handlers/configs.py: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""


class QuotaServices(Identity, MetadataWrites, Protocol):
    """handlers/quotas.py: DescribeClientQuotas, AlterClientQuotas."""


class MetadataServices(AdminServices, Protocol):
    """handlers/metadata.py: Metadata, DescribeCluster, DescribeTopicPartitions
    (Metadata may create topics: auto.create.topics.enable)."""


class FetchServices(Identity, Replicas, Protocol):
    """handlers/fetch.py: consumer Fetch, ListOffsets, OffsetForLeaderEpoch."""

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...
    @property
    def fetch_memory(self) -> FetchMemory: ...
    @property
    def remote_tier(self) -> RemoteTier | None: ...


class ReplicaFetchServices(Identity, Replicas, Protocol):
    """handlers/replica_fetch.py: a follower's Fetch on the leader."""

    @property
    def replication(self) -> LeaderReplication: ...


class ClusterServices(FetchServices, ReplicaFetchServices, Protocol):
    """handlers/cluster.py: KRaft, the broker lifecycle, ElectLeaders, and the
    Fetch dispatcher (metadata observers, followers, consumers)."""

    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def controller_service(self) -> ControllerService | None: ...


class ReassignmentServices(Identity, Protocol):
    """handlers/reassignment.py: Alter/ListPartitionReassignments."""

    @property
    def controller_service(self) -> ControllerService | None: ...


class LogDirServices(Identity, Replicas, Protocol):
    """handlers/log_dirs.py: DescribeLogDirs, AlterReplicaLogDirs."""

    @property
    def log_manager(self) -> LogManager: ...
    @property
    def log_dirs(self) -> list[Path]: ...
    @property
    def log_dir_moves(self) -> LogDirMoves: ...


class GroupServices(Identity, Protocol):
    """handlers/groups.py: classic and KIP-848 groups, offsets, FindCoordinator."""

    @property
    def group_coordinator(self) -> GroupCoordinatorService: ...
    @property
    def txn_coordinator(self) -> TransactionCoordinatorService: ...


class ShareServices(GroupServices, Replicas, Protocol):
    """handlers/share_groups.py: share groups (KIP-932): membership on the group
    coordinator, ShareFetch/ShareAcknowledge on the partition leaders."""

    @property
    def share(self) -> ShareService: ...
    @property
    def fetch_memory(self) -> FetchMemory: ...


class ProduceServices(Identity, Replicas, Protocol):
    """handlers/produce.py: Produce (and the transaction checks it makes)."""

    @property
    def replication(self) -> LeaderReplication: ...
    @property
    def txn_coordinator(self) -> TransactionCoordinatorService: ...


class TxnServices(Identity, Replicas, Protocol):
    """handlers/txn.py: transactions, markers, DescribeProducers/Transactions."""

    @property
    def group_coordinator(self) -> GroupCoordinatorService: ...
    @property
    def txn_coordinator(self) -> TransactionCoordinatorService: ...


class ProducerIdServices(TxnServices, Protocol):
    """handlers/producer_id.py: InitProducerId (idempotent: a block of ids from
    the controller; transactional: the transaction coordinator)."""

    @property
    def metadata_lock(self) -> asyncio.Lock: ...
    async def ensure_producer_ids(self) -> None: ...
    def next_producer_id(self) -> int: ...


class AclServices(Identity, MetadataWrites, Protocol):
    """handlers/acls.py: CreateAcls, DescribeAcls, DeleteAcls (the ACLs are
    the image's; writes are metadata records on the active controller)."""


class ScramServices(Identity, MetadataWrites, Protocol):
    """handlers/scram.py: Describe/AlterUserScramCredentials (the credentials are
    in the image; changes are metadata records)."""


class QuorumServices(Protocol):
    """handlers/quorum.py: DescribeQuorum."""

    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def controller_listener_names(self) -> frozenset[str]: ...


class NoServices(Protocol):
    """handlers/api_versions.py needs nothing of the node."""


FAMILIES: tuple[type[Any], ...] = (
    AdminServices, ConfigServices, MetadataServices, FetchServices, ReplicaFetchServices,
    ClusterServices, ReassignmentServices, LogDirServices, GroupServices, ProduceServices,
    ProducerIdServices, TxnServices, QuotaServices, AclServices, ScramServices,
    QuorumServices,
)
