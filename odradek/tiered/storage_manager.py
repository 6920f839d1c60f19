"""The remote storage manager: segments in any fsspec filesystem.

Layout (a contract: readers outside the broker, e.g. Spark, read it directly):

    <url>/<topic>-<topicIdBase64Url>/<partition>/<baseOffset:020d>-<segmentIdBase64Url>.<suffix>

with suffixes `index`, `timeindex`, `txnindex`, `snapshot` (producer snapshot),
`leader-epoch-checkpoint`, `log` (byte-identical to the local segment file, Kafka's
on-disk format) and, last, `metadata`: the `__remote_log_metadata` record value of the
segment in state COPY_SEGMENT_FINISHED (metadata_records.encode_value). A segment is
visible only once its `metadata` object exists, and the `.log` is uploaded
last-but-one, so a copy cut short (crash, store outage) is never visible; it leaves
an orphan that the next leader removes (`orphans`, `delete_segment`) before copying
the segment again under a fresh segment id. Deletion removes `metadata` first.

Beside the segments, `<url>/<topic>-<topicIdBase64Url>/<partition>/log-start-offset`
holds, in ASCII decimal, the partition's log start offset set by DeleteRecords (absent:
none). Offsets below it are deleted even while a remote segment still holds them
(the segment is removed once wholly below it): readers start at
max(first segment's start, this offset).

Every method blocks (fsspec I/O): the RemoteLogManager calls them in executor threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import fsspec

from .metadata_records import (
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    decode_value,
    encode_value,
    uuid_to_b64,
)

__all__ = ["SUFFIXES", "LocalSegmentFiles", "RateLimiter", "RemoteStorageManager"]

log = logging.getLogger(__name__)

SUFFIXES = ("index", "timeindex", "txnindex", "snapshot", "leader-epoch-checkpoint", "log")
MARKER = "metadata"
START_OFFSET_OBJECT = "log-start-offset"
CHUNK = 1 << 20


class RateLimiter:
    """Bytes per second over all threads sharing it (a token bucket of one second)."""

    def __init__(self, bytes_per_second: int) -> None:
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._allowance = float(bytes_per_second)
        self._last = time.monotonic()
        self._closed = threading.Event()

    def close(self) -> None:
        """Wakes every thread waiting for the allowance, now and later: a stopping
        broker's copier and reader threads must not sleep out a throttle (the
        interpreter joins them at exit)."""
        self._closed.set()

    def acquire(self, n: int) -> None:
        if self.rate >= 2**62:
            return
        with self._lock:
            now = time.monotonic()
            self._allowance = min(float(self.rate),
                                  self._allowance + (now - self._last) * self.rate)
            self._last = now
            self._allowance -= n
            wait = -self._allowance / self.rate if self._allowance < 0 else 0.0
        if wait > 0:
            self._closed.wait(wait)


@dataclass(frozen=True, slots=True)
class LocalSegmentFiles:
    """What one copy uploads: paths of the segment's files (a missing txnindex or
    snapshot uploads as an empty object) and the leader-epoch checkpoint slice."""

    log: str
    index: str
    timeindex: str
    txnindex: str
    snapshot: str | None
    leader_epoch_checkpoint: bytes


class RemoteStorageManager:
    def __init__(self, url: str, fs_options: dict[str, Any] | None = None,
                 copy_bytes_per_second: int = 2**63 - 1,
                 fetch_bytes_per_second: int = 2**63 - 1) -> None:
        self.url = url.rstrip("/")
        self.fs, root = fsspec.core.url_to_fs(self.url, **(fs_options or {}))
        self.root = str(root).rstrip("/")
        self.copy_limit = RateLimiter(copy_bytes_per_second)
        self.fetch_limit = RateLimiter(fetch_bytes_per_second)
        self.bytes_copied = 0
        self.bytes_fetched = 0
        # decoded markers by path, per partition dir: a marker never changes (its path
        # names the segment id), so a listing GETs only the markers it has not seen
        self._markers: dict[str, dict[str, RemoteLogSegmentMetadata]] = {}
        self._markers_lock = threading.Lock()

    # -- paths ---------------------------------------------------------------------------
    def topic_dir(self, tip: TopicIdPartition) -> str:
        return f"{self.root}/{tip.name}-{uuid_to_b64(tip.topic_id)}"

    def partition_dir(self, tip: TopicIdPartition) -> str:
        return f"{self.topic_dir(tip)}/{tip.partition}"

    def object_path(self, meta: RemoteLogSegmentMetadata, suffix: str) -> str:
        seg = meta.segment_id
        return (f"{self.partition_dir(seg.topic_id_partition)}/{meta.start_offset:020d}-"
                f"{uuid_to_b64(seg.id)}.{suffix}")

    # -- copy ----------------------------------------------------------------------------
    def _upload(self, local: str | None, remote: str) -> int:
        written = 0
        with self.fs.open(remote, "wb") as out:
            if local is not None:
                try:
                    src = open(local, "rb")  # noqa: SIM115 - closed below
                except FileNotFoundError:
                    return 0
                with src:
                    while chunk := src.read(CHUNK):
                        self.copy_limit.acquire(len(chunk))
                        out.write(chunk)
                        written += len(chunk)
        return written

    def copy_segment(self, meta: RemoteLogSegmentMetadata, files: LocalSegmentFiles) -> int:
        """Upload every part, the `.log` last but one, then the visibility marker
        (`meta` must be in its COPY_SEGMENT_FINISHED form). Returns bytes uploaded."""
        self.fs.makedirs(self.partition_dir(meta.segment_id.topic_id_partition),
                         exist_ok=True)
        total = 0
        for suffix, local in (("index", files.index), ("timeindex", files.timeindex),
                              ("txnindex", files.txnindex), ("snapshot", files.snapshot)):
            total += self._upload(local, self.object_path(meta, suffix))
        self.fs.pipe_file(self.object_path(meta, "leader-epoch-checkpoint"),
                          files.leader_epoch_checkpoint)
        total += self._upload(files.log, self.object_path(meta, "log"))
        # every part still there (a new leader may have removed a copy it took for an
        # orphan while this one was under way): only then the marker
        missing = [s for s in SUFFIXES if not self.fs.exists(self.object_path(meta, s))]
        if missing:
            raise FileNotFoundError(f"parts {missing} of {self.object_path(meta, 'log')} "
                                    "vanished during the copy")
        self._put_atomically(self.object_path(meta, MARKER), encode_value(meta))
        self.bytes_copied += total
        return total

    def _put_atomically(self, path: str, data: bytes) -> None:
        """An object store's PUT is atomic; a file system's write is not, so there the
        marker is written beside and renamed into place."""
        if "file" not in _protocols(self.fs):
            self.fs.pipe_file(path, data)
            return
        tmp = path + ".tmp"
        self.fs.pipe_file(tmp, data)
        self.fs.mv(tmp, path)

    # -- reads ---------------------------------------------------------------------------
    def fetch(self, meta: RemoteLogSegmentMetadata, suffix: str, start: int = 0,
              end: int | None = None) -> bytes:
        """An object (or its bytes [start, end)), throttled by the fetch rate."""
        path = self.object_path(meta, suffix)
        if end is not None and end <= start:
            return b""
        # a whole object is read without a Range (S3 answers 416 to "bytes=0-" on an
        # empty object, e.g. the offset index of a small segment)
        data = bytes(self.fs.cat_file(path) if start == 0 and end is None
                     else self.fs.cat_file(path, start=start, end=end))
        self.fetch_limit.acquire(len(data))
        self.bytes_fetched += len(data)
        return data

    def list_segments(self, tip: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """The visible (fully copied) segments of a partition, by start offset."""
        return self.scan(tip)[0]

    def orphans(self, tip: TopicIdPartition) -> list[str]:
        """Object paths of copies cut short: no readable `metadata` marker beside them."""
        return self.scan(tip)[1]

    def scan(self, tip: TopicIdPartition) -> tuple[list[RemoteLogSegmentMetadata], list[str]]:
        """(visible segments by start offset, orphan object paths): one listing, and a
        GET of each marker not seen in an earlier scan."""
        pdir = self.partition_dir(tip)
        names = self._list(pdir)
        with self._markers_lock:
            known = dict(self._markers.get(pdir, {}))
        seen: dict[str, RemoteLogSegmentMetadata] = {}
        segments, marked = [], set()
        parts: dict[str, set[str]] = {}
        for path in names:
            stem, _, suffix = path.rsplit("/", 1)[-1].partition(".")
            parts.setdefault(stem, set()).add(suffix)
        for path in names:
            if path.endswith("." + MARKER):
                missing = [s for s in SUFFIXES if s not in parts.get(_stem(path), ())]
                if missing:
                    # a marker whose parts are gone: a fenced leader's copy finishing
                    # after its successor removed the parts it saw without a marker.
                    # Never visible; a leader removes it with the orphans.
                    log.warning("%s: marker without its %s object(s): not visible, "
                                "removed as a copy cut short", path, ", ".join(missing))
                    continue
                rec = known.get(path)
                if rec is None:
                    try:
                        got = decode_value(bytes(self.fs.cat_file(path)))
                    except FileNotFoundError:
                        continue  # deleted since the listing
                    except ValueError as e:
                        log.warning("%s: unreadable marker, treated as a copy cut short: %s",
                                    path, e)
                        continue
                    if not isinstance(got, RemoteLogSegmentMetadata):
                        continue
                    rec = got
                seen[path] = rec
                segments.append(rec)
                marked.add(_stem(path))
        with self._markers_lock:
            self._markers[pdir] = seen
        orphans = [p for p in names
                   if (_stem(p) not in marked and not p.endswith("/" + START_OFFSET_OBJECT))
                   or p.endswith(".tmp")]
        return sorted(segments, key=lambda m: m.start_offset), orphans

    def _list(self, path: str) -> list[str]:
        try:
            return [str(p) for p in self.fs.ls(path, detail=False, refresh=True)]
        except FileNotFoundError:
            return []
        except TypeError:  # filesystems without the refresh argument
            return [str(p) for p in self.fs.ls(path, detail=False)]

    # -- the DeleteRecords start offset ------------------------------------------------------
    def read_start_offset(self, tip: TopicIdPartition) -> int:
        """The partition's stored DeleteRecords log start offset (-1: none)."""
        try:
            return int(bytes(self.fs.cat_file(
                f"{self.partition_dir(tip)}/{START_OFFSET_OBJECT}")).decode().strip())
        except FileNotFoundError:
            return -1
        except ValueError as e:
            log.warning("%s: unreadable %s, ignored: %s", tip, START_OFFSET_OBJECT, e)
            return -1

    def write_start_offset(self, tip: TopicIdPartition, offset: int) -> None:
        self.fs.makedirs(self.partition_dir(tip), exist_ok=True)
        self._put_atomically(f"{self.partition_dir(tip)}/{START_OFFSET_OBJECT}",
                             str(offset).encode())

    # -- deletion ------------------------------------------------------------------------
    def delete_segment(self, meta: RemoteLogSegmentMetadata) -> None:
        """Remove the marker first (the segment stops being visible), then the rest."""
        self._remove([self.object_path(meta, MARKER)])
        self._remove([self.object_path(meta, s) for s in SUFFIXES])

    def delete_paths(self, paths: Iterable[str]) -> None:
        self._remove(list(paths))

    def _remove(self, paths: list[str]) -> None:
        for path in paths:
            try:
                self.fs.rm_file(path)
            except FileNotFoundError:
                pass

    def delete_partition(self, tip: TopicIdPartition) -> None:
        """Everything of a partition (topic deletion, remote storage disabled); the
        topic's directory goes too once no partition is left in it."""
        with self._markers_lock:
            self._markers.pop(self.partition_dir(tip), None)
        for path in self._list(self.partition_dir(tip)):
            if path.endswith("." + MARKER):
                self._remove([path])
        try:
            self.fs.rm(self.partition_dir(tip), recursive=True)
        except FileNotFoundError:
            pass
        if not self._list(self.topic_dir(tip)):
            try:
                self.fs.rm(self.topic_dir(tip), recursive=True)
            except (FileNotFoundError, OSError):
                pass


def _stem(path: str) -> str:
    """`<baseOffset>-<segmentId>` of an object path (segment ids hold no dot)."""
    return path.rsplit("/", 1)[-1].split(".", 1)[0]


def _protocols(fs: Any) -> tuple[str, ...]:
    p = fs.protocol
    return (p,) if isinstance(p, str) else tuple(p)
