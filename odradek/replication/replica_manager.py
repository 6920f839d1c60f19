"""The replica manager: this node's partitions and the logs behind them.

It follows the metadata image: a partition whose replicas include this node
gets a log (created in the log dir with the fewest partitions); a removed topic
loses its logs, and so does a partition a reassignment moved off this node; a topic config change reaches its logs. Produce and fetch go
through here. The leader's side of replication (follower offsets, the high
watermark, the ISR) is `replication.py`; the follower's is `replica_fetcher.py`;
both follow this manager's partitions after every metadata change.

Log dirs (KIP-858): a new log is placed by the dir the image assigns the
replica (storage/log_manager.py, Placement); a replica assigned to a dir that
is not online while a dir is offline gets an offline log, answers
KAFKA_STORAGE_ERROR and is not recreated elsewhere. A log in a dir other than
the one the image records (a new replica, or one recorded before directory
ids) goes into `pending_assignments`, which the broker tells the controller
(AssignReplicasToDirs).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..metadata import directories as D
from ..metadata import image as img
from ..metadata import records as R
from ..metadata.elr import enabled as elr_enabled
from ..storage.log import (
    PartitionLog,
    kafka_uuid_string,
    parse_kafka_uuid,
    write_leader_epochs,
)
from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from .purgatory import FetchPurgatory

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class Partition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader_epoch: int
    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    extra: dict[str, object] = field(default_factory=dict)
    partition_epoch: int = 0


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        log_config_for: Callable[[img.MetadataImage, str], LogConfig],
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        self.purgatory = FetchPurgatory()
        # (topic id text, partition) -> directory id text, not yet recorded
        self.pending_assignments: dict[tuple[str, int], str] = {}
        # called when pending_assignments gained entries (the broker sends them)
        self.on_assignments: Callable[[], None] | None = None
        # KIP-966's strict min ISR (eligible leader replicas on): no high
        # watermark advance while the ISR is below min.insync.replicas
        self.strict_min_isr = False

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    # -- following the metadata image -----------------------------------------

    def on_metadata(
        self, old: img.MetadataImage, new: img.MetadataImage, records: list[R.MetadataRecord]
    ) -> None:
        self.strict_min_isr = elr_enabled(new)
        # Topics that went away.
        for tid, topic in old.topics_by_id.items():
            if tid not in new.topics_by_id:
                gone = [(topic.name, p) for p in topic.partitions
                        if self.partitions.pop((topic.name, p), None) is not None]
                self.log_manager.delete_many(gone)  # one dir fsync, files removed off the loop
                for key in gone:
                    self.purgatory.notify(key)
                log.info("deleted topic %s (%s)", topic.name, tid)
        # Topics and partitions that appeared or changed.
        changed_configs = {
            r["resource_name"]
            for r in records
            if r["type"] == R.CONFIG and r["resource_type"] == R.RESOURCE_TOPIC
        }
        # a dynamic broker config may be a topic default (min.insync.replicas)
        every_config = any(
            r["type"] == R.CONFIG and r["resource_type"] == R.RESOURCE_BROKER
            and r["resource_name"] in ("", str(self.node_id)) for r in records)
        went_offline: list[str] = []
        # new leaderships: their leader-epoch checkpoints are written together below
        new_epochs: list[Partition] = []
        assignments_before = len(self.pending_assignments)
        for name, topic in new.topics_by_name.items():
            before = old.topics_by_name.get(name)
            if before is topic and name not in changed_configs and not every_config:
                continue
            config = self.log_config_for(new, name)
            for p, pimg in topic.partitions.items():
                key = (name, p)
                part = self.partitions.get(key)
                if self.node_id not in pimg.replicas:
                    if part is not None:
                        self._stop_replica(part)
                    continue
                directory = D.directory_of(pimg, self.node_id)
                if part is None:
                    try:
                        plog = self.log_manager.get_or_create(
                            name, p, topic.topic_id, config,
                            None if directory == D.UNASSIGNED else parse_kafka_uuid(directory),
                        )
                    except OSError as e:
                        log.error("cannot create the log of %s-%d: %s", name, p, e)
                        continue
                    if plog.offline:
                        went_offline.append(f"{name}-{p}")
                    part = Partition(
                        name, p, topic.topic_id, plog, pimg.leader_epoch, pimg.leader,
                        pimg.isr, pimg.replicas, partition_epoch=pimg.partition_epoch,
                    )
                    self.partitions[key] = part
                    self._on_leadership(part, new_epochs)
                else:
                    if not (pimg.leader_epoch == part.leader_epoch
                            and pimg.partition_epoch < part.partition_epoch):
                        # An AlterPartition answer may be newer than this
                        # image (Kafka skips a stale partition epoch too).
                        part.isr = pimg.isr
                        part.partition_epoch = pimg.partition_epoch
                    part.leader_epoch = pimg.leader_epoch
                    part.leader = pimg.leader
                    part.replicas = pimg.replicas
                    if name in changed_configs or every_config:
                        part.log.update_config(config)
                    self._on_leadership(part, new_epochs)
                self._check_directory(part, directory)
        if new_epochs:
            self._write_epochs(new_epochs)
        if went_offline:
            log.error(
                "Partitions %s are assigned to a log dir that is not online (offline log "
                "dirs: %s): they answer KAFKA_STORAGE_ERROR and are not created in another "
                "dir.", ", ".join(went_offline),
                ", ".join(str(d) for d in self.log_manager.offline_dirs),
            )
        if len(self.pending_assignments) > assignments_before and self.on_assignments:
            self.on_assignments()

    def _check_directory(self, part: Partition, directory: str) -> None:
        """Queue an assignment when the log is not where the image says."""
        actual = self.log_manager.directory_id_of(part.log)
        key = (str(part.topic_id), part.partition)
        if actual is None or kafka_uuid_string(actual) == directory:
            self.pending_assignments.pop(key, None)
        else:
            self.pending_assignments[key] = kafka_uuid_string(actual)

    def log_moved(self, part: Partition, plog: PartitionLog) -> None:
        """The partition's log is now `plog`, in another dir of this broker
        (AlterReplicaLogDirs): point the partition at it and tell the controller
        the replica's new dir (AssignReplicasToDirs, KIP-858)."""
        part.log = plog
        self._on_leadership(part)  # a leader's epoch starts at the log end offset
        self.purgatory.notify((part.topic, part.partition))
        actual = self.log_manager.directory_id_of(plog)
        if actual is not None:
            self.pending_assignments[(str(part.topic_id), part.partition)] = (
                kafka_uuid_string(actual))
            if self.on_assignments is not None:
                self.on_assignments()

    def _stop_replica(self, part: Partition) -> None:
        """A reassignment took this node out of the partition's replicas:
        stop and delete the local copy (Kafka's StopReplica with delete)."""
        key = (part.topic, part.partition)
        del self.partitions[key]
        self.log_manager.delete(part.topic, part.partition)
        self.purgatory.notify(key)
        log.info("%s-%d: no longer a replica here: deleted the local log",
                 part.topic, part.partition)

    def _on_leadership(self, part: Partition, new_epochs: list[Partition] | None = None) -> None:
        """As leader, the epoch starts at the log end offset (the leader epoch
        cache); as the only ISR member, the high watermark is the log end offset
        (the checkpointed one was read at load and is only ever lower), unless
        that ISR is below min.insync.replicas under KIP-966's strict rule: a
        leader elected from the ELR exposes nothing new alone.

        With `new_epochs` (a metadata change), a new epoch's checkpoint file is
        left to `_write_epochs`, which writes those of the whole change together
        before the change returns (nothing is appended in between: all of it
        runs in one turn of the event loop)."""
        if part.leader != self.node_id or part.log.offline:
            return
        try:
            deferred = part.log.assign_leader_epoch(part.leader_epoch,
                                                    defer_write=new_epochs is not None)
            if deferred and new_epochs is not None:
                new_epochs.append(part)
        except OSError as e:
            log.error("%s-%d: %s", part.topic, part.partition, e)
            return
        if part.isr == (self.node_id,) and not (
                self.strict_min_isr and part.log.config.min_insync_replicas > 1):
            part.log.set_high_watermark(part.log.log_end_offset)

    def _write_epochs(self, parts: list[Partition]) -> None:
        """The leader-epoch checkpoints of the leaderships one metadata change
        gave this node, with their fsyncs together (Kafka writes each at once,
        one after another): a broker taking over N partitions waits about one
        checkpoint write, not N. Each file is as durable, before any append in
        its epoch, as a write of its own would make it."""
        for error in write_leader_epochs([p.log for p in parts]):
            log.error("%s", error)

    def load_from_image(self, image: img.MetadataImage) -> None:
        self.on_metadata(img.MetadataImage(), image, [])

    def shutdown(self) -> None:
        self.log_manager.shutdown()
