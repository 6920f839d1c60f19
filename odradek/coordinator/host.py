"""What the group and transaction coordinators need of the node they run on.

The coordinators sit below the broker: they never import it. The Broker
satisfies `CoordinatorHost` (broker.py asserts that statically); tests may
hand in any object with these names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from ..metadata.controller import NewTopic, Result
from ..metadata.quorum import MetadataQuorum
from ..replication.leader_replication import LeaderReplication
from ..replication.replica_manager import ReplicaManager
from .txn_verification import VerifierHost


class PartitionHost(Protocol):
    """Writing to partitions this node leads (markers, offsets)."""

    @property
    def node_id(self) -> int: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...


class CoordinatorHost(VerifierHost, Protocol):
    """The coordinators' view of their node: identity and metadata, the
    partitions it hosts and their replication, producer ids, and topic creation
    for `__consumer_offsets` and `__transaction_state`."""

    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def replication(self) -> LeaderReplication: ...
    @property
    def metadata_lock(self) -> asyncio.Lock: ...
    def next_producer_id(self) -> int: ...
    async def create_topics(self, topics: Sequence[NewTopic],
                            validate_only: bool) -> dict[str, Result]: ...
