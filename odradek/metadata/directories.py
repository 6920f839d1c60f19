"""Which log dir holds each replica (KIP-858, JBOD in KRaft).

Every log dir has a ``directory.id`` (a Kafka Uuid in its ``meta.properties``,
storage/log_manager.py). The metadata records say where each replica lives:

* ``PartitionRecord.directories`` / ``PartitionChangeRecord.directories``: one
  directory id per replica, in the order of ``replicas``;
* ``RegisterBrokerRecord.log_dirs`` / ``BrokerRegistrationChangeRecord.log_dirs``:
  the directory ids a broker has online (registered at start-up; a change
  record drops the dirs that fail while it runs, reported in BrokerHeartbeat
  ``offline_log_dirs``).

Three ids are not dirs (Kafka's ``DirectoryId``):

* ``UNASSIGNED`` (Uuid 0): the controller created the replica and its broker
  has not placed it yet; the broker places it in any online dir.
* ``LOST`` (Uuid 1): the replica's dir is gone for good.
* ``MIGRATING`` (Uuid 2): not known; here, a partition recorded before
  directories were (records without the field).

A broker places a replica, then tells the controller (AssignReplicasToDirs, or
the controller's own code on a combined node), which records the id with a
PartitionChangeRecord. At start-up a broker does not create a log for a
replica assigned to a dir that is not online while any of its configured dirs
is offline: the data may be in that dir (Kafka's rule after KAFKA-16234). A
replica is online for the controller when its broker is registered and
unfenced and its directory is one of the broker's online dirs (Kafka's
``DirectoryId.isOnline``: UNASSIGNED and MIGRATING count as online, LOST
never).

Pure functions over the image; nothing here reads a file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .image import MetadataImage, PartitionImage

UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA"
LOST = "AAAAAAAAAAAAAAAAAAAAAQ"
MIGRATING = "AAAAAAAAAAAAAAAAAAAAAg"
RESERVED = frozenset({UNASSIGNED, LOST, MIGRATING})


def directory_of(part: PartitionImage, broker_id: int) -> str:
    """The directory id recorded for ``broker_id``'s replica of ``part``."""
    if len(part.directories) != len(part.replicas) or broker_id not in part.replicas:
        return MIGRATING
    return part.directories[part.replicas.index(broker_id)]


def realigned(
    old_replicas: tuple[int, ...], old_directories: tuple[str, ...], replicas: tuple[int, ...]
) -> tuple[str, ...]:
    """Directories for a new replica list: a replica that stays keeps its dir
    (MIGRATING when it was not known), a new one is UNASSIGNED."""
    if len(old_directories) == len(old_replicas):
        known = dict(zip(old_replicas, old_directories))
    else:
        known = dict.fromkeys(old_replicas, MIGRATING)
    return tuple(known.get(r, UNASSIGNED) for r in replicas)


def with_directory(part: PartitionImage, broker_id: int, directory: str) -> list[str]:
    """``part.directories`` with ``broker_id``'s replica in ``directory``."""
    current = list(part.directories)
    if len(current) != len(part.replicas):
        current = [MIGRATING] * len(part.replicas)
    current[part.replicas.index(broker_id)] = directory
    return current


def is_online(directory: str, broker_log_dirs: tuple[str, ...]) -> bool:
    """Kafka's ``DirectoryId.isOnline``. A broker that registered no dirs (one
    recorded before this field) is taken to have every dir online."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not broker_log_dirs or directory in broker_log_dirs


def replica_dir_online(image: MetadataImage, part: PartitionImage, broker_id: int) -> bool:
    """The dir of ``broker_id``'s replica is online (says nothing of fencing)."""
    broker = image.brokers.get(broker_id)
    return broker is not None and is_online(directory_of(part, broker_id), broker.log_dirs)
