"""What the broker hands a cleaner worker, and what the worker hands back.

Plain picklable values: the worker runs in another process (see
storage/cleaner/manager.py for why) and reads the segment files by path.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    size_bytes: int  # bytes of whole batches at the time the task was made
    next_offset: int  # last offset + 1 (base_offset when empty)


@dataclass(frozen=True, slots=True)
class CleanTask:
    dir: str
    topic: str
    partition: int
    # Every segment of the log when the task was made, oldest first (the last
    # is the active one: read for transaction markers, never cleaned).
    segments: tuple[SegmentInfo, ...]
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base offset; the map stops before it
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int  # segment.bytes: the size a group of segments may reach
    segment_index_bytes: int  # segment.index.bytes: the index size a group may reach
    index_interval_bytes: int
    map_memory_bytes: int  # this worker's share of log.cleaner.dedupe.buffer.size
    map_load_factor: float  # log.cleaner.io.buffer.load.factor
    io_buffer_bytes: int  # this worker's share of log.cleaner.io.buffer.size
    max_message_bytes: int  # largest batch a read buffer must take
    max_io_bytes_per_second: float  # this worker's share of the throttle
    step_delay_ms: int = 0  # test knob: pause between the steps of a cleaning


@dataclass(slots=True)
class CleanedGroup:
    """One ``.cleaned`` segment written for ``old_bases`` (contiguous segments)."""

    old_bases: tuple[int, ...]
    base_offset: int
    size_bytes: int
    suffixes: tuple[str, ...]  # the files written, e.g. (".log", ".index", ".timeindex")


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_read: int = 0
    batches_retained: int = 0
    tombstones_removed: int = 0
    aborted_records_removed: int = 0
    markers_removed: int = 0
    map_records: int = 0
    map_bytes_read: int = 0
    map_seconds: float = 0.0
    clean_seconds: float = 0.0
    throttled_seconds: float = 0.0


@dataclass(slots=True)
class CleanResult:
    end_offset: int  # the new first dirty offset (the map covered [first dirty, end))
    groups: list[CleanedGroup] = field(default_factory=list)
    stats: CleanerStats = field(default_factory=CleanerStats)
    map_full: bool = False
    map_entries: int = 0
    map_slots: int = 0
    # The earliest delete horizon of a retained batch still holding tombstones
    # or a marker (-1 if none): when it passes, cleaning again removes them.
    earliest_delete_horizon_ms: int = -1
