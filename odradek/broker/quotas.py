"""Client quotas as Kafka has them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599).

A quota is set on an entity — a user, a client id, or a user and a client id,
each name possibly the default (`None`) — with Kafka's keys:

    producer_byte_rate        bytes/s of Produce requests
    consumer_byte_rate        bytes/s of Fetch responses
    request_percentage        % of one request handler thread's time, per quota window
    controller_mutation_rate  partitions created or deleted per second (KIP-599)

The entity whose quota applies is found in Kafka's order of precedence (most
specific first); all connections that the matched entity covers share one rate.
The rate is measured as Kafka's `Rate` over `quota.window.num` windows of
`quota.window.size.seconds`; a request that takes it past the quota is answered
with a throttle time, `(observed - quota) / quota * window`, and the broker mutes
the connection for that long (KIP-219). Only request time is bounded, at one
window, as Kafka's request quota manager does.

`controller_mutation_rate` (KIP-599) is a token bucket instead, as Kafka's
ControllerMutationQuotaManager keeps it: credits grow at the quota's rate up to
a burst of `quota * (samples - 1) * window`; CreateTopics, CreatePartitions and
DeleteTopics spend one credit per partition created or deleted, and may drive
the credits below zero. `MutationQuota` is one request's view of it (the
controller calls `admit(partitions)` per topic): strict (CreateTopics v6+,
DeleteTopics v5+, CreatePartitions v3+) refuses a topic while the credits are
below zero, which the handler answers THROTTLING_QUOTA_EXCEEDED, with the time
the credits need to get back to zero as throttle_time_ms; permissive (older
versions, whose clients know no such error) admits every topic and answers the
throttle time only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..metadata.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
    entity,
)

__all__ = ["CONSUMER_BYTE_RATE", "CONTROLLER_MUTATION_RATE", "MUTATION_STRICT_SINCE",
           "PRODUCER_BYTE_RATE", "REQUEST_PERCENTAGE", "MutationQuota", "QuotaManager",
           "applicable", "precedence"]

# The APIs that spend controller mutation credits, and the version from which
# they are strict (refuse with THROTTLING_QUOTA_EXCEEDED): Kafka's KafkaApis /
# ControllerApis `strictSinceVersion`. Keys: CreateTopics 19, DeleteTopics 20,
# CreatePartitions 37.
MUTATION_STRICT_SINCE = {19: 6, 20: 5, 37: 3}

# Client ids Kafka never throttles (QuotaConfigs.INTERNAL_CLIENT_ID_PREFIX).
INTERNAL_CLIENT_ID_PREFIX = "__admin_client"


def precedence(user: str, client_id: str) -> list[Entity]:
    """Kafka's order, most specific first (kafka.apache.org: "Quotas")."""
    return [
        entity(user=user, client_id=client_id),
        entity(user=user, client_id=None),
        entity(user=user),
        entity(user=None, client_id=client_id),
        entity(user=None, client_id=None),
        entity(user=None),
        entity(client_id=client_id),
        entity(client_id=None),
    ]


@dataclass(frozen=True, slots=True)
class Applied:
    """The quota that applies to a request, and the key of the rate it shares."""

    bound: float
    sensor: tuple[str, str, str]  # (quota key, user or "", client id or "")


def applicable(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
               client_id: str) -> Applied | None:
    """The quota for `key` that applies to (user, client id), or None."""
    if not quotas:
        return None
    for ent in precedence(user, client_id):
        bound = quotas.get(ent, {}).get(key)
        if bound is not None:
            types = {t for t, _ in ent}
            return Applied(bound, (key, user if USER in types else "",
                                   client_id if CLIENT_ID in types else ""))
    return None


