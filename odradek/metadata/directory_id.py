"""Kafka's DirectoryId: the ids a replica's log dir can have (KIP-858).

A real dir's id is the Kafka Uuid in its ``meta.properties``. Three ids are not
dirs:

* ``UNASSIGNED`` (Uuid 0): the controller created the replica and its broker
  has not placed it yet; the broker places it in any online dir.
* ``LOST`` (Uuid 1): the replica's dir is gone for good.
* ``MIGRATING`` (Uuid 2): not known; here, a partition recorded before
  directories were (records without the field).

Pure functions of ids and replica lists, below the records and the image (both
use them); the rules that read an image are in ``directories.py``. Imports
nothing of odradek.
"""

from __future__ import annotations

UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA"
LOST = "AAAAAAAAAAAAAAAAAAAAAQ"
MIGRATING = "AAAAAAAAAAAAAAAAAAAAAg"
RESERVED = frozenset({UNASSIGNED, LOST, MIGRATING})


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


def is_online(directory: str, broker_log_dirs: tuple[str, ...]) -> bool:
    """Kafka's ``DirectoryId.isOnline``. A broker that registered no dirs (one
    recorded before this field) is taken to have every dir online."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not broker_log_dirs or directory in broker_log_dirs
