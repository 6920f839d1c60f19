"""How far a broker's start-up has loaded its logs (issue 15.4).

LogManager.startup fills one `LoadProgress` while it opens the logs of every
online dir: partitions found and loaded, those that needed a recovery scan
(an unflushed tail after an unclean shutdown) and the bytes those scans
CRC-checked. It logs a progress line every PROGRESS_LOG_INTERVAL_S and one at
the end of each dir, and the broker's metrics read it
(``odradek_log_load_*``, broker/metrics.py). Updated from the recovery
threads under a lock; read anywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("odradek.storage.log_manager")

PROGRESS_LOG_INTERVAL_S = 10.0


@dataclass
class LoadProgress:
    partitions_total: int = 0
    partitions_loaded: int = 0
    partitions_recovered: int = 0
    bytes_recovered: int = 0
    seconds: float = 0.0  # the whole load, set when it ends
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _last_log: float = field(default_factory=time.monotonic, repr=False)

    def found(self, count: int) -> None:
        with self._lock:
            self.partitions_total += count

    def loaded(self, dir: Path, recovered_bytes: int, recovered: bool) -> None:
        with self._lock:
            self.partitions_loaded += 1
            if recovered:
                self.partitions_recovered += 1
                self.bytes_recovered += recovered_bytes
            now = time.monotonic()
            if now - self._last_log < PROGRESS_LOG_INTERVAL_S:
                return
            self._last_log = now
        self.log_line(f"loading logs in {dir}:")

    def log_line(self, what: str) -> None:
        log.info(
            "%s %d of %d partitions loaded, %d recovered after an unclean shutdown "
            "(%d bytes CRC-checked)", what, self.partitions_loaded, self.partitions_total,
            self.partitions_recovered, self.bytes_recovered,
        )
