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

At load (``complete_interrupted_swaps``, before the segments are listed):

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

``swap_in`` works on a LocalLog (storage/local_log.py, the segment list);
storage/log.py calls ``complete_interrupted_swaps`` when it opens a log.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from odradek.protocol.records import BATCH_OVERHEAD, iter_batch_headers, parse_batch_header
from odradek.storage.checkpoint import fsync_dir
from odradek.storage.cleaner.segment_io import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX
from odradek.storage.cleaner.task import CleanedGroup
from odradek.storage.local_log import LocalLog
from odradek.storage.segment import LogSegment

log = logging.getLogger(__name__)

_SCAN_CHUNK_BYTES = 1024 * 1024
# The plain files a segment may have (".log" last: it names the segment).
SEGMENT_SUFFIXES = (".index", ".timeindex", ".txnindex", LOG_SUFFIX)


def _path(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"


def _ordered(suffixes: tuple[str, ...], log_first: bool) -> list[str]:
    rest = [s for s in suffixes if s != LOG_SUFFIX]
    if LOG_SUFFIX not in suffixes:
        return rest
    return [LOG_SUFFIX, *rest] if log_first else [*rest, LOG_SUFFIX]


def commit_cleaned(dir: Path, group: CleanedGroup, step_delay_ms: int = 0) -> None:
    """Step 2: ``.cleaned`` -> ``.swap`` (the ``.log`` first), then fsync the dir.
    Touches only files the log does not know yet: safe on any thread."""
    for suffix in _ordered(group.suffixes, log_first=True):
        os.replace(_path(dir, group.base_offset, suffix + CLEANED_SUFFIX),
                   _path(dir, group.base_offset, suffix + SWAP_SUFFIX))
        if step_delay_ms:
            time.sleep(step_delay_ms / 1000)
    fsync_dir(dir)


def discard(dir: Path, group: CleanedGroup) -> None:
    """Remove a group's ``.cleaned`` and ``.swap`` files, the ``.log.swap`` last."""
    for suffix in _ordered(group.suffixes, log_first=False):
        for tail in (CLEANED_SUFFIX, SWAP_SUFFIX):
            _path(dir, group.base_offset, suffix + tail).unlink(missing_ok=True)


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
    for suffix in _ordered(group.suffixes, log_first=True):
        os.replace(_path(dir, group.base_offset, suffix + SWAP_SUFFIX),
                   _path(dir, group.base_offset, suffix))
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


# -- load ------------------------------------------------------------------------------------


def _split(name: str) -> tuple[int, str] | None:
    """(base offset, suffix after the base) of a segment file name, else None."""
    stem, dot, suffix = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), "." + suffix


def _next_offset(path: Path) -> int | None:
    """Last offset + 1 of the whole batches in ``path`` (None if it holds none)."""
    next_offset: int | None = None
    size = os.path.getsize(path)
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        position = 0
        while size - position >= BATCH_OVERHEAD:
            chunk = os.pread(fd, min(_SCAN_CHUNK_BYTES, size - position), position)
            consumed = 0
            for header in iter_batch_headers(chunk):
                next_offset = header.next_offset
                consumed = header.position + header.size
            if consumed == 0:
                header = parse_batch_header(chunk)
                if header.batch_length <= 0 or position + header.size > size:
                    break
                next_offset = header.next_offset
                consumed = header.size
            position += consumed
    return next_offset


def complete_interrupted_swaps(dir: Path) -> list[str]:
    """Finish or undo what a crash left of a cleaning in ``dir`` (see the module
    docstring); returns one line per action, for the log."""
    actions: list[str] = []
    names = os.listdir(dir)
    for name in names:
        if name.endswith(CLEANED_SUFFIX) and _split(name) is not None:
            os.unlink(dir / name)
            actions.append(f"removed unfinished {name}")
    swaps: dict[int, list[str]] = {}
    for name in names:
        if not name.endswith(SWAP_SUFFIX):
            continue
        parts = _split(name[: -len(SWAP_SUFFIX)])
        if parts is not None:
            swaps.setdefault(parts[0], []).append(parts[1])
    if not swaps:
        return actions
    plain = [(parts, name) for name in os.listdir(dir)
             if (parts := _split(name)) is not None and parts[1] in SEGMENT_SUFFIXES]
    for base, suffixes in sorted(swaps.items()):
        if LOG_SUFFIX in suffixes:
            next_offset = _next_offset(_path(dir, base, LOG_SUFFIX + SWAP_SUFFIX))
            end = max(next_offset if next_offset is not None else base, base + 1)
            for (other, _suffix), name in plain:
                if base <= other < end and (dir / name).exists():
                    os.unlink(dir / name)
                    actions.append(f"removed {name}, replaced by the cleaned {base:020d}.log")
        for suffix in _ordered(tuple(suffixes), log_first=True):
            os.replace(_path(dir, base, suffix + SWAP_SUFFIX), _path(dir, base, suffix))
            actions.append(f"completed the swap of {base:020d}{suffix}")
    fsync_dir(dir)
    return actions
