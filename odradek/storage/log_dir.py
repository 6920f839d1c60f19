"""The files of one log dir that are not partition logs: its identity and its markers.

A log dir (one entry of ``log.dirs``) holds, beside the ``<topic>-<partition>/``
logs and the offset checkpoints (storage/checkpoint.py) that LogManager
(storage/log_manager.py) manages, two files written here, and the naming rules
of the entries in it.

``meta.properties`` is a Java properties file, as Kafka (KRaft) writes it::

    #Written by odradek
    node.id=1
    directory.id=<16 random bytes, base64url without padding (Kafka Uuid)>
    version=1
    cluster.id=<cluster id>

It is written to ``meta.properties.tmp``, fsynced, renamed, and the dir fsynced.
An existing one must name the same cluster and node (else
InconsistentBrokerMetadata); a missing ``directory.id`` is added.

``.kafka_cleanshutdown`` is one line of JSON, as Kafka 3.x writes it::

    {"version":0,"brokerEpoch":-1}

written the same way (tmp, fsync, rename, fsync dir) as the last act of a
clean shutdown; LogManager removes it once the logs are loaded.

Entries: ``<topic>-<partition>`` is a log; names ending in ``-delete`` are
deleted logs on their way out, ``-future`` and ``-stray`` are left alone, and
``__cluster_metadata-0`` is the KRaft metadata log, not managed by LogManager.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.log import kafka_uuid_string, parse_kafka_uuid

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "CLUSTER_METADATA_TOPIC",
    "DELETE_SUFFIX",
    "FUTURE_SUFFIX",
    "HIGH_WATERMARK_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "META_PROPERTIES",
    "META_VERSION",
    "RECOVERY_POINT_CHECKPOINT",
    "STRAY_SUFFIX",
    "InconsistentBrokerMetadata",
    "check_meta_properties",
    "parse_log_dir_name",
    "read_properties",
    "write_clean_shutdown_file",
    "write_meta_properties",
]

META_PROPERTIES = "meta.properties"
META_VERSION = "1"
DELETE_SUFFIX = "-delete"
FUTURE_SUFFIX = "-future"
STRAY_SUFFIX = "-stray"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class InconsistentBrokerMetadata(Exception):
    """A log dir's meta.properties belongs to another cluster or node."""


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) for ``<topic>-<partition>``, else None."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def read_properties(path: Path) -> dict[str, str] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    properties = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for i, c in enumerate(line):
            if c in "=:":
                properties[line[:i].strip()] = line[i + 1 :].strip()
                break
    return properties


def write_meta_properties(dir: Path, properties: dict[str, str]) -> None:
    lines = ["#Written by odradek"] + [f"{k}={v}" for k, v in properties.items()]
    tmp = dir / (META_PROPERTIES + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dir / META_PROPERTIES)
    fsync_dir(dir)


def check_meta_properties(dir: Path, node_id: int, cluster_id: str) -> uuid.UUID:
    """The dir's directory.id; writes meta.properties when missing, adds a missing
    directory.id, raises InconsistentBrokerMetadata for another cluster or node."""
    path = dir / META_PROPERTIES
    properties = read_properties(path)
    if properties is None:
        directory_id = uuid.uuid4()
        write_meta_properties(
            dir,
            {
                "node.id": str(node_id),
                "directory.id": kafka_uuid_string(directory_id),
                "version": META_VERSION,
                "cluster.id": cluster_id,
            },
        )
        return directory_id
    if properties.get("version") != META_VERSION:
        raise InconsistentBrokerMetadata(
            f"{path}: unsupported version {properties.get('version')}"
        )
    if properties.get("cluster.id") != cluster_id:
        raise InconsistentBrokerMetadata(
            f"{path}: cluster.id {properties.get('cluster.id')} does not match {cluster_id}"
        )
    if properties.get("node.id") != str(node_id):
        raise InconsistentBrokerMetadata(
            f"{path}: node.id {properties.get('node.id')} does not match {node_id}"
        )
    if "directory.id" not in properties:
        directory_id = uuid.uuid4()
        properties["directory.id"] = kafka_uuid_string(directory_id)
        write_meta_properties(dir, properties)
        return directory_id
    return parse_kafka_uuid(properties["directory.id"])


def write_clean_shutdown_file(dir: Path) -> None:
    path = dir / CLEAN_SHUTDOWN_FILE
    tmp = dir / (CLEAN_SHUTDOWN_FILE + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(json.dumps({"version": 0, "brokerEpoch": -1}, separators=(",", ":")))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(dir)
