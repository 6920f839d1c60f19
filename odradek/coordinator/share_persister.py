"""The share-partition leader's way to its state (KIP-932's persister).

A share partition's durable state lives with its share coordinator, the
leader of its `__share_group_state` partition (share_coordinator.py). The
persister finds that leader in the metadata image and calls the coordinator
in process when it is this broker, else sends it Initialize/Read/Write/
DeleteShareGroupState (CLUSTER_ACTION, on the inter-broker listener).

Retriable answers (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, an unreachable broker, a request timeout) are
tried again every RETRY_BACKOFF_MS until `deadline_ms` has passed, as Kafka's
persister retries: during a failover of the coordinator the new leader of the
state partition is elected and loads it in a few seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..protocol import api
from ..replication.node import NodeView
from ..replication.peers import PeerChannels
from . import errors as E
from .share_coordinator import SHARE_STATE_TOPIC
from .share_coordinator_service import ShareCoordinatorService
from .share_state_records import Batch, Key, ShareSnapshot

log = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 200
REQUEST_TIMEOUT_S = 10.0
REQUEST_TIMED_OUT = 7
RETRIABLE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE,
                       E.COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT})

T = TypeVar("T")

ACKNOWLEDGED_STATE, ARCHIVED_STATE = 2, 4  # delivery states of a stored batch


@dataclass(frozen=True, slots=True)
class Summary:
    """ReadShareGroupStateSummary's answer for one share partition."""
    state_epoch: int
    leader_epoch: int
    start_offset: int  # -1: reset, not initialized yet
    delivery_complete_count: int  # -1: not known


def delivery_complete_count(batches: Iterable[Batch]) -> int:
    """Records of the stored window acknowledged or archived (KIP-1226's
    DeliveryCompleteCount)."""
    return sum(last - first + 1 for first, last, _, state in batches
               if state in (ACKNOWLEDGED_STATE, ARCHIVED_STATE))


