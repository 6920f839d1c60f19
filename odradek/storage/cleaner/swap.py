"""Swapping cleaned segments into a log, and finishing an interrupted swap at load.

File protocol (Kafka's ``LocalLog.replaceSegments`` and ``LogLoader``)
---------------------------------------------------------------------
For a group of old segments ``[B, ..., Bk]`` cleaned into one segment based at B:

1. The worker writes ``B.log.cleaned``, ``B.index.cleaned``,
   ``B.timeindex.cleaned`` (and ``B.txnindex.cleaned``), each fsynced.
2. ``commit_cleaned``: each ``.cleaned`` is renamed ``.swap``, the ``.log``
   first; the directory is fsynced. From the moment ``B.log.swap`` exists the
   swap is decided: a crash from here on completes it at load.
3. ``swap_in``: every old segment's files are renamed ``.deleted`` (unlinked
   after ``file.delete.delay.ms``) ...
4. ... and each ``.swap`` is renamed to its plain name, the ``.log`` first;
   the new segment is opened and takes the old ones' place in the log's list.
   The caller then fsyncs the directory.

Steps 3 and 4 run on the event loop without a pause, so no read or append
of the log sees a half-swapped list. Undoing a decided swap (the log changed
under the cleaner) removes the index ``.swap`` files first and the
``.log.swap`` last, so a crash while undoing leaves either a complete swap to
finish or nothing.

At load (``complete_interrupted_swaps``, storage/swap_files.py, which the log
loader calls before the segments are listed; re-exported here):

* every ``*.cleaned`` file is removed: the swap was never decided and the old
  segments are whole;
* for every ``B.log.swap``: N = its next offset (a header scan); every plain
  segment file whose base offset lies in ``[B, max(N, B + 1))`` is removed (the
  segments it replaces, and B's own old files, so no old index is ever paired
  with the new log), then B's ``.swap`` files take their plain names;
* any other ``B.<index>.swap`` (a crash within step 4, after the ``.log`` was
  renamed; B's old files were ``.deleted`` by then) takes its plain name;
* ``*.deleted`` files are removed by the log's own loading (storage/log.py).

Every state a crash can leave is therefore either the old segments or the
cleaned one, never a mix that loses or duplicates an offset.

``swap_in`` works on a LocalLog (storage/local_log.py, the segment list). The
load-time half lives in storage/swap_files.py so that opening a log
(storage/log_loader.py) never imports the cleaner package.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from odradek.storage.checkpoint import fsync_dir
from odradek.storage.cleaner.task import CleanedGroup
from odradek.storage.local_log import LocalLog
from odradek.storage.segment import LogSegment
from odradek.storage.swap_files import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    complete_interrupted_swaps,
    rename_order,
    segment_file,
)

__all__ = ["commit_cleaned", "complete_interrupted_swaps", "discard", "swap_in"]

log = logging.getLogger(__name__)

def commit_cleaned(dir: Path, group: CleanedGroup, step_delay_ms: int = 0) -> None:
    """Step 2: ``.cleaned`` -> ``.swap`` (the ``.log`` first), then fsync the dir.
    Touches only files the log does not know yet: safe on any thread."""
    for suffix in rename_order(group.suffixes, log_first=True):
        os.replace(segment_file(dir, group.base_offset, suffix + CLEANED_SUFFIX),
                   segment_file(dir, group.base_offset, suffix + SWAP_SUFFIX))
        if step_delay_ms:
            time.sleep(step_delay_ms / 1000)
    fsync_dir(dir)


def discard(dir: Path, group: CleanedGroup) -> None:
    """Remove a group's ``.cleaned`` and ``.swap`` files, the ``.log.swap`` last."""
    for suffix in rename_order(group.suffixes, log_first=False):
        for tail in (CLEANED_SUFFIX, SWAP_SUFFIX):
            segment_file(dir, group.base_offset, suffix + tail).unlink(missing_ok=True)


def swap_in(
    plog: LocalLog,
    old: list[LogSegment],
    group: CleanedGroup,
    now_ms: int,
    step_delay_ms: int = 0,
) -> LogSegment:
    """Steps 3 and 4 for a decided swap; the caller has checked that ``old`` are
    still the log's segments. Returns the new segment (already in the log)."""
    dir = plog.dir
    for segment in old:
        paths = segment.rename_to_deleted()
        plog.pending_deletes.append((now_ms + plog.config.file_delete_delay_ms, paths))
    if step_delay_ms:
        time.sleep(step_delay_ms / 1000)  # test knob: a crash between steps 3 and 4
    for suffix in rename_order(group.suffixes, log_first=True):
        os.replace(segment_file(dir, group.base_offset, suffix + SWAP_SUFFIX),
                   segment_file(dir, group.base_offset, suffix))
    new = LogSegment.open(
        dir,
        group.base_offset,
        index_interval_bytes=plog.config.index_interval_bytes,
        max_index_bytes=plog.config.segment_index_bytes,
        now_ms=now_ms,
        active=False,
    )
    plog.replace_segments(old, new)
    return new
