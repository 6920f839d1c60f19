"""The console's tiny charts: numbers kept per key at each load of a page (in memory,
bounded), drawn by a template as an inline SVG polyline (templates/_chart.html)."""

from __future__ import annotations

import collections
import threading
import time

SAMPLES = 60  # per key


class History:
    """The last SAMPLES (time, value) pairs of each key; safe across request threads."""

    def __init__(self) -> None:
        self._samples: dict[str, collections.deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, key: str, value: float, now: float | None = None) -> list[tuple[float, float]]:
        """Record `value` for `key`; its history, oldest first."""
        with self._lock:
            samples = self._samples.setdefault(key, collections.deque(maxlen=SAMPLES))
            samples.append((time.time() if now is None else now, value))
            return list(samples)


def points(history: list[tuple[float, float]], width: int = 480, height: int = 120
           ) -> tuple[list[tuple[float, float]], float]:
    """The history as SVG points (x right, y down), and the top of its scale."""
    if not history:
        return [], 0
    top = max(max(v for _, v in history), 1)
    t0, t1 = history[0][0], history[-1][0]
    span = max(t1 - t0, 1e-9)
    out: list[tuple[float, float]] = []
    for t, v in history:
        x = 0.0 if len(history) == 1 else (t - t0) / span * width
        out.append((round(x, 1), round(height - v / top * height, 1)))
    return out, top
