"""The broker's tiered storage: the RemoteLogManager and the remote reader, built when
`remote.log.storage.system.enable` is true."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable

from ..config import BrokerConfig
from .follower_restore import restore_follower_state
from .metadata_records import MetadataRecord
from .remote_log_manager import HostedPartition, RemoteLogManager
from .remote_reader import RemoteReader
from .settings import RemoteTierSettings

__all__ = ["RemoteTier"]


class RemoteTier:
    def __init__(self, rlm: RemoteLogManager) -> None:
        self.rlm = rlm
        self.reader = RemoteReader(rlm)

    @classmethod
    def create(cls, config: BrokerConfig, node_id: int,
               partitions: Callable[[], Iterable[HostedPartition]],
               topic_exists: Callable[[uuid.UUID], bool],
               publish: Callable[[MetadataRecord], Awaitable[None]] | None = None,
               ) -> RemoteTier | None:
        settings = RemoteTierSettings.from_broker(config)
        if not settings.enabled:
            return None
        return cls(RemoteLogManager(settings, node_id, partitions, topic_exists, publish))

    async def restore_follower(self, part: HostedPartition, start: int) -> bool:
        return await restore_follower_state(self.rlm, part, start)

    def start(self) -> None:
        self.rlm.start()

    async def stop(self) -> None:
        await self.rlm.stop()
