"""The two scenarios of the leader-epoch write-up (KIP-101), with real partition
logs and the leader's and follower's own rules (KIP-320 diverging epochs in
Fetch, KIP-279 truncation to the smaller end of the diverging epoch)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from odradek.broker.replica_fetcher import truncate_follower
from odradek.protocol import records as batches
from odradek.replication.follower import diverging_epoch, truncation_offset
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

TOPIC_ID = uuid.UUID(int=7)
MAX_ROUNDS = 10


def _open(path: Path, high_watermark: int | None = None) -> PartitionLog:
    return PartitionLog.open(path, "t", 0, LogConfig(), TOPIC_ID, high_watermark=high_watermark)


def _append_as_leader(plog: PartitionLog, value: bytes, epoch: int) -> None:
    buf = bytearray(batches.build_batch([batches.Record(
        offset=0, timestamp=int(time.time() * 1000), key=None, value=value)]))
    headers = batches.validate_produce_records(buf, len(buf) + 1)
    plog.append_as_leader(buf, headers, epoch)


def _values(plog: PartitionLog) -> list[bytes | None]:
    data = bytes(plog.read(0, 1 << 20, plog.log_end_offset, True).records)
    return [r.value for h in batches.iter_batch_headers(data)
            for r in batches.decode_batch_records(data, h)]


def _replicate(leader: PartitionLog, follower: PartitionLog) -> int:
    """Fetch rounds as the fetcher runs them, until the follower has caught up;
    returns how many rounds answered with a diverging epoch."""
    diverged = 0
    for _ in range(MAX_ROUNDS):
        answer = diverging_epoch(
            leader.leader_epoch_cache, leader.log_start_offset, leader.log_end_offset,
            follower.log_end_offset, follower.leader_epoch_cache.latest_epoch())
        if answer is not None:
            diverged += 1
            truncate_follower(follower, truncation_offset(
                follower.leader_epoch_cache, follower.log_end_offset, *answer))
            continue
        if follower.log_end_offset == leader.log_end_offset:
            return diverged
        data = bytes(leader.read(follower.log_end_offset, 1 << 20, leader.log_end_offset,
                                 True).records)
        follower.append_as_follower(data, list(batches.iter_batch_headers(data)))
    raise AssertionError("the follower did not converge")


def test_follower_keeps_message_b_after_restart_and_leads_with_it(tmp_path: Path) -> None:
    # Scenario 1: the follower has replicated B (offset 1) but not learned that
    # the high watermark moved past it; it restarts, then the leader dies.
    leader = _open(tmp_path / "leader")
    follower = _open(tmp_path / "follower")
    leader.assign_leader_epoch(0)
    _append_as_leader(leader, b"A", 0)
    _append_as_leader(leader, b"B", 0)
    assert _replicate(leader, follower) == 0
    leader.set_high_watermark(2)
    follower.set_high_watermark(1)  # it never heard of the move to 2
    follower.close()
    follower = _open(tmp_path / "follower", high_watermark=1)
    assert follower.log_end_offset == 2, "a restarted follower must not truncate to its HW"
    # it fetches again from the leader: nothing diverges, nothing is cut
    assert _replicate(leader, follower) == 0
    leader.close()  # the leader dies; the follower leads in epoch 1
    follower.assign_leader_epoch(1)
    assert _values(follower) == [b"A", b"B"]
    follower.close()


def test_old_leader_truncates_b_and_copies_c_from_the_new_leader(tmp_path: Path) -> None:
    # Scenario 2: only the leader had B at offset 1; both die; the follower
    # comes back first, leads in epoch 1 and takes C at offset 1; the old
    # leader comes back as a follower.
    old = _open(tmp_path / "old")
    new = _open(tmp_path / "new")
    old.assign_leader_epoch(0)
    _append_as_leader(old, b"A", 0)
    assert _replicate(old, new) == 0
    _append_as_leader(old, b"B", 0)
    old.close()
    new.close()
    new = _open(tmp_path / "new")
    new.assign_leader_epoch(1)
    _append_as_leader(new, b"C", 1)
    old = _open(tmp_path / "old")
    assert _replicate(new, old) == 1
    assert _values(old) == _values(new) == [b"A", b"C"]
    assert old.leader_epoch_cache.entries == new.leader_epoch_cache.entries
    old.close()
    new.close()


def test_a_follower_ahead_in_an_older_epoch_loses_only_the_divergent_suffix(
    tmp_path: Path,
) -> None:
    leader = _open(tmp_path / "leader")
    follower = _open(tmp_path / "follower")
    leader.assign_leader_epoch(0)
    for v in (b"1", b"2", b"3"):
        _append_as_leader(leader, v, 0)
    assert _replicate(leader, follower) == 0
    # the follower leads briefly in epoch 1 and writes two records nobody copies
    follower.assign_leader_epoch(1)
    _append_as_leader(follower, b"x", 1)
    _append_as_leader(follower, b"y", 1)
    # the old leader wins epoch 2 and writes one more
    leader.assign_leader_epoch(2)
    _append_as_leader(leader, b"4", 2)
    assert _replicate(leader, follower) >= 1
    assert _values(follower) == [b"1", b"2", b"3", b"4"]
    leader.close()
    follower.close()


def test_a_leader_that_wrote_nothing_follows_a_new_leader_without_looping(
    tmp_path: Path,
) -> None:
    # Replica 2 led epoch 0 of an empty partition and died; replica 3 leads
    # epoch 1. 2's cache says epoch 0 started at 0, 3 has never seen epoch 0:
    # as Kafka answers, epoch 0 ends where 3's history starts (0), so nothing
    # diverges, and the empty epoch goes when epoch 1 is assigned at 0.
    old = _open(tmp_path / "old")
    new = _open(tmp_path / "new")
    old.assign_leader_epoch(0)
    new.assign_leader_epoch(1)
    assert new.leader_epoch_cache.end_offset_for(0, new.log_end_offset) == (0, 0)
    assert _replicate(new, old) == 0
    _append_as_leader(new, b"after", 1)
    assert _replicate(new, old) == 0
    assert _values(old) == [b"after"]
    assert old.leader_epoch_cache.entries == new.leader_epoch_cache.entries
    old.close()
    new.close()


def test_a_follower_whose_only_epoch_the_leader_never_saw_cuts_back_to_the_leaders_history(
    tmp_path: Path,
) -> None:
    # Found by the replication simulator (a livelock): the follower holds
    # offsets 0-1 written in epoch 1 by a leader nobody followed; the leader
    # holds other records at 0-1 from epoch 0 and more from epoch 2. The leader
    # answers that epoch 0 ends at 2; the follower, which never saw epoch 0,
    # must learn from its own cache that epoch 0 ends where its history starts
    # (0) and cut there, not at 2 again and again.
    leader = _open(tmp_path / "leader")
    follower = _open(tmp_path / "follower")
    leader.assign_leader_epoch(0)
    _append_as_leader(leader, b"a", 0)
    _append_as_leader(leader, b"b", 0)
    _append_as_leader(leader, b"c", 2)
    follower.assign_leader_epoch(1)
    _append_as_leader(follower, b"x", 1)
    _append_as_leader(follower, b"y", 1)
    assert _replicate(leader, follower) == 1
    assert _values(follower) == [b"a", b"b", b"c"]
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    leader.close()
    follower.close()
