"""Producer id blocks: where a node's idempotent and transactional producer ids
come from.

A lone voter appends a ProducerIdsRecord itself and hands out ids from that
block. A broker-only node (or a voter of a larger quorum) takes blocks from the
active controller with AllocateProducerIds and, as Kafka's RPCProducerIdManager
does, fetches the next block ahead (at start and when 90% of the current one
is used), so a controller that is away for a while does not stop idempotent
producers at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from ..metadata import records as R
from ..metadata.image import MetadataImage
from ..metadata.quorum import MetadataQuorum
from ..protocol.client import ChannelError

log = logging.getLogger(__name__)


class BlockSource(Protocol):
    """The controller, seen from a broker-only node (lifecycle.BrokerLifecycle)."""

    async def allocate_producer_ids(self) -> tuple[int, int]: ...


class ProducerIdBlocks:
    def __init__(self, node_id: int, quorum: MetadataQuorum,
                 image: Callable[[], MetadataImage], source: BlockSource | None) -> None:
        self.node_id = node_id
        self.quorum = quorum
        self.image = image
        self.source = source  # None: a lone voter, which allocates its own blocks
        self.current: tuple[int, int] = (0, 0)  # [next, end) of the block in use
        self.following: tuple[int, int] | None = None  # the next block, fetched ahead
        self.prefetch_task: asyncio.Task[None] | None = None

    def start_prefetch(self) -> None:
        """Once registered with the controller: fetch the first block ahead."""
        self.current = (0, 0)  # empty: the first call takes a block
        self.prefetch_task = asyncio.get_running_loop().create_task(self._prefetch())

    async def ensure(self) -> None:
        """Before an id is handed out: a block is in hand (broker-only nodes)."""
        if self.source is None:
            return
        if self.current[0] >= self.current[1]:
            if self.following is None:
                start, length = await self.source.allocate_producer_ids()
                self.following = (start, start + length)
            if self.current[0] >= self.current[1]:
                self.current, self.following = self.following, None
        nxt, end = self.current
        if (self.following is None and self.prefetch_task is None
                and end - nxt <= R.PRODUCER_ID_BLOCK_SIZE // 10):
            self.prefetch_task = asyncio.get_running_loop().create_task(self._prefetch())

    async def _prefetch(self) -> None:
        assert self.source is not None
        try:
            start, length = await self.source.allocate_producer_ids()
            if self.following is None:
                self.following = (start, start + length)
        except ChannelError as e:
            log.info("producer id block not fetched ahead: %s", e)
        finally:
            self.prefetch_task = None

    def next(self) -> int:
        nxt, end = self.current
        if nxt >= end:
            if self.source is not None:
                raise ChannelError("no producer id block from the controller yet")
            # The one voter: a lone voter commits inside the call.
            start = max(self.image().next_producer_id, 0)
            self.quorum.append(
                [R.producer_ids_record(self.node_id, start + R.PRODUCER_ID_BLOCK_SIZE)])
            nxt, end = start, start + R.PRODUCER_ID_BLOCK_SIZE
        self.current = (nxt + 1, end)
        return nxt
