"""The tiered-storage parts of Fetch and ListOffsets (handlers/fetch.py).

A consumer fetch whose offset is below the local log start offset but in the remote
tier is answered from the remote segment (tiered/remote_reader.py) after the local
reads, in the reader threads and within remote.fetch.max.wait.ms: a timeout answers
the partition with no records (the client asks again), a failed read with
KAFKA_STORAGE_ERROR. Followers never read the remote tier: the replica fetch path
answers OFFSET_OUT_OF_RANGE with the leader's local log start, where they start over
(replica_fetcher.py).

ListOffsets special timestamps (KIP-405, KIP-1005, KIP-1023), each from the version
that introduced it: -2 EARLIEST is the log start offset including the remote tier,
-4 EARLIEST_LOCAL (v8) the local log start offset, -5 LATEST_TIERED (v9) the last
offset copied to the remote tier (-1 when none, or remote storage is off for the
topic), -6 EARLIEST_PENDING_UPLOAD (v11) the first offset not yet copied (-1 when
remote storage is off for the topic).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ...protocol import errors as E
from ...tiered.remote_reader import RemoteReader

log = logging.getLogger(__name__)

EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -4, -5, -6
TIERED_OFFSETS = (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD)
MIN_VERSION = {EARLIEST: 0, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}


@dataclass(frozen=True, slots=True)
class RemoteWanted:
    answer_index: int
    topic: str
    partition: int
    offset: int
    max_bytes: int


async def read_remote(reader: RemoteReader, answers: list[dict[str, Any]],
                      wanted: list[RemoteWanted], read_committed: bool) -> None:
    """Fill the answers of the remote partitions of a fetch, concurrently."""

    async def one(w: RemoteWanted) -> None:
        answer = answers[w.answer_index]
        try:
            got = await reader.read(w.topic, w.partition, w.offset, w.max_bytes,
                                    read_committed)
        except TimeoutError:
            return
        except Exception as e:  # noqa: BLE001 - any store error answers this partition
            log.warning("remote read of %s-%d at %d failed: %s", w.topic, w.partition,
                        w.offset, e)
            answer["error_code"] = E.KAFKA_STORAGE_ERROR
            return
        if got is None:
            return
        answer["records"] = got.records
        if read_committed:
            answer["aborted_transactions"] = [
                {"producer_id": t.producer_id, "first_offset": t.first_offset}
                for t in got.aborted]

    await asyncio.gather(*(one(w) for w in wanted))


def tiered_offset(plog: Any, timestamp: int, version: int,
                  leader_epoch: int) -> tuple[int | None, int]:
    """(offset, leader epoch) for a special timestamp; (None, -1) when the request's
    version is too old for it (UNSUPPORTED_VERSION)."""
    if version < MIN_VERSION[timestamp]:
        return None, -1
    remote = plog.config.remote_storage_enable
    if timestamp == EARLIEST:
        return plog.start_offset_with_remote, leader_epoch
    if timestamp == EARLIEST_LOCAL:
        return plog.log_start_offset, leader_epoch
    if not remote:
        return -1, -1
    highest = plog.highest_remote_offset
    if timestamp == LATEST_TIERED:
        if highest < 0:
            return -1, -1
        return highest, plog.leader_epoch_cache.epoch_for_offset(highest)
    pending = highest + 1 if highest >= 0 else plog.start_offset_with_remote
    return max(pending, plog.log_start_offset), leader_epoch
