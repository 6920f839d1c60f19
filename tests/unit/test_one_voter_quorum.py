"""A single node is a one-voter quorum through the Raft core (issue 7).

The lone voter elects itself when it starts, commits inside `append`, keeps
`quorum-state` as a voter among several does, and loads a metadata log written
before single nodes ran the Raft core (leader epoch 0, no LeaderChange
entries, no quorum-state file).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from odradek.metadata import records as R
from odradek.metadata.quorum import METADATA_TOPIC, METADATA_TOPIC_ID, MetadataQuorum
from odradek.metadata.raft_quorum import NotControllerError, RaftMetadataQuorum
from odradek.protocol import records as batches
from odradek.raft.config import RaftConfig, VoterSet
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig


def _topic(i: int) -> list[R.MetadataRecord]:
    tid = str(uuid.UUID(int=i + 1))
    return [R.topic_record(f"topic-{i}", tid), R.partition_record(tid, 0, [1], 1)]


def _write_pre_raft_log(metadata_dir: Path, count: int) -> None:
    """What the single-voter path before the Raft core wrote: one batch per
    commit, leader epoch 0, flushed; no control batches, no quorum-state."""
    config = LogConfig(retention_ms=-1, file_delete_delay_ms=0)
    plog = PartitionLog.open(metadata_dir / f"{METADATA_TOPIC}-0", METADATA_TOPIC, 0, config,
                             METADATA_TOPIC_ID)
    for i in range(count):
        batch = bytearray(batches.build_batch([
            batches.Record(offset=j, timestamp=int(time.time() * 1000), key=None,
                           value=R.encode(r))
            for j, r in enumerate(_topic(i))
        ]))
        headers = batches.validate_produce_records(batch, len(batch) + 1)
        plog.append_as_leader(batch, headers, 0)
        plog.flush()
    plog.close()


def _lone_voter(metadata_dir: Path) -> RaftMetadataQuorum:
    return RaftMetadataQuorum(metadata_dir, 1, RaftConfig(voters=VoterSet.of(1)), "cluster")


def _start_core(quorum: RaftMetadataQuorum) -> None:
    """`start` without the ticker task (which needs an event loop)."""
    assert quorum.core is not None
    quorum._run(quorum.core.start(int(time.monotonic() * 1000)))


def test_a_metadata_log_written_before_the_raft_core_loads_into_a_lone_voter(
    tmp_path: Path,
) -> None:
    _write_pre_raft_log(tmp_path, 5)
    quorum = _lone_voter(tmp_path)
    image = quorum.load()
    assert sorted(image.topics_by_name) == [f"topic-{i}" for i in range(5)]  # before any election
    _start_core(quorum)
    assert quorum.active and quorum.epoch == 1 and quorum.leader_id == 1
    state = json.loads((tmp_path / f"{METADATA_TOPIC}-0" / "quorum-state").read_text())
    assert (state["leaderId"], state["leaderEpoch"], state["votedId"]) == (1, 1, 1)
    assert quorum.image.topics_by_name == image.topics_by_name  # the LeaderChange adds nothing
    quorum.append(_topic(5))  # committed inside the call
    assert "topic-5" in quorum.image.topics_by_name
    quorum.close()

    again = _lone_voter(tmp_path)
    assert sorted(again.load().topics_by_name) == [f"topic-{i}" for i in range(6)]
    _start_core(again)
    assert again.epoch == 2  # a new epoch at every start
    again.close()
    # The observer code reads the same log (a broker-only node replaying its copy).
    observer = MetadataQuorum(tmp_path, 1)
    assert sorted(observer.load().topics_by_name) == [f"topic-{i}" for i in range(6)]
    observer.close()


def test_a_voter_among_several_cannot_commit_synchronously(tmp_path: Path) -> None:
    quorum = RaftMetadataQuorum(tmp_path, 1, RaftConfig(voters=VoterSet.of(1, 2, 3)), "cluster")
    quorum.load()
    _start_core(quorum)
    assert not quorum.active
    with pytest.raises(NotControllerError):
        quorum.append(_topic(0))
    quorum.close()
