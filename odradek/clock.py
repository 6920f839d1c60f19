"""The broker's two clocks, and which one each use of time reads.

A host's wall clock can jump: an operator or NTP steps it, a VM is restored, a
paused process resumes. What must follow the wall clock and what must not:

- **Wall clock** (``wall_ms``): what is compared with record timestamps or given
  to other hosts. LogAppendTime, retention (``retention.ms`` against a segment's
  largest record timestamp, as in Kafka), ListOffsets by time, segment roll by
  ``segment.ms``, ``producer.id.expiration.ms`` (against the producer's last
  record timestamp), SASL and token expiry.
- **Steady clock** (``steady_ms``): durations measured inside this process:
  session and rebalance timeouts, transaction timeouts, offsets retention
  checks, share-group record locks, ``flush.ms``, ``file.delete.delay.ms``,
  quotas and throttles, request and fetch deadlines. ``steady_ms`` reads in the
  wall clock's units, starting from the wall clock at start-up, but advances with
  ``time.monotonic``: a jump of the wall clock never moves it. It is the clock
  of the group and transaction coordinators, whose timestamps are stored in
  their records (Kafka's coordinators read the wall clock there; a transaction
  or a session therefore never times out, nor lives on, because the host's clock
  was stepped).

Everything else reads ``time.monotonic`` directly.
"""

from __future__ import annotations

import time

_WALL_AT_START_NS = time.time_ns()
_STEADY_AT_START_NS = time.monotonic_ns()


def wall_ms() -> int:
    """The host's wall clock, in ms since the epoch (it may jump)."""
    return time.time_ns() // 1_000_000


def steady_ms() -> int:
    """ms since the epoch as the wall clock read at start-up, advanced by the
    monotonic clock since: never jumps, never goes back."""
    return (_WALL_AT_START_NS + time.monotonic_ns() - _STEADY_AT_START_NS) // 1_000_000
