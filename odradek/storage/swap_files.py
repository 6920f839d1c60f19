"""The file names of a segment swap, and finishing an interrupted swap at load.

The log cleaner (storage/cleaner/swap.py, where the whole file protocol is
written out) writes a cleaned group of segments as ``B.<suffix>.cleaned``,
renames them ``.swap`` once decided, and then to their plain names.
``complete_interrupted_swaps`` is what a crash in between leaves to the next
start: called by the log loader (Kafka's ``LogLoader`` does the same) before it
lists a directory's segments,

* every ``*.cleaned`` file is removed: the swap was never decided and the old
  segments are whole;
* for every ``B.log.swap``: N = its next offset (a header scan); every plain
  segment file whose base offset lies in ``[B, max(N, B + 1))`` is removed (the
  segments it replaces, and B's own old files, so no old index is ever paired
  with the new log), then B's ``.swap`` files take their plain names;
* any other ``B.<index>.swap`` (a crash within the last step, after the
  ``.log`` was renamed; B's old files were ``.deleted`` by then) takes its plain
  name.

Kept in storage/ rather than storage/cleaner/ so that opening a log needs
nothing of the cleaner; the cleaner imports this module. Imports
protocol.records (batch headers), storage.checkpoint and storage.segment.
"""

from __future__ import annotations

import os
from pathlib import Path

from odradek.protocol.records import BATCH_OVERHEAD, iter_batch_headers, parse_batch_header
from odradek.storage.checkpoint import fsync_dir
from odradek.storage.segment import LOG_SUFFIX

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SCAN_CHUNK_BYTES = 1024 * 1024
# The plain files a segment may have (".log" last: it names the segment).
SEGMENT_SUFFIXES = (".index", ".timeindex", ".txnindex", LOG_SUFFIX)


def segment_file(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"


def rename_order(suffixes: tuple[str, ...], log_first: bool) -> list[str]:
    rest = [s for s in suffixes if s != LOG_SUFFIX]
    if LOG_SUFFIX not in suffixes:
        return rest
    return [LOG_SUFFIX, *rest] if log_first else [*rest, LOG_SUFFIX]


# -- at load ------------------------------------------------------------------------------------


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
            next_offset = _next_offset(segment_file(dir, base, LOG_SUFFIX + SWAP_SUFFIX))
            end = max(next_offset if next_offset is not None else base, base + 1)
            for (other, _suffix), name in plain:
                if base <= other < end and (dir / name).exists():
                    os.unlink(dir / name)
                    actions.append(f"removed {name}, replaced by the cleaned {base:020d}.log")
        for suffix in rename_order(tuple(suffixes), log_first=True):
            os.replace(segment_file(dir, base, suffix + SWAP_SUFFIX), segment_file(dir, base, suffix))
            actions.append(f"completed the swap of {base:020d}{suffix}")
    fsync_dir(dir)
    return actions
