"""The replica manager never lets an older image take back an ISR that a newer
AlterPartition answer gave the leader (Kafka skips a stale partition epoch)."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.metadata import records as R
from odradek.metadata.image import MetadataImage, apply
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.leader_epoch import LeaderEpochFileCache
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager

TOPIC_ID = str(uuid.UUID(int=42))


def test_an_older_image_does_not_take_back_a_newer_isr(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), "cluster", 1)
    manager.startup(lambda topic: LogConfig())
    rm = ReplicaManager(1, manager, lambda image, topic: LogConfig())
    image = apply(MetadataImage(), [R.topic_record("t", TOPIC_ID),
                                    R.partition_record(TOPIC_ID, 0, [1, 2, 3], 1),
                                    R.partition_record(TOPIC_ID, 1, [1, 2, 3], 1)], 2)
    rm.load_from_image(image)
    part = rm.get("t", 0)
    assert part is not None and part.isr == (1, 2, 3) and part.partition_epoch == 0
    # the leader shrank the ISR; the AlterPartition answer (partition epoch 1)
    # applies before the metadata log brings the same change
    part.isr, part.partition_epoch = (1, 2), 1
    # an image where another partition of the topic changed, still at epoch 0 for p0
    older = apply(image, [R.partition_change_record(TOPIC_ID, 1, isr=[1, 3])], 3)
    rm.on_metadata(image, older, [])
    assert part.isr == (1, 2) and part.partition_epoch == 1
    # the image that holds the change (and more) applies
    newer = apply(older, [R.partition_change_record(TOPIC_ID, 0, isr=[1, 2]),
                          R.partition_change_record(TOPIC_ID, 0, isr=[1])], 5)
    rm.on_metadata(older, newer, [])
    assert part.isr == (1,) and part.partition_epoch == 2
    # a new leader epoch always applies
    elected = apply(newer, [R.partition_change_record(TOPIC_ID, 0, leader=2, isr=[2],
                                                      leader_epoch=1)], 6)
    rm.on_metadata(newer, elected, [])
    assert (part.leader, part.leader_epoch, part.isr) == (2, 1, (2,))
    rm.shutdown()


def test_leaderships_of_one_change_write_every_epoch_checkpoint(tmp_path: Path) -> None:
    """The leader-epoch checkpoints of one metadata change are written together
    (storage/checkpoint.write_checkpoints); each file holds its new epoch."""
    manager = LogManager([tmp_path], LogConfig(), "cluster", 1)
    manager.startup(lambda topic: LogConfig())
    rm = ReplicaManager(1, manager, lambda image, topic: LogConfig())
    n = 12
    image = apply(MetadataImage(), [R.topic_record("t", TOPIC_ID)] + [
        R.partition_record(TOPIC_ID, p, [2, 1, 3], 2) for p in range(n)], n + 1)
    rm.load_from_image(image)
    assert all(rm.get("t", p).log.leader_epoch_cache.entries == []  # type: ignore[union-attr]
               for p in range(n))
    # broker 2 is gone: this node leads every partition, in epoch 1
    elected = apply(image, [R.partition_change_record(TOPIC_ID, p, leader=1, isr=[1, 3],
                                                      leader_epoch=1) for p in range(n)],
                    n + 2)
    rm.on_metadata(image, elected, [])
    for p in range(n):
        part = rm.get("t", p)
        assert part is not None and part.leader == 1
        assert part.log.leader_epoch_cache.entries == [(1, 0)]
        assert LeaderEpochFileCache.load(part.log.dir).entries == [(1, 0)]
    rm.shutdown()
