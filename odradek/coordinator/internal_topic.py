"""Creating an internal topic (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`) on first need.

Both coordinators create their compacted topic the same way: once, under a
lock, with a replication factor capped at the live brokers, through the
controller like any CreateTopics; a topic that another request created first
(TOPIC_ALREADY_EXISTS) is fine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..metadata.controller import NewTopic
from . import errors as E
from .host import CoordinatorHost

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36


async def ensure_internal_topic(
    broker: CoordinatorHost,
    lock: asyncio.Lock,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs_for_rf: Callable[[int], dict[str, str | None]],
) -> int:
    """Create `name` if it does not exist; returns a Kafka error code."""
    if name in broker.image.topics_by_name:
        return E.NONE
    async with lock:
        if name in broker.image.topics_by_name:
            return E.NONE
        live = sum(1 for b in broker.image.brokers.values() if not b.fenced)
        rf = max(1, min(replication_factor, live))
        topic = NewTopic(name=name, num_partitions=num_partitions, replication_factor=rf,
                         assignments={}, configs=configs_for_rf(rf))
        result = (await broker.create_topics([topic], False))[name]
        if result.error_code not in (E.NONE, TOPIC_ALREADY_EXISTS):
            log.error("cannot create %s: %s", name, result.error_message)
            return E.COORDINATOR_NOT_AVAILABLE
        log.info("created %s with %d partitions, replication factor %d",
                 name, num_partitions, rf)
    return E.NONE


def compacted_configs(rf: int, min_isr: int, segment_bytes: int) -> dict[str, str | None]:
    """The configs of a coordinator's compacted topic at replication factor `rf`."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(min(rf, min_isr)),
        "segment.bytes": str(segment_bytes),
    }
