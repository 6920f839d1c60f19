"""Replication throttles (KIP-73): how partition reassignment keeps its copying
from starving clients.

Kafka's keys, verbatim:

* broker configs `leader.replication.throttled.rate` and
  `follower.replication.throttled.rate` (bytes/s; dynamic, per broker id or
  for every broker as the "" resource, else static, else unthrottled);
* topic configs `leader.replication.throttled.replicas` and
  `follower.replication.throttled.replicas`: "*" or "partition:broker,...".

Rules (Kafka's ReplicationQuotaManager and the checks around it):

* A partition is throttled on this broker's leader side when the topic's
  leader list names (partition, this broker) or is "*"; on the follower side
  likewise with the follower list. kafka-reassign-partitions.sh puts the
  current replicas in the leader list and the moving ones in the follower list.
* Only replicas outside the ISR are throttled: a follower in sync is never
  slowed, so acks=all is not.
* The bytes of throttled partitions count against the broker's rate, one
  bucket for the leader side (bytes answered to followers) and one for the
  follower side (bytes fetched).

A throttled read takes what the bucket holds now and never waits for it: the
leader answers fewer bytes (none when the bucket is empty), the follower asks
for fewer or leaves the partition out of that fetch.

Differs from Kafka: a token bucket instead of Kafka's sampled windows
(`replication.quota.window.num` x `replication.quota.window.size.seconds`).
The bucket holds at most `BURST_S` of the rate; one read may overdraw it by a
batch (a fetch always carries at least one whole batch), and nothing more is
sent until it has refilled. Nothing here reads a clock: time is an argument.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from ..configdef import LONG_MAX
from ..metadata import records as R
from ..metadata.image import MetadataImage

# The most the bucket holds: this many seconds of the rate.
BURST_S = 1.0
# Throttled-replica lists parsed and kept (one per distinct config value).
PARSED_LISTS_CACHED = 1024

LEADER = "leader"
FOLLOWER = "follower"

ALL = None  # "*": every partition of the topic


@functools.lru_cache(maxsize=PARSED_LISTS_CACHED)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a "*" / "partition:broker,..." list throttles on
    `broker_id` (ALL for "*"). The value was validated when it was stored."""
    if value.strip() == "*":
        return ALL
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if partition and broker and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class TokenBucket:
    """Bytes per second, at most BURST_S of them saved up; may go negative by
    one read (`consume` after `available` said there was room)."""

    def __init__(self, rate_bytes_per_s: int, now_s: float) -> None:
        self.rate_bytes_per_s = rate_bytes_per_s
        self.tokens = float(self.capacity)
        self.updated_s = now_s

    @property
    def capacity(self) -> float:
        return self.rate_bytes_per_s * BURST_S

    def _refill(self, now_s: float) -> None:
        elapsed = max(now_s - self.updated_s, 0.0)
        self.updated_s = now_s
        self.tokens = min(self.tokens + elapsed * self.rate_bytes_per_s, self.capacity)

    def set_rate(self, rate_bytes_per_s: int, now_s: float) -> None:
        self._refill(now_s)
        self.rate_bytes_per_s = rate_bytes_per_s
        self.tokens = min(self.tokens, self.capacity)

    def available(self, now_s: float) -> int:
        self._refill(now_s)
        return max(int(self.tokens), 0)

    def consume(self, size_bytes: int, now_s: float) -> None:
        self._refill(now_s)
        self.tokens -= size_bytes

    def seconds_until_available(self, now_s: float) -> float:
        self._refill(now_s)
        if self.tokens >= 1:
            return 0.0
        return (1 - self.tokens) / max(self.rate_bytes_per_s, 1)


class ReplicationQuota:
    """One side (LEADER or FOLLOWER) of this broker's replication throttle."""

    def __init__(self, side: str, node_id: int, static_rate_bytes_per_s: int) -> None:
        assert side in (LEADER, FOLLOWER)
        self.rate_key = f"{side}.replication.throttled.rate"
        self.replicas_key = f"{side}.replication.throttled.replicas"
        self.node_id = node_id
        self.static_rate = static_rate_bytes_per_s
        self._bucket: TokenBucket | None = None

    def rate(self, image: MetadataImage) -> int:
        """Bytes/s: this broker's dynamic value, else the cluster default, else static."""
        for configs in (
            image.broker_configs(self.node_id),
            image.configs.get((R.RESOURCE_BROKER, ""), {}),
        ):
            value = configs.get(self.rate_key)
            if value is not None:
                return int(value)
        return self.static_rate

    def is_throttled(self, image: MetadataImage, topic: str, partition: int) -> bool:
        configs: Mapping[str, str] = image.topic_configs(topic)
        value = configs.get(self.replicas_key)
        if not value or self.rate(image) >= LONG_MAX:
            return False
        parts = throttled_partitions(value, self.node_id)
        return parts is ALL or partition in parts

    def _current(self, image: MetadataImage, now_s: float) -> TokenBucket:
        rate = self.rate(image)
        if self._bucket is None:
            self._bucket = TokenBucket(rate, now_s)
        elif self._bucket.rate_bytes_per_s != rate:
            self._bucket.set_rate(rate, now_s)
        return self._bucket

    def available(self, image: MetadataImage, now_s: float) -> int:
        """Bytes a throttled partition may move now (0: leave it out)."""
        return self._current(image, now_s).available(now_s)

    def record(self, image: MetadataImage, size_bytes: int, now_s: float) -> None:
        if size_bytes:
            self._current(image, now_s).consume(size_bytes, now_s)

    def seconds_until_available(self, image: MetadataImage, now_s: float) -> float:
        return self._current(image, now_s).seconds_until_available(now_s)
