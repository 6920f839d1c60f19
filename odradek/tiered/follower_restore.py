"""A follower that falls below its leader's local log start offset builds its state
from the remote tier, as KIP-405 describes, instead of fetching what only the remote
tier holds: the replica fetcher truncates the log fully to the leader's local start
(replica_fetcher.py), then `restore_follower_state` reads the remote segment that
ends just below that offset and restores from it the leader-epoch cache (its
`leader-epoch-checkpoint` object) and, when the segment ends exactly there, the
producer state (its `snapshot` object, the producer snapshot as of that offset). The
fetcher does not fetch the partition until this is done; then it fetches the local
tail from the leader.
"""

from __future__ import annotations

import logging
import os

from ..storage.producer_state import snapshot_file_name
from .metadata_records import TopicIdPartition
from .remote_log_manager import HostedPartition, RemoteLogManager

__all__ = ["parse_checkpoint", "restore_follower_state"]

log = logging.getLogger(__name__)


def parse_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a leader-epoch checkpoint (version, count, rows)."""
    lines = data.decode().split("\n")
    out = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) == 2:
            out.append((int(fields[0]), int(fields[1])))
    return out


async def restore_follower_state(rlm: RemoteLogManager, part: HostedPartition,
                                 start: int) -> bool:
    """Restore epochs and producer state of a follower log that starts empty at
    `start`; False when the remote tier has no segment ending below `start` or the
    log changed meanwhile."""
    tip = TopicIdPartition(part.topic_id, part.topic, part.partition)
    segments, _ = await rlm.run_io(rlm.expirer, rlm.rsm.scan, tip)
    below = [m for m in segments if m.start_offset <= start - 1 <= m.end_offset]
    if not below:
        return False
    meta = below[-1]
    checkpoint = await rlm.run_io(rlm.reader, rlm.rsm.fetch, meta, "leader-epoch-checkpoint")
    snapshot = b""
    if meta.end_offset + 1 == start:
        snapshot = await rlm.run_io(rlm.reader, rlm.rsm.fetch, meta, "snapshot")
    plog = part.log
    if plog.log_end_offset != start or plog.log_start_offset != start:
        return False
    entries = parse_checkpoint(checkpoint)
    for epoch, offset in entries:
        plog.leader_epoch_cache.assign(epoch, offset)
    if snapshot:
        path = plog.dir / snapshot_file_name(start)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(snapshot)
        os.replace(tmp, path)
        plog.producer_state.load_snapshot(start)
    log.info("%s: follower state built from remote segment [%d, %d]: %d epoch entries, "
             "producer snapshot %s", tip, meta.start_offset, meta.end_offset, len(entries),
             "loaded" if snapshot else "not available")
    return True
