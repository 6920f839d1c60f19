"""The views of a node that the layers below the broker ask for.

Each module that needs something of its node names it as a Protocol built from
these (the Broker satisfies them all; broker.py asserts it for mypy).
"""

from __future__ import annotations

from typing import Protocol

from ..config import BrokerConfig
from ..metadata.image import MetadataImage
from ..security.tls import ListenerTls
from .replica_manager import ReplicaManager


class ClusterView(Protocol):
    """The node's configuration, its current metadata image and the TLS contexts it
    dials other nodes with."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def tls(self) -> ListenerTls: ...


class NodeView(ClusterView, Protocol):
    """...and which node it is."""

    @property
    def node_id(self) -> int: ...


class ReplicaHost(NodeView, Protocol):
    """...and the partitions it hosts."""

    @property
    def replica_manager(self) -> ReplicaManager: ...
