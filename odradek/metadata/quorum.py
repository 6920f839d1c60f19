"""The metadata log on disk and the image it builds; a broker's KRaft observer.

Every node keeps `__cluster_metadata` and an image of it. A controller (one
voter or several) runs `raft_quorum.RaftMetadataQuorum`, a subclass whose
commits go through the Raft core; this class is what they share and, on its
own, the observer a broker-only node runs: `replicate` appends batches
fetched from the active controller (committed there). The interface:

    quorum.load()               -> replays __cluster_metadata-0 into the image
    await quorum.commit(records) -> commits one batch atomically, returns the image
                                   (a controller; an observer never commits)
    quorum.image                -> the latest committed image
    quorum.listeners            -> called with (old_image, new_image, records)

The log lives in `<metadata.log.dir>/__cluster_metadata-0` as ordinary record
batches v2 whose record values are the JSON records of `records.py`. Control
batches (the Raft leader's LeaderChange entry) keep their offsets in the log
and are skipped by the image.

Snapshots (`snapshots.py`): every node writes the committed image as a
`.checkpoint` file once `metadata.log.max.record.bytes.between.snapshots`
bytes of records have been committed since the last one, or
`metadata.log.max.snapshot.interval.ms` has passed with any (checked as
records are committed); the log below the older of the two kept snapshots is
deleted (`raft_log.py`). `load` starts from the newest valid snapshot and
replays the log after it. An observer whose fetch offset fell below the
controller's log start gets the snapshot (FetchSnapshot) and `install_snapshot`s it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol import records as batches
from ..raft.log import OffsetAndEpoch, snapshot_file_name
from ..storage.log import PartitionLog
from ..storage.log_config import LogConfig
from . import image as img
from . import records as R
from . import snapshots as S
from .raft_log import PartitionRaftLog

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
READ_CHUNK_BYTES = 8 * 1024 * 1024

Listener = Callable[[img.MetadataImage, img.MetadataImage, list[R.MetadataRecord]], None]


def decode_batch(data: bytes | bytearray, header: batches.BatchHeader) -> list[R.MetadataRecord]:
    """The metadata records of one batch; none for a control batch."""
    if header.is_control:
        return []
    return [
        R.decode(r.value) for r in batches.decode_batch_records(data, header) if r.value is not None
    ]


@dataclass(frozen=True, slots=True)
class MetadataLogSettings:
    """The metadata log's segments and snapshots (Kafka's keys and defaults)."""

    segment_bytes: int = 1024 * 1024 * 1024  # metadata.log.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # metadata.log.segment.ms
    # metadata.log.max.record.bytes.between.snapshots
    max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    max_snapshot_interval_ms: int = 3600 * 1000  # metadata.log.max.snapshot.interval.ms; 0: off

    @classmethod
    def from_config(cls, config: Any) -> MetadataLogSettings:
        return cls(
            segment_bytes=config.get("metadata.log.segment.bytes"),
            segment_ms=config.get("metadata.log.segment.ms"),
            max_record_bytes_between_snapshots=config.get(
                "metadata.log.max.record.bytes.between.snapshots"
            ),
            max_snapshot_interval_ms=config.get("metadata.log.max.snapshot.interval.ms"),
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetadataLogSettings:
        d = cls()
        return cls(
            *(
                int(props.get(k, v))
                for k, v in (
                    ("metadata.log.segment.bytes", d.segment_bytes),
                    ("metadata.log.segment.ms", d.segment_ms),
                    (
                        "metadata.log.max.record.bytes.between.snapshots",
                        d.max_record_bytes_between_snapshots,
                    ),
                    ("metadata.log.max.snapshot.interval.ms", d.max_snapshot_interval_ms),
                )
            )
        )


class MetadataQuorum:
    def __init__(
        self, metadata_dir: Path, node_id: int, settings: MetadataLogSettings | None = None
    ) -> None:
        self.metadata_dir = metadata_dir
        self.node_id = node_id
        self.settings = settings or MetadataLogSettings()
        self.image = img.MetadataImage()
        self.listeners: list[Listener] = []
        self._log: PartitionLog | None = None
        self._raft_log: PartitionRaftLog | None = None
        # Record bytes committed since the newest snapshot, and when it was taken.
        self._bytes_since_snapshot = 0
        self._snapshot_taken_s = time.monotonic()

    def _open_log(
        self,
    ) -> tuple[PartitionLog, S.MetadataSnapshots, OffsetAndEpoch | None, img.MetadataImage]:
        """Open the log and its snapshots: (log, snapshots, newest valid snapshot
        id, its image). A log that does not reach the snapshot (a crash while
        a fetched snapshot was installed) restarts empty at its end offset."""
        self.metadata_dir.mkdir(parents=True, exist_ok=True)
        settings = self.settings
        config = LogConfig(
            segment_bytes=settings.segment_bytes,
            segment_ms=settings.segment_ms,
            retention_ms=-1,
            file_delete_delay_ms=0,
        )
        path = self.metadata_dir / f"{METADATA_TOPIC}-0"
        plog = PartitionLog.open(path, METADATA_TOPIC, 0, config, METADATA_TOPIC_ID)
        snapshots = S.MetadataSnapshots(path)
        self._log = plog
        self._raft_log = PartitionRaftLog(plog, snapshots)
        newest = snapshots.load_newest()
        if newest is None:
            return plog, snapshots, None, img.MetadataImage()
        snapshot_id, records = newest
        if not plog.log_start_offset <= snapshot_id.offset <= plog.log_end_offset:
            log.warning(
                "metadata log [%d, %d) does not reach snapshot %s: starting it there",
                plog.log_start_offset,
                plog.log_end_offset,
                snapshot_file_name(snapshot_id),
            )
            plog.truncate_fully_and_start_at(snapshot_id.offset)
        return plog, snapshots, snapshot_id, S.image_of(snapshot_id, records)

    def load(self) -> img.MetadataImage:
        started = time.monotonic()
        plog, _, snapshot_id, image = self._open_log()
        count = 0
        offset = plog.log_start_offset if snapshot_id is None else snapshot_id.offset
        end = plog.log_end_offset
        while offset < end:
            info = plog.read(offset, READ_CHUNK_BYTES, end, True)
            data = info.records
            if not data:
                break
            for header in batches.iter_batch_headers(data):
                recs = decode_batch(data, header)
                if recs:
                    image = img.apply(image, recs, header.last_offset)
                count += len(recs)
                self._bytes_since_snapshot += header.size
                offset = header.last_offset + 1
        plog.high_watermark = plog.log_end_offset
        self.image = image
        log.info(
            "metadata log loaded: snapshot %s, then %d records up to offset %d in %.0f ms",
            "none" if snapshot_id is None else snapshot_file_name(snapshot_id),
            count,
            image.offset,
            (time.monotonic() - started) * 1000,
        )
        return image

    # -- snapshots ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        assert self._log is not None, "load() first"
        return self._log.log_start_offset

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        assert self._raft_log is not None, "load() first"
        return self._raft_log.latest_snapshot_id()

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes | None:
        assert self._raft_log is not None, "load() first"
        return self._raft_log.read_snapshot(snapshot_id)

    def _committed(self, batch_bytes: int, end_offset: int) -> None:
        """`batch_bytes` more were committed, up to `end_offset`: snapshot if due."""
        self._bytes_since_snapshot += batch_bytes
        settings = self.settings
        interval_ms = settings.max_snapshot_interval_ms
        due = self._bytes_since_snapshot >= settings.max_record_bytes_between_snapshots or (
            interval_ms > 0
            and self._bytes_since_snapshot > 0
            and (time.monotonic() - self._snapshot_taken_s) * 1000 >= interval_ms
        )
        if due:
            self.snapshot(end_offset)

    def snapshot(self, end_offset: int) -> OffsetAndEpoch | None:
        """Write the image (everything below `end_offset`, committed) as a snapshot."""
        raft_log = self._raft_log
        assert raft_log is not None, "load() first"
        latest = raft_log.latest_snapshot_id()
        if end_offset <= raft_log.log_start_offset or (
            latest is not None and latest.offset >= end_offset
        ):
            return None
        snapshot_id = OffsetAndEpoch(end_offset, raft_log.epoch_at(end_offset - 1))
        started = time.monotonic()
        data = S.encode(self.image, snapshot_id, self._snapshot_controls(end_offset))
        if not self._store_snapshot(snapshot_id, data):
            return None
        self._restart_snapshot_count()
        log.info(
            "metadata snapshot %s written: %d bytes in %.0f ms; log starts at %d",
            snapshot_file_name(snapshot_id),
            len(data),
            (time.monotonic() - started) * 1000,
            raft_log.log_start_offset,
        )
        return snapshot_id

    def _snapshot_controls(self, end_offset: int) -> list[tuple[int, bytes]]:
        """KIP-853 control records a snapshot carries (the Raft quorum's voters)."""
        return []

    def _restart_snapshot_count(self) -> None:
        self._bytes_since_snapshot = 0
        self._snapshot_taken_s = time.monotonic()

    def _store_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> bool:
        assert self._raft_log is not None
        self._raft_log.create_snapshot(snapshot_id, data)
        return True

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> int:
        """An observer's log fell below the controller's log start: replace the
        log by the snapshot fetched from it, rebuild the image, publish. Returns
        the records the snapshot holds."""
        raft_log = self._raft_log
        assert raft_log is not None and self._log is not None, "load() first"
        raft_log.install_snapshot(snapshot_id, data)
        self._log.high_watermark = self._log.log_end_offset
        return self._replace_image(snapshot_id, S.decode(data))

    def _replace_image(self, snapshot_id: OffsetAndEpoch, records: list[R.MetadataRecord]) -> int:
        old = self.image
        self.image = S.image_of(snapshot_id, records)
        self._restart_snapshot_count()
        log.info(
            "metadata snapshot %s installed: %d records",
            snapshot_file_name(snapshot_id),
            len(records),
        )
        for listener in self.listeners:
            listener(old, self.image, records)
        return len(records)

    def append(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        """Commit synchronously: only a lone voter can (`raft_quorum.py`)."""
        raise NotImplementedError("an observer does not commit metadata; the controller does")

    async def commit(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        """Commit one batch: the controller's quorum does (`raft_quorum.py`)."""
        raise NotImplementedError("an observer does not commit metadata; the controller does")

    # -- the observer's side (brokers replicating from the active controller) ----------

    @property
    def log_end_offset(self) -> int:
        assert self._log is not None, "load() first"
        return self._log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        assert self._raft_log is not None, "load() first"
        return self._raft_log.last_fetched_epoch()

    @property
    def high_watermark(self) -> int:
        """The end of what is committed (below it, never truncated)."""
        assert self._log is not None, "load() first"
        return self._log.high_watermark

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Committed batches from `offset` (whole batches, at least one): what a
        metadata Fetch from an observer gets."""
        assert self._log is not None, "load() first"
        end = self._log.high_watermark
        if offset >= end:
            return b""
        return bytes(self._log.read(offset, max(max_bytes, 1), end, True).records)

    def replicate(self, data: bytes) -> int:
        """Append batches fetched from the active controller (already committed
        there), apply them to the image and publish. Returns the records applied."""
        assert self._log is not None, "load() first"
        headers = [
            h for h in batches.iter_batch_headers(data) if h.base_offset >= self._log.log_end_offset
        ]
        if not headers:
            return 0
        for h in headers:
            if not batches.batch_crc_ok(data, h):
                raise ValueError(f"metadata batch at offset {h.base_offset} fails its CRC")
        start = headers[0].position
        end = headers[-1].position + headers[-1].size
        chunk = data[start:end]
        shifted = [h for h in batches.iter_batch_headers(chunk)]
        # Not fsynced (Kafka's KafkaRaftClient flushes a follower's append only
        # on a voter, or a node that may become one): an observer's copy is
        # committed on the controllers already, a torn tail is cut at load
        # (no recovery point: the trailing segments are CRC-checked) and
        # fetched again. A rolled segment is still flushed (local_log.roll).
        self._log.append_as_follower(chunk, shifted)
        self._log.high_watermark = self._log.log_end_offset
        count = 0
        for h in shifted:
            recs = decode_batch(chunk, h)
            if not recs:
                continue
            old = self.image
            self.image = img.apply(old, recs, h.last_offset)
            count += len(recs)
            for listener in self.listeners:
                listener(old, self.image, recs)
        self._committed(len(chunk), self._log.log_end_offset)
        return count

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
            self._raft_log = None
