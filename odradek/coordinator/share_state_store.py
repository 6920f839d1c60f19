"""The files odradek kept share-partition state in before the share
coordinator (KIP-932), read once for migration.

Earlier odradek versions kept each share partition's state on the partition
leader's first log dir, under `<log dir>/share_group_state/` (a directory
name the log loader skips), one file per (group, topic id, partition):

    <sha256(group)[:24]>-<topic id hex>-<partition>.json

holding JSON

    {"group": str, "topic_id": str (uuid), "partition": int,
     "start_offset": int (the SPSO), "state_epoch": int,
     "batches": [[first offset, last offset, delivery count, state], ...]}

with state 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED. The state now lives in
`__share_group_state` (share_coordinator.py). When a share partition is first
served and the coordinator has no state for it, its file (if this node has
one) is written to the coordinator and then deleted
(share_partitions.py). Nothing writes these files any more.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .share_state_records import Key

log = logging.getLogger(__name__)

DIR_NAME = "share_group_state"
MAX_FILE_BYTES = 4 << 20  # a bound on what a load reads (a window is <= max.record.locks runs)

def file_name(key: Key) -> str:
    group, topic_id, partition = key
    digest = hashlib.sha256(group.encode()).hexdigest()[:24]
    return f"{digest}-{topic_id.hex}-{partition}.json"


class ShareStateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, key: Key) -> Path:
        return self.directory / file_name(key)

    def read(self, key: Key) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        if len(raw) > MAX_FILE_BYTES:
            log.warning("share state %s is larger than %d bytes: ignored", path, MAX_FILE_BYTES)
            return None
        try:
            state = json.loads(raw)
        except ValueError:
            log.warning("share state %s does not parse: ignored", path)
            return None
        if not isinstance(state, dict) or state.get("group") != key[0]:
            return None  # a hash collision, or not ours
        return state

    def delete(self, key: Key) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass
