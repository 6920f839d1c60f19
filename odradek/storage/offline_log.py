"""The log of a replica whose log dir was not online at start-up.

The metadata says which log dir holds the replica (KIP-858); when that dir is
offline (unreadable, not a directory, ...) the log cannot be opened, and
creating it empty in another dir would hide its data (and, with the dir back,
leave two copies). So the replica manager holds this instead: it has no
files, is ``offline`` from the start, and every operation that would touch
the log raises KafkaStorageError, which handlers answer with
KAFKA_STORAGE_ERROR (Kafka's ``HostedPartition.Offline``). The replica comes
back with a restart once the dir is usable again.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log import KafkaStorageError, PartitionLog, log_dir_name, wall_clock_ms
from odradek.storage.log_config import LogConfig
from odradek.storage.producer_state import ProducerStateManager

# Where the log would be: unknown (the offline dir's id cannot be read).
_NOWHERE = Path("/nonexistent-offline-log-dir")


class OfflinePartitionLog(PartitionLog):
    def __init__(
        self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID | None
    ) -> None:
        # Not PartitionLog.__init__: there are no segments to hold. The offsets
        # read as 0 for whoever lists them (metrics); nothing serves them.
        self.dir = _NOWHERE / log_dir_name(topic, partition)
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id = topic_id
        self._clock_ms = wall_clock_ms
        self._segments = []
        self._bases = []
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.last_flush_ms = 0
        self.truncated_on_load_bytes = 0
        self.recovered_on_load_bytes = 0
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir / "leader-epoch-checkpoint")
        self.on_io_error = None
        self.flusher = None
        self.offline = True
        self.pending_deletes = []
        self.producer_state = ProducerStateManager(self.dir)

    def _check_online(self) -> None:
        raise KafkaStorageError(
            f"{self.topic}-{self.partition} is assigned to a log dir that is offline"
        )

    def set_high_watermark(self, offset: int) -> int:
        return self.high_watermark

    def assign_leader_epoch(self, leader_epoch: int, defer_write: bool = False) -> bool:
        self._check_online()
        return False

    def truncate_to(self, offset: int) -> bool:
        self._check_online()
        return False

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_online()

    def close(self) -> None:
        pass

    def delete(self) -> None:
        pass
