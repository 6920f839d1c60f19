"""Publishing the remote log metadata events to `__remote_log_metadata`, Kafka's
topic-based remote log metadata manager's topic (tiered/metadata_records.py for the
record format).

The RemoteLogManager of a partition's leader publishes each event (COPY_SEGMENT_STARTED,
COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED) as one record
with a null key to the metadata partition of its user partition
(metadata_records.metadata_partition), produced with acks=all to that partition's
leader over the inter-broker listener, like any producer. The topic is created on
first need (`rlmm.config.remote.log.metadata.topic.num.partitions` and
`.replication.factor`, capped at the live brokers; cleanup.policy=delete,
retention.ms=-1 as in Kafka). Readers outside the broker (Spark) consume it; the
brokers themselves rebuild their view from the store's markers
(tiered/storage_manager.py), so a publish that fails is logged and not retried forever.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..coordinator.host import CoordinatorHost
from ..coordinator.internal_topic import ensure_internal_topic
from ..protocol.api import ApiKey
from ..protocol.records import Record, build_batch
from ..replication.peers import PeerChannels
from ..tiered.metadata_records import (
    MetadataRecord,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    encode_value,
    metadata_partition,
)
from ..tiered.settings import REMOTE_LOG_METADATA_TOPIC, RemoteTierSettings

log = logging.getLogger(__name__)

PRODUCE_VERSION = 9
ATTEMPTS = 5
RETRY_S = 0.2


class RemoteMetadataPublisher:
    def __init__(self, broker: CoordinatorHost, settings: RemoteTierSettings) -> None:
        self.broker = broker
        self.settings = settings
        self._lock = asyncio.Lock()
        self._peers = PeerChannels(broker, b"odradek-remote-log-metadata")
        self.published = 0

    def close(self) -> None:
        self._peers.close()

    async def publish(self, rec: MetadataRecord) -> None:
        s = self.settings
        code = await ensure_internal_topic(
            self.broker, self._lock, REMOTE_LOG_METADATA_TOPIC, s.metadata_partitions,
            s.metadata_replication_factor,
            lambda rf: {"cleanup.policy": "delete", "retention.ms": "-1",
                        "min.insync.replicas": str(min(rf, 2))})
        if code:
            raise RuntimeError(f"{REMOTE_LOG_METADATA_TOPIC} cannot be created (error {code})")
        if isinstance(rec, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
            tip = rec.segment_id.topic_id_partition
        else:
            tip = rec.topic_id_partition
        batch = build_batch([Record(timestamp=int(time.time() * 1000),
                                    value=encode_value(rec))])
        error = -1
        for _ in range(ATTEMPTS):
            topic = self.broker.image.topics_by_name.get(REMOTE_LOG_METADATA_TOPIC)
            if topic is not None and topic.partitions:
                index = metadata_partition(tip.topic_id, tip.partition, len(topic.partitions))
                leader = self._peers.leader_of(REMOTE_LOG_METADATA_TOPIC, index)
                resp = None if leader is None else await self._peers.request(
                    leader, ApiKey.PRODUCE, PRODUCE_VERSION, {
                        "transactional_id": None, "acks": -1, "timeout": 10000,
                        "topic_data": [{"name": REMOTE_LOG_METADATA_TOPIC, "partition_data": [
                            {"index": index, "records": batch}]}]},
                    15.0, f"publishing to {REMOTE_LOG_METADATA_TOPIC}")
                if resp is not None:
                    p = resp.responses[0].partition_responses[0]
                    error = int(getattr(p.error_code, "value", p.error_code))
                    if error == 0:
                        self.published += 1
                        return
            await asyncio.sleep(RETRY_S)
        raise RuntimeError(f"publishing to {REMOTE_LOG_METADATA_TOPIC} failed (error {error})")
