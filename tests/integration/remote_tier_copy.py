"""Play the tiered-storage copier's part by hand: copy a broker's closed local
segments into a remote tier (any fsspec filesystem) in issue 14's layout, with
the `.metadata` visibility marker last (as tiered/storage_manager.py does), so
that the same offsets can be read from the broker and from the remote tier."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

from odradek.tiered.metadata_records import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    b64_to_uuid,
    encode_value,
    uuid_to_b64,
)


def copy_closed_segments(data_dir: Path, topic: str, topic_id: str, partitions: int,
                         fs: Any, root: str, orphan: bool = False) -> int:
    """Every closed segment (all but the active one) of each partition of `topic`
    under `root` (a path of `fs`). With `orphan`, also a `.log` without a marker
    (a copy cut short, which readers must ignore). Returns how many were copied."""
    copied = 0
    for p in range(partitions):
        pdir = data_dir / f"{topic}-{p}"
        bases = sorted(int(f.stem) for f in pdir.glob("*.log"))
        for base, next_base in itertools.pairwise(bases):  # the last one is active
            seg_id = uuid.uuid4()
            stem = f"{root}/{topic}-{topic_id}/{p}/{base:020d}-{uuid_to_b64(seg_id)}"
            for suffix in ("index", "timeindex", "txnindex", "log"):
                src = pdir / f"{base:020d}.{suffix}"
                fs.pipe(f"{stem}.{suffix}", src.read_bytes() if src.exists() else b"")
            snap = pdir / f"{next_base:020d}.snapshot"  # producer state at the roll
            fs.pipe(f"{stem}.snapshot", snap.read_bytes() if snap.exists() else b"")
            meta = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(TopicIdPartition(b64_to_uuid(topic_id), topic, p), seg_id),
                base, next_base - 1, 0, 0, 0, {0: base},
                (pdir / f"{base:020d}.log").stat().st_size,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
            fs.pipe(f"{stem}.metadata", encode_value(meta))  # the visibility marker, last
            copied += 1
        if orphan and bases:
            cut = f"{root}/{topic}-{topic_id}/{p}/{bases[-1]:020d}-{uuid_to_b64(uuid.uuid4())}"
            fs.pipe(f"{cut}.log", b"garbage")
    return copied
