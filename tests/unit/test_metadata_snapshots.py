"""Metadata snapshots (metadata/snapshots.py): the image written as a
`.checkpoint` file replays to the same image; the quorum writes one when
enough record bytes were committed, keeps two, cuts the log below the older
one, starts from the newest; an observer installs a snapshot it fetched; and
a Raft follower that was down while the leader cut its log catches up through
FetchSnapshot."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from odradek.metadata import image as img
from odradek.metadata import records as R
from odradek.metadata import snapshots as S
from odradek.metadata.quorum import MetadataLogSettings, MetadataQuorum
from odradek.metadata.raft_log import PartitionRaftLog
from odradek.metadata.raft_quorum import RaftMetadataQuorum
from odradek.protocol import records as batches
from odradek.raft.config import RaftConfig, VoterSet
from odradek.raft.core import RaftCore
from odradek.raft.effects import Send, SnapshotInstalled
from odradek.raft.log import OffsetAndEpoch, snapshot_file_name
from odradek.raft.state import ElectionState
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig

SMALL = MetadataLogSettings(
    segment_bytes=2048, max_record_bytes_between_snapshots=4096, max_snapshot_interval_ms=0
)
MAX_STEPS = 10_000


def _busy_image() -> img.MetadataImage:
    """An image with every kind of state a snapshot must carry."""
    t1, t2 = str(uuid.uuid4()), str(uuid.uuid4())
    endpoint = [
        {
            "listener": "PLAINTEXT",
            "host": "127.0.0.1",
            "port": 9092,
            "security_protocol": "PLAINTEXT",
        }
    ]
    records = [
        R.register_broker_record(1, endpoint, "r1", incarnation_id="a", log_dirs=["d1", "d2"]),
        R.register_broker_record(2, endpoint, None, fenced=True),
        R.broker_registration_change_record(1, in_controlled_shutdown=True),
        R.topic_record("orders", t1),
        R.partition_record(t1, 0, [1, 2], 1),
        R.partition_record(t1, 1, [2, 1], 2),
        R.partition_change_record(
            t1, 0, leader=2, isr=[2], leader_epoch=3, replicas=[1, 2, 3], adding_replicas=[3]
        ),
        R.partition_change_record(t1, 1, directories=["d1", "d2"]),
        R.topic_record("gone", t2),
        R.partition_record(t2, 0, [1], 1),
        R.config_record(R.RESOURCE_TOPIC, "orders", "retention.ms", "1000"),
        R.config_record(R.RESOURCE_BROKER, "", "log.retention.ms", "5"),
        R.producer_ids_record(1, 5000),
    ]
    image = img.apply(img.MetadataImage(), records[:3], 10)  # broker epochs 10
    image = img.apply(image, records[3:], 40)
    return img.apply(image, [R.remove_topic_record(t2)], 41)


def test_snapshot_round_trip_rebuilds_the_same_image() -> None:
    image = _busy_image()
    snapshot_id = OffsetAndEpoch(image.offset + 1, 4)
    data = S.encode(image, snapshot_id)
    back = S.image_of(snapshot_id, S.decode(data))
    assert back == image
    assert back.brokers[1].epoch == 10 and back.brokers[1].in_controlled_shutdown
    assert back.topics_by_name["orders"].partitions[0].adding_replicas == (3,)


def test_a_torn_or_footless_snapshot_is_refused() -> None:
    image = _busy_image()
    data = S.encode(image, OffsetAndEpoch(42, 1))
    with pytest.raises(S.InvalidSnapshot):
        S.decode(data[:-5])
    footer = list(batches.iter_batch_headers(data))[-1]
    with pytest.raises(S.InvalidSnapshot, match="SnapshotFooter"):
        S.decode(data[: footer.position])


def _create_topics(quorum: MetadataQuorum, first: int, count: int) -> None:
    for i in range(first, first + count):
        tid = str(uuid.UUID(int=i + 1))
        quorum.append([R.topic_record(f"topic-{i}", tid), R.partition_record(tid, 0, [1], 1)])


def _one_voter(path: Path) -> RaftMetadataQuorum:
    """A lone voter, loaded and leading (what a single node runs); its core is
    started without the ticker task, which needs an event loop."""
    quorum = RaftMetadataQuorum(path, 1, RaftConfig(voters=VoterSet.of(1)), "cluster", SMALL)
    quorum.load()
    assert quorum.core is not None
    quorum._run(quorum.core.start(1))
    assert quorum.active
    return quorum


def test_quorum_snapshots_cuts_its_log_and_restarts_from_the_newest(tmp_path: Path) -> None:
    quorum = _one_voter(tmp_path)
    _create_topics(quorum, 0, 60)
    snapshots = S.MetadataSnapshots(tmp_path / "__cluster_metadata-0")
    ids = snapshots.ids()
    assert len(ids) == 2, ids  # the two newest are kept
    assert quorum.log_start_offset == ids[0].offset  # the log from the older one
    segment_bases = sorted(int(p.stem) for p in snapshots.dir.glob("*.log"))
    assert segment_bases[0] <= ids[0].offset < segment_bases[1]  # older segments deleted
    image = quorum.image
    quorum.close()

    again = RaftMetadataQuorum(tmp_path, 1, RaftConfig(voters=VoterSet.of(1)), "cluster", SMALL)
    assert again.load() == image
    again.close()
    again = _one_voter(tmp_path)
    assert again.image.topics_by_name == image.topics_by_name
    _create_topics(again, 60, 1)
    assert "topic-60" in again.image.topics_by_name
    again.close()


def test_a_snapshot_file_that_does_not_parse_falls_back_to_the_older(tmp_path: Path) -> None:
    quorum = _one_voter(tmp_path)
    _create_topics(quorum, 0, 60)
    image = quorum.image
    quorum.close()
    snapshots = S.MetadataSnapshots(tmp_path / "__cluster_metadata-0")
    newest = snapshots.path(snapshots.ids()[-1])
    newest.write_bytes(newest.read_bytes()[:100])
    again = MetadataQuorum(tmp_path, 1, SMALL)
    assert again.load() == image  # the older snapshot plus the log after it
    again.close()


def test_observer_below_the_log_start_installs_the_snapshot(tmp_path: Path) -> None:
    controller = _one_voter(tmp_path / "controller")
    _create_topics(controller, 0, 60)
    observer = MetadataQuorum(tmp_path / "broker", 2, SMALL)
    observer.load()
    seen: list[int] = []
    observer.listeners.append(lambda old, new, records: seen.append(len(new.topics_by_name)))
    assert observer.log_end_offset < controller.log_start_offset
    snapshot_id = controller.latest_snapshot_id()
    assert snapshot_id is not None
    data = controller.read_snapshot(snapshot_id)
    assert data is not None
    observer.install_snapshot(snapshot_id, data)
    assert observer.log_end_offset == snapshot_id.offset
    assert observer.last_fetched_epoch == snapshot_id.epoch
    while observer.log_end_offset < controller.log_end_offset:
        observer.replicate(controller.read(observer.log_end_offset, 1 << 20))
    assert observer.image == controller.image
    assert seen and seen[0] == len(S.decode(data)) // 2  # one TopicRecord and one partition each
    observer.close()
    reopened = MetadataQuorum(tmp_path / "broker", 2, SMALL)
    assert reopened.load() == controller.image
    reopened.close()
    controller.close()


# -- a Raft follower catching up through FetchSnapshot over real partition logs ------------


class Pump:
    """Three cores over PartitionRaftLogs, messages delivered in order, time by hand."""

    def __init__(self, tmp: Path) -> None:
        config = RaftConfig(voters=VoterSet.of(1, 2, 3), fetch_snapshot_max_bytes=100)
        log_config = LogConfig(segment_bytes=300, file_delete_delay_ms=0)
        self.logs = {
            n: PartitionRaftLog(
                PartitionLog.open(
                    tmp / f"node-{n}", "__cluster_metadata", 0, log_config, uuid.UUID(int=1)
                )
            )
            for n in (1, 2, 3)
        }
        self.cores = {
            n: RaftCore(n, config, self.logs[n], ElectionState(), random.Random(n))
            for n in (1, 2, 3)
        }
        self.down: set[int] = set()
        self.installed: list[tuple[int, OffsetAndEpoch]] = []
        self.now_ms = 0
        self.queue: list[Send] = []
        for n, core in self.cores.items():
            self._take(n, core.start(self.now_ms))

    def _take(self, node: int, effects: Sequence[object]) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.queue.append(e)
            elif isinstance(e, SnapshotInstalled):
                self.installed.append((node, e.snapshot_id))

    def run(self, until: object) -> None:
        for _ in range(MAX_STEPS):
            if until():  # type: ignore[operator]
                return
            while self.queue:
                env = self.queue.pop(0).envelope
                if env.dst not in self.down and env.src not in self.down:
                    self._take(env.dst, self.cores[env.dst].handle(env, self.now_ms))
            self.now_ms += 10
            for n, core in self.cores.items():
                if n not in self.down:
                    self._take(n, core.tick(self.now_ms))
        raise AssertionError("did not get there")

    def leader(self) -> int | None:
        found = [
            n for n, c in self.cores.items() if n not in self.down and c.state.name == "LEADER"
        ]
        return found[0] if found else None


def test_follower_down_while_the_leader_cut_its_log_catches_up_by_fetch_snapshot(
    tmp_path: Path,
) -> None:
    pump = Pump(tmp_path)
    pump.run(lambda: pump.leader() is not None)
    leader = pump.leader()
    assert leader is not None
    lagging = next(n for n in (1, 2, 3) if n != leader)
    pump.down.add(lagging)
    core = pump.cores[leader]
    for round_ in range(2):  # two snapshots: the log below the first one goes
        for i in range(40):
            last, effects = core.propose([f"r{round_}-{i}".encode() * 5], pump.now_ms)
            pump._take(leader, effects)
            pump.run(lambda last=last: core.high_watermark > last)
        snapshot_id = OffsetAndEpoch(core.high_watermark, core.epoch)
        core.create_snapshot(snapshot_id, S.encode(_busy_image(), snapshot_id))
    leader_log = pump.logs[leader]
    assert leader_log.log_start_offset > pump.logs[lagging].log_end_offset
    assert len(leader_log.snapshots.ids()) == 2
    pump.down.discard(lagging)
    pump.run(lambda: pump.logs[lagging].log_end_offset == leader_log.log_end_offset)
    newest = leader_log.latest_snapshot_id()
    assert newest is not None
    assert (lagging, newest) in pump.installed
    assert pump.logs[lagging].read_snapshot(newest) == leader_log.read_snapshot(newest)
    assert snapshot_file_name(newest) in {p.name for p in (tmp_path / f"node-{lagging}").iterdir()}
