"""Which log dir holds each replica (KIP-858, JBOD in KRaft).

Every log dir has a ``directory.id`` (a Kafka Uuid in its ``meta.properties``,
storage/log_manager.py). The metadata records say where each replica lives:

* ``PartitionRecord.directories`` / ``PartitionChangeRecord.directories``: one
  directory id per replica, in the order of ``replicas``;
* ``RegisterBrokerRecord.log_dirs`` / ``BrokerRegistrationChangeRecord.log_dirs``:
  the directory ids a broker has online (registered at start-up; a change
  record drops the dirs that fail while it runs, reported in BrokerHeartbeat
  ``offline_log_dirs``).

Three ids are not dirs (Kafka's ``DirectoryId``, ``directory_id.py``, with the
rules that need only ids; re-exported here): UNASSIGNED, LOST, MIGRATING.

A broker places a replica, then tells the controller (AssignReplicasToDirs, or
the controller's own code on a combined node), which records the id with a
PartitionChangeRecord. At start-up a broker does not create a log for a
replica assigned to a dir that is not online while any of its configured dirs
is offline: the data may be in that dir (Kafka's rule after KAFKA-16234). A
replica is online for the controller when its broker is registered and
unfenced and its directory is one of the broker's online dirs (Kafka's
``DirectoryId.isOnline``: UNASSIGNED and MIGRATING count as online, LOST
never).

Pure functions over the image; nothing here reads a file. Imports the image
(``image.py``) and the ids (``directory_id.py``), never the other way.
"""

from __future__ import annotations

from .directory_id import LOST, MIGRATING, RESERVED, UNASSIGNED, is_online, realigned
from .image import MetadataImage, PartitionImage

__all__ = [
    "LOST",
    "MIGRATING",
    "RESERVED",
    "UNASSIGNED",
    "directory_of",
    "is_online",
    "realigned",
    "replica_dir_online",
    "with_directory",
]


def directory_of(part: PartitionImage, broker_id: int) -> str:
    """The directory id recorded for ``broker_id``'s replica of ``part``."""
    if len(part.directories) != len(part.replicas) or broker_id not in part.replicas:
        return MIGRATING
    return part.directories[part.replicas.index(broker_id)]


def with_directory(part: PartitionImage, broker_id: int, directory: str) -> list[str]:
    """``part.directories`` with ``broker_id``'s replica in ``directory``."""
    current = list(part.directories)
    if len(current) != len(part.replicas):
        current = [MIGRATING] * len(part.replicas)
    current[part.replicas.index(broker_id)] = directory
    return current


def replica_dir_online(image: MetadataImage, part: PartitionImage, broker_id: int) -> bool:
    """The dir of ``broker_id``'s replica is online (says nothing of fencing)."""
    broker = image.brokers.get(broker_id)
    return broker is not None and is_online(directory_of(part, broker_id), broker.log_dirs)
