"""All partition logs of a broker, spread over its ``log.dirs``.

Directory layout
----------------
Each log dir holds::

    meta.properties                     identity of the dir (format below)
    <topic>-<partition>/                one PartitionLog (storage/log.py)
    <topic>-<partition>.<uuid hex>-delete/   a deleted log on its way out
    __cluster_metadata-0/               the KRaft metadata log: not managed here

``meta.properties`` is a Java properties file, as Kafka (KRaft) writes it::

    #Written by odradek
    node.id=1
    directory.id=<16 random bytes, base64url without padding (Kafka Uuid)>
    version=1
    cluster.id=<cluster id>

On startup an existing ``meta.properties`` must name the same cluster and node;
a missing ``directory.id`` is added. Directories ending in ``-future`` or
``-stray`` are left alone; ``-delete`` directories are removed.

Placement: a new partition goes to the dir holding the fewest partitions
(first dir on ties), as Kafka does.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.log import (
    PartitionLog,
    kafka_uuid_string,
    log_dir_name,
    parse_kafka_uuid,
    read_partition_metadata,
    wall_clock_ms,
)
from odradek.storage.log_config import LogConfig

META_PROPERTIES = "meta.properties"
META_VERSION = "1"
DELETE_SUFFIX = "-delete"
FUTURE_SUFFIX = "-future"
STRAY_SUFFIX = "-stray"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


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


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        cluster_id: str,
        node_id: int,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.directory_ids: dict[Path, uuid.UUID] = {}
        self._clock_ms = clock_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}

    # -- startup -----------------------------------------------------------------------
    def startup(self) -> None:
        """Write or validate each dir's meta.properties, then load every log."""
        for dir in self.log_dirs:
            dir.mkdir(parents=True, exist_ok=True)
            self.directory_ids[dir] = self._check_meta_properties(dir)
        for dir in self.log_dirs:
            self._load_dir(dir)

    def _check_meta_properties(self, dir: Path) -> uuid.UUID:
        path = dir / META_PROPERTIES
        properties = read_properties(path)
        if properties is None:
            directory_id = uuid.uuid4()
            write_meta_properties(
                dir,
                {
                    "node.id": str(self.node_id),
                    "directory.id": kafka_uuid_string(directory_id),
                    "version": META_VERSION,
                    "cluster.id": self.cluster_id,
                },
            )
            return directory_id
        if properties.get("version") != META_VERSION:
            raise InconsistentBrokerMetadata(
                f"{path}: unsupported version {properties.get('version')}"
            )
        if properties.get("cluster.id") != self.cluster_id:
            raise InconsistentBrokerMetadata(
                f"{path}: cluster.id {properties.get('cluster.id')} does not match {self.cluster_id}"
            )
        if properties.get("node.id") != str(self.node_id):
            raise InconsistentBrokerMetadata(
                f"{path}: node.id {properties.get('node.id')} does not match {self.node_id}"
            )
        if "directory.id" not in properties:
            directory_id = uuid.uuid4()
            properties["directory.id"] = kafka_uuid_string(directory_id)
            write_meta_properties(dir, properties)
            return directory_id
        return parse_kafka_uuid(properties["directory.id"])

    def _load_dir(self, dir: Path) -> None:
        for entry in sorted(os.scandir(dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            name = entry.name
            if name.endswith(DELETE_SUFFIX):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if name.endswith((FUTURE_SUFFIX, STRAY_SUFFIX)):
                continue
            parsed = parse_log_dir_name(name)
            if parsed is None or parsed[0] == CLUSTER_METADATA_TOPIC:
                continue
            if parsed in self._logs:
                raise InconsistentBrokerMetadata(
                    f"{name} exists in both {self._dir_of[parsed]} and {dir}"
                )
            path = Path(entry.path)
            log = PartitionLog.open(
                path,
                parsed[0],
                parsed[1],
                self.default_config,
                read_partition_metadata(path),
                clock_ms=self._clock_ms,
            )
            self._logs[parsed] = log
            self._dir_of[parsed] = dir

    # -- logs ----------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        """The existing log (its config updated if one is given) or a new one in
        the dir with the fewest partitions."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            if config is not None:
                log.update_config(config)
            return log
        counts = {dir: 0 for dir in self.log_dirs}
        for dir in self._dir_of.values():
            counts[dir] += 1
        dir = min(self.log_dirs, key=lambda d: counts[d])
        log = PartitionLog.open(
            dir / log_dir_name(topic, partition),
            topic,
            partition,
            config or self.default_config,
            topic_id,
            clock_ms=self._clock_ms,
        )
        fsync_dir(dir)
        self._logs[key] = log
        self._dir_of[key] = dir
        return log

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename its dir to ``<topic>-<partition>.<uuid>-delete``
        (so a crash mid-delete never resurrects it) and remove it."""
        key = (topic, partition)
        log = self._logs.pop(key, None)
        dir = self._dir_of.pop(key, None)
        if log is None or dir is None:
            return
        log.close()
        doomed = dir / f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        os.replace(log.dir, doomed)
        fsync_dir(dir)
        shutil.rmtree(doomed, ignore_errors=True)

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def dir_of(self, log: PartitionLog) -> Path:
        return self._dir_of[(log.topic, log.partition)]

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()

    def shutdown(self) -> None:
        """Flush and close every log."""
        for log in self._logs.values():
            log.flush()
            log.close()
        self._logs.clear()
        self._dir_of.clear()
