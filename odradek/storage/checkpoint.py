"""Kafka's text checkpoint files, read and written atomically.

File format (ASCII, ``\\n`` line ends)
-------------------------------------
::

    0                         line 1: format version (always 0)
    3                         line 2: number of entry lines that follow
    orders 0 1234             entries: "<topic> <partition> <offset>"
    orders 1 99
    __consumer_offsets 7 5

This is the layout of ``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``cleaner-offset-checkpoint`` in every log dir; ``leader-epoch-checkpoint``
uses the same framing with "<epoch> <start offset>" entries, which the generic
``read_checkpoint_lines`` / ``write_checkpoint_lines`` serve.

Writes go to ``<name>.tmp``, are fsynced, renamed over the file, and the
directory is fsynced, so a crash leaves either the old or the new file.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHECKPOINT_VERSION = 0
# A checkpoint lists at most one line per partition in a log dir; anything
# larger than this is a corrupt file, not a big broker.
MAX_CHECKPOINT_ENTRIES = 10_000_000


class CorruptCheckpoint(ValueError):
    """The file does not follow the checkpoint format."""


_WRITE_LOCK = threading.Lock()
# threads that fsync the files of one `write_checkpoints` call together
_SYNC_THREADS = 16


def write_checkpoint_lines(path: Path, lines: list[str], version: int = CHECKPOINT_VERSION) -> None:
    """Atomically replace ``path`` with version, count and ``lines``."""
    path = Path(path)
    body = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    tmp = path.with_name(path.name + ".tmp")
    # Two writers of one file (a periodic task in a worker thread and the
    # shutdown on the event loop) would share the .tmp file: one's rename
    # would find it gone. Checkpoint writes are rare and small: one at a time.
    with _WRITE_LOCK:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            fsync(f.fileno())
        os.replace(tmp, path)
    fsync_dir(path.parent)


def write_checkpoints(files: list[tuple[Path, list[str]]],
                      version: int = CHECKPOINT_VERSION) -> dict[Path, OSError]:
    """`write_checkpoint_lines` of many files at once, each as atomic and as
    durable as alone, but their fsyncs issued together from a few threads (the
    file system commits them in a few journal commits, not one per file): the
    caller waits about one file's write, not the sum. Returns the files that
    failed, with their error; the others are written."""
    failed: dict[Path, OSError] = {}
    if len(files) <= 1:
        for path, lines in files:
            try:
                write_checkpoint_lines(path, lines, version)
            except OSError as e:
                failed[Path(path)] = e
        return failed
    sync = not _deferring()  # a thread-local: the workers ask the caller's

    def stage(item: tuple[Path, list[str]]) -> OSError | None:
        path, lines = item
        body = f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        try:
            with open(path.with_name(path.name + ".tmp"), "w", encoding="utf-8") as f:
                f.write(body)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
        except OSError as e:
            return e
        return None

    def sync_dir(dir: Path) -> OSError | None:
        try:
            fd = os.open(dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            return e
        return None

    items = [(Path(path), lines) for path, lines in files]
    with _WRITE_LOCK, ThreadPoolExecutor(min(len(items), _SYNC_THREADS)) as pool:
        renamed: list[Path] = []
        for (path, _), error in zip(items, pool.map(stage, items)):
            if error is None:
                try:
                    os.replace(path.with_name(path.name + ".tmp"), path)
                    renamed.append(path)
                    continue
                except OSError as e:
                    error = e
            failed[path] = error
        if sync:
            dirs = sorted({p.parent for p in renamed})
            for dir, error in zip(dirs, pool.map(sync_dir, dirs)):
                if error is not None:
                    failed.update({p: error for p in renamed if p.parent == dir})
    return failed


def read_checkpoint_lines(path: Path, version: int = CHECKPOINT_VERSION) -> list[str] | None:
    """The entry lines of ``path``, or None if it does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpoint(f"{path}: missing version or count line")
    try:
        found_version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"{path}: malformed version or count line") from None
    if found_version != version:
        raise CorruptCheckpoint(f"{path}: unsupported checkpoint version {found_version}")
    if not 0 <= count <= MAX_CHECKPOINT_ENTRIES or count != len(lines) - 2:
        raise CorruptCheckpoint(f"{path}: expected {count} entries, found {len(lines) - 2}")
    return lines[2:]


def fsync_dir(dir: Path) -> None:
    if _deferring():
        return
    fd = os.open(dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Many new files at once (storage/new_logs.py): the fsyncs the checkpoint and
# metadata writes of this thread would make are skipped inside `deferred_sync`,
# and the caller syncs the whole filesystem once after (`syncfs`).
_deferred = threading.local()


def _deferring() -> bool:
    return bool(getattr(_deferred, "on", False))


@contextlib.contextmanager
def deferred_sync() -> Iterator[None]:
    _deferred.on = True
    try:
        yield
    finally:
        _deferred.on = False


def fsync(fd: int) -> None:
    """os.fsync, unless this thread is inside `deferred_sync`."""
    if not _deferring():
        os.fsync(fd)


def syncfs(dir: Path) -> None:
    """Flush everything written to ``dir``'s filesystem (Linux syncfs(2); else sync)."""
    fd = os.open(dir, os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(dir))
    except AttributeError:  # no syncfs in this libc
        os.sync()
    finally:
        os.close(fd)


class OffsetCheckpointFile:
    """A ``<topic> <partition> <offset>`` checkpoint file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = []
        for (topic, partition), offset in sorted(offsets.items()):
            if not topic or any(c.isspace() for c in topic):
                raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint")
            lines.append(f"{topic} {partition} {offset}")
        write_checkpoint_lines(self.path, lines)

    def read(self) -> dict[tuple[str, int], int]:
        """Entries by (topic, partition); {} if the file does not exist."""
        lines = read_checkpoint_lines(self.path)
        if lines is None:
            return {}
        offsets: dict[tuple[str, int], int] = {}
        for line in lines:
            fields = line.split()
            if len(fields) != 3:
                raise CorruptCheckpoint(f"{self.path}: malformed entry {line!r}")
            try:
                offsets[(fields[0], int(fields[1]))] = int(fields[2])
            except ValueError:
                raise CorruptCheckpoint(f"{self.path}: malformed entry {line!r}") from None
        return offsets
