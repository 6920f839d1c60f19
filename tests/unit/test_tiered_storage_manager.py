import uuid
from pathlib import Path

from odradek.tiered.metadata_records import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
    uuid_to_b64,
)
from odradek.tiered.storage_manager import LocalSegmentFiles, RemoteStorageManager

TIP = TopicIdPartition(uuid.uuid4(), "my.topic", 2)


def _files(tmp: Path) -> LocalSegmentFiles:
    (tmp / "a.log").write_bytes(b"L" * 3000)
    (tmp / "a.index").write_bytes(b"\x00" * 16)
    (tmp / "a.timeindex").write_bytes(b"\x01" * 24)
    return LocalSegmentFiles(str(tmp / "a.log"), str(tmp / "a.index"),
                             str(tmp / "a.timeindex"), str(tmp / "missing.txnindex"), None,
                             b"0\n1\n0 0\n")


def test_layout_copy_read_delete(tmp_path: Path) -> None:
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 100, 199, 1, 5, 6,
                                    {0: 100}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    assert rsm.copy_segment(meta, _files(tmp_path)) == 3040
    part = tmp_path / "remote" / f"my.topic-{uuid_to_b64(TIP.topic_id)}" / "2"
    stem = f"{100:020d}-{uuid_to_b64(meta.segment_id.id)}"
    names = sorted(p.name for p in part.iterdir())
    assert names == sorted(f"{stem}.{s}" for s in (
        "index", "timeindex", "txnindex", "snapshot", "leader-epoch-checkpoint", "log",
        "metadata"))
    assert (part / f"{stem}.log").read_bytes() == b"L" * 3000
    assert rsm.fetch(meta, "log", 10, 20) == b"L" * 10
    assert rsm.list_segments(TIP) == [meta]
    assert rsm.orphans(TIP) == []
    rsm.delete_segment(meta)
    assert rsm.list_segments(TIP) == []
    assert list(part.iterdir()) == []
    rsm.delete_partition(TIP)
    assert not part.parent.exists()


def test_a_copy_cut_short_is_an_invisible_orphan(tmp_path: Path) -> None:
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 0, 9, 1, 5, 6,
                                    {0: 0}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rsm.copy_segment(meta, _files(tmp_path))
    (Path(rsm.object_path(meta, "metadata"))).unlink()  # the crash came before the marker
    assert rsm.list_segments(TIP) == []
    assert len(rsm.orphans(TIP)) == 6
    rsm.delete_paths(rsm.orphans(TIP))
    assert rsm.orphans(TIP) == []


def test_a_torn_marker_makes_the_segment_an_orphan(tmp_path: Path) -> None:
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 0, 9, 1, 5, 6,
                                    {0: 0}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rsm.copy_segment(meta, _files(tmp_path))
    marker = Path(rsm.object_path(meta, "metadata"))
    marker.write_bytes(marker.read_bytes()[:10])
    segments, orphans = rsm.scan(TIP)
    assert segments == [] and len(orphans) == 7


def test_leader_epoch_checkpoint_round_trip() -> None:
    from odradek.tiered.follower_restore import parse_checkpoint
    from odradek.tiered.remote_log_manager import _checkpoint_text

    entries = [(0, 0), (3, 150), (4, 900)]
    assert parse_checkpoint(_checkpoint_text(entries)) == entries
    assert parse_checkpoint(_checkpoint_text([])) == []


def test_the_delete_records_start_offset_is_stored_and_no_orphan(tmp_path: Path) -> None:
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    assert rsm.read_start_offset(TIP) == -1
    rsm.write_start_offset(TIP, 42)
    rsm.write_start_offset(TIP, 57)
    assert rsm.read_start_offset(TIP) == 57
    assert rsm.scan(TIP) == ([], [])
    rsm.delete_partition(TIP)
    assert rsm.read_start_offset(TIP) == -1


def test_reads_pick_the_copy_of_the_local_lineage() -> None:
    """Two remote copies of offsets 100..199: the lineage's (epoch 1 from 150) and a
    fenced leader's late copy (epoch 0 throughout). A read follows the local
    leader-epoch cache, as Kafka's (epoch, offset) lookup; offsets the cache does not
    cover take the latest copy."""
    from types import SimpleNamespace

    from odradek.storage.leader_epoch import LeaderEpochCache
    from odradek.tiered.remote_log_manager import PartitionTier

    def seg(epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 100, 199, 1,
                                        5, 6, epochs, 3000,
                                        RemoteLogSegmentState.COPY_SEGMENT_FINISHED)

    ours, fenced = seg({0: 100, 1: 150}), seg({0: 100})
    tier = PartitionTier(TIP, [ours, fenced], loaded=True)
    assert tier.segment_for(160) is fenced  # no epoch given: the latest copy
    tier.log = SimpleNamespace(leader_epoch_cache=LeaderEpochCache([(0, 0), (1, 150)]))
    assert tier.read_epoch(160) == 1 and tier.read_epoch(120) == 0
    assert tier.segment_for(160, tier.read_epoch(160)) is ours
    assert tier.segment_for(120, tier.read_epoch(120)) is fenced  # both agree below 150
    tier.log = SimpleNamespace(leader_epoch_cache=LeaderEpochCache([(1, 170)]))
    assert tier.read_epoch(160) == -1  # below the cache: any copy
    assert tier.segment_for(160, -1) is fenced


