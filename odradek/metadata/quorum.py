"""The metadata quorum shell: the metadata log on disk and the image it builds.

A single node is a one-voter quorum: an append is committed as soon as it is
durable on the voter's disk (written and fsynced), then applied to the image
and published to listeners. With several voters `raft_quorum.py` replaces it
(the Raft core replicates to a majority); the interface stays:

    quorum.load()               -> replays __cluster_metadata-0 into the image
    await quorum.commit(records) -> commits one batch atomically, returns the image
    quorum.append(records)      -> the same, synchronously (one voter only)
    quorum.image                -> the latest committed image
    quorum.listeners            -> called with (old_image, new_image, records)

A broker-only node uses this class as a KRaft observer: `replicate` appends
batches fetched from the active controller (committed there).

The log lives in `<metadata.log.dir>/__cluster_metadata-0` as ordinary record
batches v2 whose record values are the JSON records of `records.py`. Control
batches (the Raft leader's LeaderChange entry) keep their offsets in the log
and are skipped by the image.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ..protocol import records as batches
from ..storage.log import PartitionLog
from ..storage.log_config import LogConfig
from . import image as img
from . import records as R

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


class MetadataQuorum:
    def __init__(self, metadata_dir: Path, node_id: int) -> None:
        self.metadata_dir = metadata_dir
        self.node_id = node_id
        self.leader_epoch = 0
        self.image = img.MetadataImage()
        self.listeners: list[Listener] = []
        self._log: PartitionLog | None = None

    def load(self) -> img.MetadataImage:
        self.metadata_dir.mkdir(parents=True, exist_ok=True)
        config = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1)
        self._log = PartitionLog.open(
            self.metadata_dir / f"{METADATA_TOPIC}-0", METADATA_TOPIC, 0, config, METADATA_TOPIC_ID
        )
        started = time.monotonic()
        image = img.MetadataImage()
        count = 0
        offset = self._log.log_start_offset
        end = self._log.log_end_offset
        while offset < end:
            info = self._log.read(offset, READ_CHUNK_BYTES, end, True)
            data = info.records
            if not data:
                break
            for header in batches.iter_batch_headers(data):
                recs = decode_batch(data, header)
                if recs:
                    image = img.apply(image, recs, header.last_offset)
                count += len(recs)
                offset = header.last_offset + 1
        self._log.high_watermark = self._log.log_end_offset
        self.image = image
        log.info(
            "metadata log loaded: %d records up to offset %d in %.0f ms",
            count,
            image.offset,
            (time.monotonic() - started) * 1000,
        )
        return image

    def append(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        if not records:
            return self.image
        assert self._log is not None, "load() first"
        now_ms = int(time.time() * 1000)
        batch = bytearray(
            batches.build_batch(
                [
                    batches.Record(offset=i, timestamp=now_ms, key=None, value=R.encode(r))
                    for i, r in enumerate(records)
                ]
            )
        )
        headers = batches.validate_produce_records(batch, len(batch) + 1)
        info = self._log.append_as_leader(batch, headers, self.leader_epoch)
        self._log.flush()
        self._log.high_watermark = self._log.log_end_offset
        old = self.image
        self.image = img.apply(old, records, info.last_offset)
        for listener in self.listeners:
            listener(old, self.image, records)
        return self.image

    async def commit(self, records: list[R.MetadataRecord]) -> img.MetadataImage:
        """Commit one batch; with one voter that is `append`, done at once."""
        return self.append(records)

    # -- the observer's side (brokers replicating from the active controller) ----------

    @property
    def log_end_offset(self) -> int:
        assert self._log is not None, "load() first"
        return self._log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        assert self._log is not None, "load() first"
        return self._log.leader_epoch_cache.latest_epoch()

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
        self._log.append_as_follower(chunk, shifted)
        self._log.flush()
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
        return count

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
