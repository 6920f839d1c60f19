"""A node's share-group state as a partition leader (KIP-932): its share
sessions, its share partitions (their durable state is with the share
coordinator, reached through the persister), the share coordinator this node
runs for the `__share_group_state` partitions it leads, and each group's
effective settings (its GROUP configs in the metadata image over the broker's
`group.share.*` keys). The group membership side lives with the group
coordinator (coordinator/share_group.py, GroupCoordinatorService.share_groups).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import steady_ms
from ..config import BrokerConfig
from ..configdef import ConfigError
from ..coordinator.share_coordinator_service import ShareCoordinatorService
from ..coordinator.share_partition import ShareLimits
from ..coordinator.share_partitions import SharePartitionManager
from ..coordinator.share_persister import SharePersister
from ..coordinator.share_state_store import DIR_NAME, ShareStateStore
from ..group_config import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_LOCK_DURATION,
    group_values,
)
from ..metadata import records as R
from ..metadata.image import MetadataImage
from .share_session import ShareSessionCache


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    auto_offset_reset: str = "latest"
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2000
    read_committed: bool = False  # share.isolation.level


class ShareService:
    def __init__(self, config: BrokerConfig, log_dir: Path | None,
                 image: Callable[[], MetadataImage],
                 clock_ms: Callable[[], int] | None = None,
                 coordinator: ShareCoordinatorService | None = None,
                 persister: SharePersister | None = None) -> None:
        self.config = config
        self._image = image
        self.clock_ms = clock_ms or steady_ms
        self.coordinator = coordinator
        self.persister = persister
        # files of odradek versions before the share coordinator: migrated on first use
        legacy = ShareStateStore(log_dir / DIR_NAME) if log_dir is not None else None
        self.partitions = SharePartitionManager(persister, self.limits, legacy)
        # the group's last session here ended: its share partitions are read again
        # on its next fetch (an altered or deleted state reaches this leader so)
        self.sessions = ShareSessionCache(config.get("group.share.max.share.sessions"),
                                          config.get("group.share.session.timeout.ms"),
                                          on_group_empty=self.partitions.drop_group)

    def group_config(self, group: str) -> ShareGroupSettings:
        overrides = self._image().configs.get((R.RESOURCE_GROUP, group), {})
        try:
            values = group_values(self.config, overrides)
        except ConfigError:  # validated by the controller; keep the defaults
            values = group_values(self.config, {})
        return ShareGroupSettings(
            auto_offset_reset=values[SHARE_AUTO_OFFSET_RESET],
            lock_duration_ms=values[SHARE_LOCK_DURATION],
            delivery_count_limit=self.config.get("group.share.delivery.count.limit"),
            max_in_flight=self.config.get("group.share.partition.max.record.locks"),
            read_committed=values[SHARE_ISOLATION_LEVEL] == "read_committed")

    def on_metadata(self, old: MetadataImage, new: MetadataImage, records: Any) -> None:
        """A deleted topic takes the share groups' state of its partitions with it."""
        if old.topics_by_id is new.topics_by_id:
            return
        for topic_id in old.topics_by_id.keys() - new.topics_by_id.keys():
            self.partitions.topic_deleted(topic_id)

    def member_left(self, group: str, member_id: str) -> None:
        """The coordinator removed a member whose heartbeats stopped: its share
        session here ends and the records it held are available again."""
        self.partitions.release_member(group, member_id)
        self.sessions.close((group, member_id))  # the last one drops the group's copies

    def connection_closed(self, connection_id: int) -> None:
        """A client connection closed: the share sessions it opened end and
        their members' records are available again (no wait for the locks)."""
        for group, member_id in self.sessions.of_connection(connection_id):
            self.partitions.release_member(group, member_id)
            self.sessions.close((group, member_id))

    def limits(self, group: str) -> ShareLimits:
        s = self.group_config(group)
        return ShareLimits(s.lock_duration_ms, s.delivery_count_limit, s.max_in_flight)