class SharePersister:
    def __init__(self, broker: NodeView, service: ShareCoordinatorService,
                 deadline_ms: int = 15_000) -> None:
        self.broker = broker
        self.service = service
        self.deadline_ms = deadline_ms
        self._peers = PeerChannels(broker, b"odradek-share-persister")

    @property
    def peers(self) -> PeerChannels:
        """The connections to the other brokers (also the group coordinator's
        ListOffsets for a share partition's lag)."""
        return self._peers

    def close(self) -> None:
        self._peers.close()

    def _coordinator(self, key: Key) -> int | None:
        return self._peers.leader_of(SHARE_STATE_TOPIC, self.service.core.partition_for(key))

    async def _retrying(self, key: Key, what: str,
                        local: Callable[[], Awaitable[tuple[int, T]]],
                        remote: Callable[[int], Awaitable[tuple[int, T]]],
                        empty: T) -> tuple[int, T]:
        code = await self.service.ensure_topic()
        if code != E.NONE:
            return code, empty
        deadline = time.monotonic() + self.deadline_ms / 1000
        while True:
            node = self._coordinator(key)
            if node is None:
                code, value = E.COORDINATOR_NOT_AVAILABLE, empty
            elif node == self.broker.node_id:
                code, value = await local()
            else:
                code, value = await remote(node)
            if code not in RETRIABLE or time.monotonic() >= deadline:
                if code != E.NONE:
                    log.warning("%s of %s: error %d", what, key, code)
                return code, value
            await asyncio.sleep(RETRY_BACKOFF_MS / 1000)

    async def _send(self, node: int, key: int, version: int, body: dict[str, Any],
                    what: str) -> Any | None:
        return await self._peers.request(node, key, version, body, REQUEST_TIMEOUT_S, what)

    @staticmethod
    def _answer(resp: Any | None) -> tuple[int, Any]:
        """(error code, the one partition's result); COORDINATOR_NOT_AVAILABLE
        without an answer."""
        for topic in resp.results if resp is not None else ():
            for p in topic.partitions:
                return p.error_code.value, p
        return E.COORDINATOR_NOT_AVAILABLE, None

    # -- the calls ------------------------------------------------------------------------
    async def read(self, key: Key, leader_epoch: int) -> tuple[int, ShareSnapshot | None]:
        group, topic_id, partition = key

        async def local() -> tuple[int, ShareSnapshot | None]:
            return await self.service.read(key, leader_epoch)

        async def remote(node: int) -> tuple[int, ShareSnapshot | None]:
            resp = await self._send(node, api.ApiKey.READ_SHARE_GROUP_STATE, 0, {
                "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": partition, "leader_epoch": leader_epoch}]}]},
                "ReadShareGroupState")
            code, p = self._answer(resp)
            if code != E.NONE or (p.start_offset < 0 and p.state_epoch <= 0
                                  and not p.state_batches):
                return code, None  # no state (a reset one, start -1, has a state epoch)
            return E.NONE, ShareSnapshot(
                0, p.state_epoch, leader_epoch, p.start_offset,
                tuple((b.first_offset, b.last_offset, b.delivery_count, b.delivery_state)
                      for b in p.state_batches))

        return await self._retrying(key, "ReadShareGroupState", local, remote, None)

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[Batch]) -> int:
        group, topic_id, partition = key

        async def local() -> tuple[int, None]:
            return await self.service.write(key, state_epoch, leader_epoch, start_offset,
                                            batches), None

        async def remote(node: int) -> tuple[int, None]:
            resp = await self._send(node, api.ApiKey.WRITE_SHARE_GROUP_STATE, 0, {
                "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{
                    "partition": partition, "state_epoch": state_epoch,
                    "leader_epoch": leader_epoch, "start_offset": start_offset,
                    "state_batches": [{"first_offset": a, "last_offset": b,
                                       "delivery_state": s, "delivery_count": c}
                                      for a, b, c, s in batches]}]}]},
                "WriteShareGroupState")
            return self._answer(resp)[0], None

        return (await self._retrying(key, "WriteShareGroupState", local, remote, None))[0]

    async def delete(self, key: Key) -> int:
        group, topic_id, partition = key

        async def local() -> tuple[int, None]:
            return await self.service.delete(key), None

        async def remote(node: int) -> tuple[int, None]:
            resp = await self._send(node, api.ApiKey.DELETE_SHARE_GROUP_STATE, 0, {
                "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": partition}]}]}, "DeleteShareGroupState")
            return self._answer(resp)[0], None

        return (await self._retrying(key, "DeleteShareGroupState", local, remote, None))[0]

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> int:
        """A new state for the share partition (the group coordinator's
        AlterShareGroupOffsets): start offset (-1: not initialized, the leader
        applies `share.auto.offset.reset`), no batches, `state_epoch` above the
        stored one so that a leader's stale copy is fenced on its next write."""
        group, topic_id, partition = key

        async def local() -> tuple[int, None]:
            return await self.service.initialize(key, state_epoch, start_offset), None

        async def remote(node: int) -> tuple[int, None]:
            resp = await self._send(node, api.ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {
                "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": partition, "state_epoch": state_epoch,
                     "start_offset": start_offset}]}]}, "InitializeShareGroupState")
            return self._answer(resp)[0], None

        return (await self._retrying(key, "InitializeShareGroupState", local, remote, None))[0]

    async def summary(self, key: Key) -> tuple[int, Summary | None]:
        """The start offset, epochs and the count of records delivered for good
        (acknowledged or archived) above it; None when nothing is stored:
        ReadShareGroupStateSummary, which records no leader epoch."""
        group, topic_id, partition = key

        async def local() -> tuple[int, Summary | None]:
            code, state = await self.service.summary(key)
            if state is None:
                return code, None
            return code, Summary(state.state_epoch, state.leader_epoch, state.start_offset,
                                 delivery_complete_count(state.batches))

        async def remote(node: int) -> tuple[int, Summary | None]:
            resp = await self._send(node, api.ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
                "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition": partition, "leader_epoch": -1}]}]},
                "ReadShareGroupStateSummary")
            code, p = self._answer(resp)
            if code != E.NONE or (p.start_offset < 0 and p.state_epoch <= 0):
                return code, None
            return E.NONE, Summary(p.state_epoch, p.leader_epoch, p.start_offset,
                                   p.delivery_complete_count)

        return await self._retrying(key, "ReadShareGroupStateSummary", local, remote, None)