class Rate:
    """Kafka's windowed `Rate`: the sum over the last `samples` windows, divided
    by their elapsed length, counted as at least `samples - 1` full windows."""

    __slots__ = ("samples", "starts", "values", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.starts: list[float] = []
        self.values: list[float] = []

    def record(self, value: float, now_ms: float) -> None:
        self._expire(now_ms)
        if not self.starts or now_ms - self.starts[-1] >= self.window_ms:
            self.starts.append(now_ms)
            self.values.append(0.0)
            if len(self.starts) > self.samples:
                del self.starts[0], self.values[0]
        self.values[-1] += value

    def _expire(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self.starts and self.starts[0] + self.window_ms <= horizon:
            del self.starts[0], self.values[0]

    def window_size_ms(self, now_ms: float) -> float:
        elapsed = now_ms - self.starts[0] if self.starts else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        """Per second."""
        self._expire(now_ms)
        return sum(self.values) / (self.window_size_ms(now_ms) / 1000.0)


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    return max(0, round((observed - bound) / bound * window_ms))


class TokenBucket:
    """Kafka's TokenBucket stat: credits refill at `rate` per second up to `burst`."""

    __slots__ = ("credits", "last_ms")

    def __init__(self, burst: float, now_ms: float) -> None:
        self.credits = burst
        self.last_ms = now_ms

    def refill(self, rate: float, burst: float, now_ms: float) -> None:
        self.credits = min(burst, self.credits + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms


class MutationQuota:
    """One CreateTopics/CreatePartitions/DeleteTopics request's controller mutation
    quota (Kafka's Strict/PermissiveControllerMutationQuota)."""

    __slots__ = ("bucket", "burst", "clock", "rate", "strict", "throttle_ms")

    def __init__(self, bucket: TokenBucket, rate: float, burst: float, strict: bool,
                 clock: Callable[[], float]) -> None:
        self.bucket, self.rate, self.burst = bucket, rate, burst
        self.strict = strict
        self.clock = clock
        self.throttle_ms = 0

    def admit(self, partitions: int) -> bool:
        """Spend `partitions` credits; False (strict only) if the credits are
        already below zero: the topic is refused and throttle_ms says how long
        until they are back to zero."""
        bucket = self.bucket
        bucket.refill(self.rate, self.burst, self.clock() * 1000.0)
        if self.strict and bucket.credits < 0:
            self._throttle()
            return False
        bucket.credits = min(self.burst, bucket.credits - partitions)
        if not self.strict and bucket.credits < 0:
            self._throttle()
        return True

    def _throttle(self) -> None:
        ms = round(-self.bucket.credits / self.rate * 1000.0) if self.rate > 0 else 2**31 - 1
        self.throttle_ms = min(2**31 - 1, max(self.throttle_ms, ms))


class FetchQuota:
    """One consumer Fetch's consumer_byte_rate, as Kafka's KafkaApis applies it: the
    fetch asks no more than one window's worth (`window_bytes`), and a response
    that takes the rate over the quota is not sent: the handler answers it empty
    with throttle_time_ms, and its bytes are taken back from the rate."""

    __slots__ = ("client_id", "manager", "quotas", "throttle_ms", "user", "window_bytes")

    def __init__(self, manager: QuotaManager, quotas: Mapping[Entity, Mapping[str, float]],
                 user: str, client_id: str, window_bytes: int) -> None:
        self.manager, self.quotas = manager, quotas
        self.user, self.client_id = user, client_id
        self.window_bytes = window_bytes
        self.throttle_ms = 0

    def record(self, response_bytes: int) -> int:
        """The throttle time of a response this large (0: send it)."""
        record = self.manager.record
        ms = record(self.quotas, CONSUMER_BYTE_RATE, self.user, self.client_id, response_bytes)
        if ms:
            record(self.quotas, CONSUMER_BYTE_RATE, self.user, self.client_id, -response_bytes)
        self.throttle_ms = ms
        return ms


class QuotaManager:
    """The rates of every sensor on this broker and the throttle they call for."""

    def __init__(self, samples: int = 11, window_s: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.samples = samples
        self.window_ms = window_s * 1000
        self.clock = clock
        self.rates: dict[tuple[str, str, str], Rate] = {}
        self.buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._next_sweep_ms = 0.0

    def record(self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
               client_id: str, value: float) -> int:
        """Record `value` against the quota that applies; the throttle time in ms."""
        if client_id.startswith(INTERNAL_CLIENT_ID_PREFIX):
            return 0
        applied = applicable(quotas, key, user, client_id)
        if applied is None:
            return 0
        now_ms = self.clock() * 1000.0
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        rate = self.rates.get(applied.sensor)
        if rate is None:
            rate = self.rates[applied.sensor] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= applied.bound:
            return 0
        ms = throttle_time_ms(observed, applied.bound, rate.window_size_ms(now_ms))
        if key == REQUEST_PERCENTAGE:
            ms = min(ms, self.window_ms)  # Kafka bounds only request time
        return ms

    def fetch_quota(self, quotas: Mapping[Entity, Mapping[str, float]], user: str,
                    client_id: str) -> FetchQuota | None:
        """The consumer_byte_rate of one consumer Fetch, or None if none applies."""
        if client_id.startswith(INTERNAL_CLIENT_ID_PREFIX):
            return None
        applied = applicable(quotas, CONSUMER_BYTE_RATE, user, client_id)
        if applied is None:
            return None
        window_bytes = max(1, min(2**31 - 1, int(applied.bound * self.window_ms / 1000)))
        return FetchQuota(self, quotas, user, client_id, window_bytes)

    def mutation_quota(self, quotas: Mapping[Entity, Mapping[str, float]], user: str,
                       client_id: str, strict: bool) -> MutationQuota | None:
        """The controller mutation quota of one request, or None if none applies."""
        if client_id.startswith(INTERNAL_CLIENT_ID_PREFIX):
            return None
        applied = applicable(quotas, CONTROLLER_MUTATION_RATE, user, client_id)
        if applied is None:
            return None
        now_ms = self.clock() * 1000.0
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        burst = applied.bound * (self.samples - 1) * self.window_ms / 1000.0
        bucket = self.buckets.get(applied.sensor)
        if bucket is None:
            bucket = self.buckets[applied.sensor] = TokenBucket(burst, now_ms)
        return MutationQuota(bucket, applied.bound, burst, strict, self.clock)

    def _sweep(self, now_ms: float) -> None:
        """Forget the rates no request has touched for a whole measuring span
        (client ids come and go; a default quota must not grow a map forever),
        and the token buckets untouched as long (full again, as a new one starts)."""
        span = self.samples * self.window_ms
        self.rates = {k: r for k, r in self.rates.items() if r.starts and r.starts[-1] > now_ms - span}
        self.buckets = {k: b for k, b in self.buckets.items() if b.last_ms > now_ms - span}
        self._next_sweep_ms = now_ms + span
