"""Checking closed segments for corruption: the scrub of one `.log` file.

A byte that rots in a closed segment is served as it is (Kafka checks CRCs only
where it recovers). `scan_closed_segment` reads a closed `.log` with the
recovery scan (segment_recovery.py: whole, plausible, CRC-correct batches from
position 0) and returns where the valid prefix ends when it ends before the
file does: that position and the first offset not covered by a valid batch.
The scrubber (replication/scrubber.py) decides what to do with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .segment_recovery import IndexBuilder, scan_valid_prefix


@dataclass(frozen=True)
class Corruption:
    path: Path
    base_offset: int
    position: int  # the valid prefix ends here
    offset: int  # the first offset past the last valid batch
    size_bytes: int


def scan_closed_segment(path: Path, base_offset: int, size_bytes: int) -> Corruption | None:
    """None when the first `size_bytes` of `path` are whole valid batches (or the
    file is gone: retention or compaction replaced it meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = min(size_bytes, os.fstat(fd).st_size)
        builder = IndexBuilder(base_offset, 1 << 30)
        end = scan_valid_prefix(fd, size, base_offset, builder)
    finally:
        os.close(fd)
    if end >= size:
        return None
    return Corruption(path, base_offset, end, builder.next_offset, size)
