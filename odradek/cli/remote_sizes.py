"""The remote-tier size of tiered partitions for `odradek topics describe`.

Kafka has no request that answers a partition's remote size (DescribeLogDirs reports
local segments only; brokers expose it as the RemoteLogSizeBytes metric), so this reads
what any Kafka client can: the partitions' events in `__remote_log_metadata`
(KIP-405's topic-based metadata manager), from the beginning to the high watermark,
replayed (tiered/metadata_records.replay) into each partition's visible segments.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from odradek.tiered.metadata_records import decode_value, metadata_partition, replay
from odradek.tiered.settings import REMOTE_LOG_METADATA_TOPIC

from . import client_config, options
from .client_config import CommandConfig

__all__ = ["RemoteSize", "remote_sizes"]

RemoteSize = tuple[int, int]  # (bytes, segments)


def _uuid(topic_id: Any) -> uuid.UUID:
    """confluent-kafka's Uuid as a uuid.UUID (its halves are signed 64-bit)."""
    hi = topic_id.get_most_significant_bits() & (2**64 - 1)
    lo = topic_id.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(hi << 64) | lo)


def remote_sizes(bootstrap: str, partitions: dict[uuid.UUID, list[int]], timeout_s: float,
                 config: CommandConfig | None) -> dict[tuple[uuid.UUID, int], RemoteSize]:
    """(bytes, segments) in the remote tier of each (topic id, partition) asked for;
    a partition with nothing copied is (0, 0)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    out = {(t, p): (0, 0) for t, ps in partitions.items() for p in ps}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-topics",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         **client_config.librdkafka_settings(config),
                         **options.librdkafka_logging()})
    try:
        md = consumer.list_topics(REMOTE_LOG_METADATA_TOPIC, timeout=timeout_s)
        topic = md.topics.get(REMOTE_LOG_METADATA_TOPIC)
        if topic is None or topic.error is not None or not topic.partitions:
            return out  # nothing was ever copied
        n = len(topic.partitions)
        wanted = sorted({metadata_partition(t, p, n) for t, p in out})
        ends = {}
        for index in wanted:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(REMOTE_LOG_METADATA_TOPIC, index), timeout=timeout_s)
            if high > 0:
                ends[index] = high
        consumer.assign([TopicPartition(REMOTE_LOG_METADATA_TOPIC, i, OFFSET_BEGINNING)
                         for i in ends])
        events = []
        deadline = time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            value, part, at = msg.value(), msg.partition(), msg.offset()
            if value is not None:
                try:
                    events.append(decode_value(value))
                except ValueError:
                    pass  # a record of a newer version: not ours to judge
            if part is not None and at is not None and at + 1 >= ends.get(part, 0):
                ends.pop(part, None)
        if ends:
            raise TimeoutError(f"{REMOTE_LOG_METADATA_TOPIC} not read in {timeout_s} s")
        for tip, segments in replay(events).items():
            key = (tip.topic_id, tip.partition)
            if key in out:
                out[key] = (sum(m.segment_size_in_bytes for m in segments), len(segments))
        return out
    finally:
        consumer.close()


def topic_ids(admin: Any, names: list[str], timeout_s: float) -> dict[str, uuid.UUID]:
    """The topic ids of `names` (DescribeTopics through the admin client)."""
    from confluent_kafka import TopicCollection

    if not names:
        return {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s)
    return {name: _uuid(f.result(timeout=timeout_s).topic_id) for name, f in futures.items()}