def test_scan_reads_each_marker_once(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 100, 199, 1, 5, 6,
                                    {0: 100}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rsm.copy_segment(meta, _files(tmp_path))
    gets: list[str] = []
    cat_file = rsm.fs.cat_file
    # fsspec shares one LocalFileSystem per process: patched for this test only
    monkeypatch.setattr(rsm.fs, "cat_file",
                        lambda path, *a, **k: gets.append(path) or cat_file(path, *a, **k))
    assert [m.start_offset for m in rsm.scan(TIP)[0]] == [100]
    assert [m.start_offset for m in rsm.scan(TIP)[0]] == [100]
    assert len(gets) == 1
    rsm.delete_segment(meta)
    assert rsm.scan(TIP) == ([], [])


def test_a_marker_without_its_parts_is_never_visible(tmp_path: Path) -> None:
    """A fenced leader's copy can write its marker after the new leader removed the
    parts it saw without one: such a segment is not visible, and it is an orphan."""
    rsm = RemoteStorageManager((tmp_path / "remote").as_uri())
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 100, 199, 1, 5, 6,
                                    {0: 100}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rsm.copy_segment(meta, _files(tmp_path))
    assert [m.start_offset for m in rsm.scan(TIP)[0]] == [100]
    log_object = rsm.object_path(meta, "log")
    rsm.fs.rm(log_object)
    segments, orphans = rsm.scan(TIP)
    assert segments == []
    assert rsm.object_path(meta, "metadata") in orphans and len(orphans) == 6


def test_spark_discovery_reads_the_broker_layout(tmp_path: Path) -> None:
    """Spark's planner (spark/remote_plan.py) finds what the broker's storage manager
    wrote: the segment, the stored DeleteRecords log start, and not a marker whose
    .log is gone."""
    import pytest

    pytest.importorskip("pyspark")
    from odradek.spark.remote_plan import discover_segments

    url = (tmp_path / "remote").as_uri()
    rsm = RemoteStorageManager(url)
    meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), 100, 199, 1, 5, 6,
                                    {0: 100}, 3000, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    rsm.copy_segment(meta, _files(tmp_path))
    ids = {TIP.name: uuid_to_b64(TIP.topic_id)}
    found = discover_segments(url, {}, [(TIP.name, TIP.partition)], ids)
    [seg] = found[(TIP.name, TIP.partition)]
    assert (seg.base_offset, seg.end_offset, seg.log_start_offset) == (100, 199, -1)
    rsm.write_start_offset(TIP, 150)
    [seg] = discover_segments(url, {}, [(TIP.name, TIP.partition)], ids)[(TIP.name, 2)]
    assert seg.log_start_offset == 150
    rsm.fs.rm(rsm.object_path(meta, "log"))
    assert discover_segments(url, {}, [(TIP.name, TIP.partition)], ids) == {}


def test_a_new_leader_copies_from_its_own_lineage_not_a_divergent_one() -> None:
    """KIP-405: after an unclean election the new leader's history (epochs 0, then 2
    from offset 150) diverges from the old leader's remote copy of 100..199 (epoch 1
    from 150). Its remote tier ends where the histories agree (99): it copies its own
    100..199 rather than continuing past a segment it never had, and reads of 150+
    never take the divergent copy."""
    from types import SimpleNamespace

    from odradek.storage.leader_epoch import LeaderEpochCache
    from odradek.tiered.remote_log_manager import PartitionTier, RemoteLogManager

    def seg(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.uuid4()), start, end, 1,
                                        5, 6, epochs, 3000,
                                        RemoteLogSegmentState.COPY_SEGMENT_FINISHED)

    shared, divergent = seg(0, 99, {0: 0}), seg(100, 199, {0: 100, 1: 150})
    tier = PartitionTier(TIP, [shared, divergent], loaded=True)
    new_leader = SimpleNamespace(leader_epoch_cache=LeaderEpochCache([(0, 0), (2, 150)]))
    assert RemoteLogManager._lineage_end(None, new_leader, tier) == 99  # type: ignore[arg-type]
    old_leader = SimpleNamespace(leader_epoch_cache=LeaderEpochCache([(0, 0), (1, 150)]))
    assert RemoteLogManager._lineage_end(None, old_leader, tier) == 199  # type: ignore[arg-type]
    tier.log = new_leader
    assert tier.segment_for(160, tier.read_epoch(160)) is not divergent
