"""KIP-858 in odradek: directory ids in the metadata records and image, the
controller's AssignReplicasToDirs and leadership that follows log dirs, and
the log manager's placement by assigned dir (a dir offline at start-up keeps
its partitions offline)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.metadata import directories as D
from odradek.metadata import records as R
from odradek.metadata.cluster_control import NO_LEADER, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH
from odradek.metadata.image import MetadataImage, apply
from odradek.storage.log import KafkaStorageError, kafka_uuid_string
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.unit.test_cluster_control import _cluster, _control, _step, _topic

DIR_A = kafka_uuid_string(uuid.UUID(int=0xA0))
DIR_B = kafka_uuid_string(uuid.UUID(int=0xB0))


def _part(image: MetadataImage, name: str = "t", index: int = 0):
    return image.topics_by_name[name].partitions[index]


def test_new_partition_records_its_replicas_unassigned() -> None:
    image = _step(
        MetadataImage(),
        [
            R.topic_record("t", str(uuid.UUID(int=7))),
            R.partition_record(str(uuid.UUID(int=7)), 0, [1, 2], 1),
        ],
    )
    part = _part(image)
    assert part.directories == (D.UNASSIGNED, D.UNASSIGNED)
    assert D.directory_of(part, 2) == D.UNASSIGNED


def test_partition_recorded_without_directories_reads_as_migrating() -> None:
    tid = str(uuid.UUID(int=7))
    old = R.partition_record(tid, 0, [1], 1)
    del old["directories"]
    image = _step(MetadataImage(), [R.topic_record("t", tid), old])
    assert _part(image).directories == ()
    assert D.directory_of(_part(image), 1) == D.MIGRATING


def test_change_record_sets_directories_and_a_replica_change_realigns_them() -> None:
    tid = str(uuid.UUID(int=7))
    image = _step(
        MetadataImage(), [R.topic_record("t", tid), R.partition_record(tid, 0, [1, 2], 1)]
    )
    image = _step(image, [R.partition_change_record(tid, 0, directories=[DIR_A, DIR_B])])
    assert _part(image).directories == (DIR_A, DIR_B)
    assert _part(image).partition_epoch == 1
    # An ISR change leaves them alone; moving replicas keeps the kept one's dir.
    image = _step(image, [R.partition_change_record(tid, 0, isr=[1])])
    assert _part(image).directories == (DIR_A, DIR_B)
    moved = R.partition_change_record(tid, 0)
    moved["replicas"] = [3, 1]
    image = _step(image, [moved])
    assert _part(image).directories == (D.UNASSIGNED, DIR_A)


def test_registration_records_the_online_log_dirs() -> None:
    record = R.register_broker_record(1, [], None, log_dirs=[DIR_B, DIR_A])
    image = apply(MetadataImage(), [R.decode(R.encode(record))], 0)
    assert image.brokers[1].log_dirs == tuple(sorted([DIR_A, DIR_B]))


def test_is_online_follows_kafkas_directory_id_rules() -> None:
    assert D.is_online(D.UNASSIGNED, (DIR_A,)) and D.is_online(D.MIGRATING, (DIR_A,))
    assert not D.is_online(D.LOST, (DIR_A,)) and not D.is_online(D.LOST, ())
    assert D.is_online(DIR_A, (DIR_A,)) and not D.is_online(DIR_B, (DIR_A,))
    assert D.is_online(DIR_B, ())  # a broker that registered no dirs


def test_assign_replicas_to_dirs_records_the_dir_once() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 1, 3)
    part = _part(image)
    tid = str(image.topics_by_name["t"].topic_id)
    b = part.replicas[1]
    code, results, records = control.assign_replicas_to_dirs(
        image, b, image.brokers[b].epoch, [(tid, 0, DIR_A)]
    )
    assert code == 0 and results == {(tid, 0): 0}
    image = _step(image, records)
    assert D.directory_of(_part(image), b) == DIR_A
    assert D.directory_of(_part(image), part.replicas[0]) == D.UNASSIGNED
    # the same placement again changes nothing
    _, _, again = control.assign_replicas_to_dirs(
        image, b, image.brokers[b].epoch, [(tid, 0, DIR_A)]
    )
    assert again == []


def test_assign_replicas_to_dirs_refuses_stale_epochs_and_non_replicas() -> None:
    control = _control()
    image = _topic(_cluster(control, n=3), "t", 1, 2)
    tid = str(image.topics_by_name["t"].topic_id)
    outsider = next(b for b in (1, 2, 3) if b not in _part(image).replicas)
    code, _, records = control.assign_replicas_to_dirs(image, outsider, -5, [(tid, 0, DIR_A)])
    assert (code, records) == (STALE_BROKER_EPOCH, [])
    code, results, records = control.assign_replicas_to_dirs(
        image, outsider, image.brokers[outsider].epoch, [(tid, 0, DIR_A)]
    )
    assert code == 0 and results[(tid, 0)] == NOT_LEADER_OR_FOLLOWER and records == []


def _single_node(log_dirs: list[str]) -> tuple[MetadataImage, str]:
    """A combined node (registered unfenced, as broker.py does) leading t-0 in DIR_A."""
    tid = str(uuid.UUID(int=9))
    image = _step(
        MetadataImage(),
        [
            R.register_broker_record(1, [], None, log_dirs=log_dirs),
            R.topic_record("t", tid),
            R.partition_record(tid, 0, [1], 1),
            R.partition_change_record(tid, 0, directories=[DIR_A]),
        ],
    )
    return image, tid


def test_a_replica_in_a_dir_that_is_not_online_loses_leadership_and_gets_it_back() -> None:
    control = _control()
    image, _ = _single_node([DIR_B])  # DIR_A did not come up
    image = _step(image, control.directory_changes(image, 1))
    part = _part(image)
    assert (part.leader, part.isr) == (NO_LEADER, (1,))
    assert control.directory_changes(image, 1) == []  # settled
    # The dir is back: the node registers it again and leads again.
    image = _step(image, [R.register_broker_record(1, [], None, log_dirs=[DIR_A, DIR_B])])
    image = _step(image, control.directory_changes(image, 1))
    assert _part(image).leader == 1
    assert _part(image).leader_epoch == part.leader_epoch + 1


def test_leadership_moves_to_an_isr_member_whose_dir_is_online() -> None:
    control = _control()
    image = _topic(_cluster(control), "t", 1, 3)
    part = _part(image)
    tid = str(image.topics_by_name["t"].topic_id)
    leader = part.leader
    image = _step(
        image,
        [
            R.register_broker_record(
                leader, [], None, incarnation_id=f"inc-{leader}", log_dirs=[DIR_B]
            )
        ],
    )
    _, _, records = control.assign_replicas_to_dirs(
        image, leader, image.brokers[leader].epoch, [(tid, 0, DIR_A)]
    )
    image = _step(image, records)
    after = _part(image)
    assert after.leader not in (leader, NO_LEADER) and leader not in after.isr


def test_unfencing_does_not_elect_a_replica_whose_dir_is_offline() -> None:
    control = _control()
    image, tid = _single_node([DIR_A])
    # broker 1 re-registers (fenced) with DIR_A gone, as a broker-only node does
    _, records = control.register(image, 1, "inc-2", [], None, 0, log_dirs=[DIR_B])
    image = _step(image, records + [R.partition_change_record(tid, 0, leader=NO_LEADER)])
    answer, records = control.heartbeat(
        image, 1, image.brokers[1].epoch, image.offset, False, False, 0
    )
    image = _step(image, records)
    assert not answer.is_fenced and _part(image).leader == NO_LEADER


# -- the log manager's placement -------------------------------------------------------


def _manager(dirs: list[Path]) -> LogManager:
    manager = LogManager(dirs, LogConfig(), "cluster", 1)
    manager.startup()
    return manager


def test_log_is_created_in_its_assigned_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = _manager([a, b])
    plog = manager.get_or_create("t", 0, None, directory_id=manager.directory_ids[b])
    assert manager.dir_of(plog) == b
    assert manager.directory_id_of(plog) == manager.directory_ids[b]
    manager.shutdown()


def test_dir_offline_at_startup_keeps_its_replicas_offline(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = _manager([a, b])
    plog = manager.get_or_create("t", 0, None)
    assert manager.dir_of(plog) == a
    a_id = manager.directory_ids[a]
    manager.shutdown()
    a.rename(tmp_path / "a.aside")
    a.write_text("not a dir")
    manager = _manager([a, b])
    assert a in manager.offline_dirs
    offline = manager.get_or_create("t", 0, None, directory_id=a_id)
    assert offline.offline and manager.directory_id_of(offline) is None
    with pytest.raises(KafkaStorageError):
        offline.read(0, 100)
    assert not (b / "t-0").exists()
    # an unassigned (new) replica still goes to the online dir
    fresh = manager.get_or_create("t", 1, None)
    assert manager.dir_of(fresh) == b and not fresh.offline
    manager.shutdown()


def test_replica_of_a_dir_no_longer_configured_is_placed_anew(tmp_path: Path) -> None:
    a = tmp_path / "a"
    manager = _manager([a])
    gone = uuid.UUID(int=0xDEAD)
    plog = manager.get_or_create("t", 0, None, directory_id=gone)
    assert not plog.offline and manager.dir_of(plog) == a
    manager.shutdown()


# -- a log dir that fails while the broker runs (BrokerHeartbeat offline_log_dirs) ---------


def _dir(broker: int, name: str) -> str:
    return kafka_uuid_string(uuid.UUID(int=broker << 8 | ord(name)))


def _jbod_cluster(control, partitions: int = 2):  # type: ignore[no-untyped-def]
    """Three brokers with log dirs a and b each; topic t (RF=2) with every
    replica of partition 0 in dir a and of partition 1 in dir b."""
    image = MetadataImage()
    for b in (1, 2, 3):
        _, records = control.register(image, b, f"inc-{b}", [], None, 0,
                                      log_dirs=[_dir(b, "a"), _dir(b, "b")])
        image = _step(image, records)
        _, records = control.heartbeat(image, b, image.brokers[b].epoch, image.offset,
                                       False, False, 0)
        image = _step(image, records)
    image = _topic(image, "t", partitions, 2)
    tid = str(image.topics_by_name["t"].topic_id)
    for p in range(partitions):
        for b in _part(image, index=p).replicas:
            _, _, records = control.assign_replicas_to_dirs(
                image, b, image.brokers[b].epoch, [(tid, p, _dir(b, "ab"[p % 2]))])
            image = _step(image, records)
    return image


def _heartbeat(control, image, broker: int, offline: tuple[str, ...]):  # type: ignore[no-untyped-def]
    answer, records = control.heartbeat(image, broker, image.brokers[broker].epoch,
                                        image.offset, False, False, 0, offline)
    return answer, records, _step(image, records)


def test_a_dir_failed_at_run_time_moves_leadership_and_isr_off_its_replicas() -> None:
    control = _control()
    image = _jbod_cluster(control)
    before = _part(image)
    leader, follower = before.leader, next(r for r in before.replicas if r != before.leader)
    other = _part(image, index=1)
    answer, records, image = _heartbeat(control, image, leader, (_dir(leader, "a"),))
    assert answer.error_code == 0 and not answer.is_fenced
    # Kafka's handleDirectoriesOffline: the registration keeps the dirs still online...
    assert records[0] == R.broker_registration_change_record(leader, log_dirs=[_dir(leader, "b")])
    assert image.brokers[leader].log_dirs == (_dir(leader, "b"),)
    assert not image.brokers[leader].fenced
    # ...and the replica in the failed dir leaves leadership and the ISR.
    after = _part(image)
    assert (after.leader, after.isr) == (follower, (follower,))
    assert after.leader_epoch == before.leader_epoch + 1
    assert not D.replica_dir_online(image, after, leader)
    # Replicas in its other dir are untouched.
    assert _part(image, index=1) == other
    # Every heartbeat repeats the offline dirs: nothing more to record.
    answer, records, _ = _heartbeat(control, image, leader, (_dir(leader, "a"),))
    assert records == [] and not answer.is_fenced


def test_metadata_lists_the_replica_in_a_failed_dir_as_offline() -> None:
    from odradek.broker.handlers.metadata import partition_entries

    control = _control()
    image = _jbod_cluster(control)
    leader = _part(image).leader
    _, _, image = _heartbeat(control, image, leader, (_dir(leader, "a"),))
    entries = {e["partition_index"]: e for e in partition_entries(image.topics_by_name["t"], image)}
    assert entries[0]["offline_replicas"] == [leader]
    assert entries[0]["leader_id"] != leader
    assert entries[1]["offline_replicas"] == []


def test_a_broker_whose_every_dir_failed_is_fenced_and_stays_fenced() -> None:
    control = _control()
    image = _jbod_cluster(control)
    leader = _part(image).leader
    both = (_dir(leader, "a"), _dir(leader, "b"))
    answer, records, image = _heartbeat(control, image, leader, both)
    assert answer.is_fenced and image.brokers[leader].fenced
    # an empty log_dirs would read as "every dir online": the registration keeps them
    assert image.brokers[leader].log_dirs == tuple(sorted(both))
    assert all(_part(image, index=p).leader != leader for p in (0, 1))
    # caught up, but still without a dir: not unfenced
    answer, records, image = _heartbeat(control, image, leader, both)
    assert answer.is_fenced and records == []


def test_a_failed_dir_that_was_never_registered_changes_nothing() -> None:
    control = _control()
    image = _jbod_cluster(control)
    leader = _part(image).leader
    _, records, _ = _heartbeat(control, image, leader, (DIR_A,))
    assert records == []


def test_registration_change_with_log_dirs_survives_the_log() -> None:
    record = R.broker_registration_change_record(1, log_dirs=[DIR_B])
    image = _step(MetadataImage(), [R.register_broker_record(1, [], None, log_dirs=[DIR_A, DIR_B])])
    image = apply(image, [R.decode(R.encode(record))], image.offset + 1)
    assert image.brokers[1].log_dirs == (DIR_B,)
    # a fence/unfence change leaves the dirs as they were
    image = _step(image, [R.broker_registration_change_record(1, fenced=True)])
    assert image.brokers[1].log_dirs == (DIR_B,)


def test_failed_dirs_drop_a_follower_then_leave_the_last_isr_member_without_lead() -> None:
    control = _control()
    image = _jbod_cluster(control)
    part = _part(image)
    follower = next(r for r in part.replicas if r != part.leader)
    _, _, image = _heartbeat(control, image, follower, (_dir(follower, "a"),))
    after = _part(image)
    assert (after.leader, after.leader_epoch) == (part.leader, part.leader_epoch)
    assert after.isr == (part.leader,)
    # Now the last ISR member's dir fails too: no leader until it is back.
    _, _, image = _heartbeat(control, image, part.leader, (_dir(part.leader, "a"),))
    after = _part(image)
    assert (after.leader, after.isr) == (NO_LEADER, (part.leader,))
    # the last ISR member restarts with its dir repaired: it registers both dirs
    leader = part.leader
    _, records = control.register(image, leader, "inc-again", [], None, 0,
                                  log_dirs=[_dir(leader, "a"), _dir(leader, "b")])
    image = _step(image, records)
    _, _, image = _heartbeat(control, image, leader, ())
    assert _part(image).leader == leader


def test_log_manager_reports_a_dir_that_fails_at_run_time(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = _manager([a, b])
    reported: list[Path] = []
    manager.on_dir_offline = reported.append
    assert manager.offline_directory_ids() == []
    manager.mark_dir_offline(a, OSError(5, "Input/output error"))
    manager.mark_dir_offline(a, OSError(5, "Input/output error"))  # once
    assert reported == [a]
    assert manager.offline_directory_ids() == [manager.directory_ids[a]]
    manager.mark_dir_offline(b, OSError(24, "Too many open files"))  # a process limit
    assert reported == [a]
    manager.shutdown()
