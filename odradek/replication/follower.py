"""Log reconciliation between a follower and its leader (KIP-101, KIP-279, KIP-320).

Theory of operation
-------------------
A follower fetches with its log end offset and the latest epoch in its epoch
cache (`last_fetched_epoch`). The leader checks that pair against its own
epoch cache (`diverging_epoch`): if its copy of that epoch ends before the
fetch offset, or it knows only an older epoch, the logs diverge and the answer
names the largest epoch the leader knows at or below the follower's and where
that epoch ends in the leader's log. The follower then cuts its log
(`truncation_offset`) at the smaller of the leader's end of that epoch and its
own end of it: only what diverges goes, never down to the high watermark
blindly, and the fetch starts over from there until the two agree.

The follower's high watermark is the leader's, capped at its own log end
offset, and never moves back (`follower_high_watermark`).
"""

from __future__ import annotations

from ..storage.leader_epoch import UNDEFINED_EPOCH, LeaderEpochCache


def diverging_epoch(
    cache: LeaderEpochCache, log_start_offset: int, log_end_offset: int,
    fetch_offset: int, last_fetched_epoch: int,
) -> tuple[int, int] | None:
    """On the leader: None when the follower's log agrees with ours up to
    `fetch_offset`, else (the largest epoch <= its last fetched epoch that we
    know, where that epoch ends in our log)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = cache.end_offset_for(last_fetched_epoch, log_end_offset)
    if epoch < 0:
        # We know no epoch at or before the follower's: its epochs are not in
        # our history, which starts with our earliest epoch (Kafka answers
        # OFFSET_OUT_OF_RANGE and the follower looks for the same offset).
        first = cache.earliest_entry()
        return UNDEFINED_EPOCH, first[1] if first is not None else log_start_offset
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


def truncation_offset(
    cache: LeaderEpochCache, log_end_offset: int, epoch: int, end_offset: int
) -> int:
    """On the follower, after the leader answered that `epoch` ends at
    `end_offset` in its log: where to cut. The smaller of the leader's end of
    that epoch and our own end of it (the largest epoch we know <= it); never
    below it, never above our log end."""
    local_epoch, local_end = cache.end_offset_for(epoch, log_end_offset)
    target = end_offset if local_epoch < 0 else min(end_offset, local_end)
    return max(min(target, log_end_offset), 0)


def follower_high_watermark(leader_high_watermark: int, log_end_offset: int,
                            current: int) -> int:
    """The follower's high watermark after a fetch answer: the leader's, capped
    at what this follower holds, never lower than it was."""
    if leader_high_watermark < 0:
        return current
    return max(min(leader_high_watermark, log_end_offset), current)
