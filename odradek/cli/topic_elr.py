"""The eligible leader replicas (KIP-966) of partitions for `odradek topics describe`.

Kafka's kafka-topics.sh reads them from DescribeTopicPartitions (API 75, what
its admin client's describeTopics sends) and prints `Elr:` and `LastKnownElr:`
after `Isr:`, or `N/A` when the broker did not answer that API. librdkafka's
describe_topics does not expose them, so this asks the broker itself, one
page of partitions at a time (the answer's `next_cursor`).
"""

from __future__ import annotations

from odradek.protocol import api

from .client_config import CommandConfig
from .connection import Connection

__all__ = ["Elrs", "eligible_leader_replicas"]

# (topic, partition) -> (ELR, last known ELR)
Elrs = dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]
VERSIONS: dict[int, int] = {api.ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0}
PAGE_PARTITIONS = 2000  # Kafka's response_partition_limit default
MAX_PAGES = 1000  # 2M partitions: a cursor that never ends is the broker's bug


def eligible_leader_replicas(bootstrap: str, topics: list[str], timeout_s: float,
                             config: CommandConfig | None) -> Elrs:
    """Each partition's ELR and last known ELR. Raises OSError when the broker
    cannot be reached or does not serve DescribeTopicPartitions."""
    out: Elrs = {}
    if not topics:
        return out
    address = bootstrap.split(",")[0].strip()
    conn = Connection(address, timeout_s, VERSIONS, b"odradek-topics", config)
    try:
        cursor: dict[str, object] | None = None
        for _ in range(MAX_PAGES):
            resp = conn.call(api.ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
                "topics": [{"name": t} for t in topics],
                "response_partition_limit": PAGE_PARTITIONS, "cursor": cursor})
            for topic in resp.topics:
                for p in topic.partitions:
                    out[(str(topic.name), int(p.partition_index))] = (
                        tuple(int(b) for b in p.eligible_leader_replicas or ()),
                        tuple(int(b) for b in p.last_known_elr or ()))
            nxt = resp.next_cursor
            if nxt is None:
                break
            cursor = {"topic_name": str(nxt.topic_name),
                      "partition_index": int(nxt.partition_index)}
    finally:
        conn.close()
    return out
