"""The durable state of share partitions (KIP-932), one small file each.

Kafka keeps share-partition state in the `__share_group_state` topic through
its share coordinator (ReadShareGroupState/WriteShareGroupState). odradek keeps
it on the partition leader's first log dir instead, under
`<log dir>/share_group_state/` (a directory name the log loader skips: it has
no `-<partition>` suffix). One file per (group, topic id, partition):

    <sha256(group)[:24]>-<topic id hex>-<partition>.json

holding JSON

    {"group": str, "topic_id": str (uuid), "partition": int,
     "start_offset": int (the SPSO), "state_epoch": int,
     "batches": [[first offset, last offset, delivery count, state], ...]}

with state 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED (Kafka's numbers). A write
goes to `<name>.tmp`, is fsynced and renamed over the file, so a kill -9 at any
point leaves the old state or the new one, never a torn one. A write happens
before the acknowledgement that caused it is answered: an acknowledged record
is never delivered again after a restart. The state is not replicated: it
lives on the leader that wrote it (docs/share_groups.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DIR_NAME = "share_group_state"
MAX_FILE_BYTES = 4 << 20  # a bound on what a load reads (a window is <= max.record.locks runs)

Key = tuple[str, uuid.UUID, int]


def file_name(key: Key) -> str:
    group, topic_id, partition = key
    digest = hashlib.sha256(group.encode()).hexdigest()[:24]
    return f"{digest}-{topic_id.hex}-{partition}.json"


class ShareStateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.writes = 0

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

    def write(self, key: Key, start_offset: int, state_epoch: int,
              batches: list[tuple[int, int, int, int]]) -> None:
        group, topic_id, partition = key
        body = json.dumps({
            "group": group, "topic_id": str(topic_id), "partition": partition,
            "start_offset": start_offset, "state_epoch": state_epoch,
            "batches": [list(b) for b in batches],
        }, separators=(",", ":")).encode()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.writes += 1

    def delete(self, key: Key) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            pass

    def stored(self) -> list[Key]:
        """Every stored share partition (DescribeShareGroupOffsets of a group with
        no live member reads them)."""
        out: list[Key] = []
        if not self.directory.is_dir():
            return out
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            if not entry.name.endswith(".json"):
                continue
            parts = entry.name[:-5].split("-")
            if len(parts) != 3:
                continue
            try:
                with open(entry.path, "rb") as f:
                    state = json.loads(f.read(MAX_FILE_BYTES))
                out.append((state["group"], uuid.UUID(state["topic_id"]),
                            int(state["partition"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out
