"""What both simulators share: a seeded RNG, a fake clock, an event queue
ordered by (time, sequence number) and a bounded trace."""

from __future__ import annotations

import heapq
import random
from collections import deque
from typing import Any

TRACE_LINES = 300  # bounded trace kept for a failure report


class SimulationFailure(AssertionError):
    pass


class Scheduler:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now_ms = 0
        self.queue: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self.trace: deque[str] = deque(maxlen=TRACE_LINES)

    def _push(self, at_ms: int, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (at_ms, self._seq, kind, payload))

    def _exp(self, mean_ms: int) -> int:
        """A delay drawn from an exponential distribution of this mean."""
        return 1 + int(self.rng.expovariate(1.0 / mean_ms))

    def log(self, text: str) -> None:
        self.trace.append(f"{self.now_ms:>7} {text}")
