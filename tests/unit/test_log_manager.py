"""LogManager: meta.properties, placement over log dirs, loading, deletion."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from odradek.protocol.records import Record, build_batch, validate_produce_records
from odradek.storage.log import parse_kafka_uuid
from odradek.storage.log_config import LogConfig
from odradek.storage.log_manager import (
    InconsistentBrokerMetadata,
    LogManager,
    parse_log_dir_name,
    read_properties,
)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


def _manager(dirs: list[Path], node_id: int = 1, cluster_id: str = CLUSTER_ID) -> LogManager:
    manager = LogManager(dirs, LogConfig(), cluster_id, node_id)
    manager.startup()
    return manager


def _produce(manager: LogManager, topic: str, partition: int, n: int = 3) -> None:
    log = manager.get_or_create(topic, partition, uuid.uuid5(uuid.NAMESPACE_DNS, topic))
    buf = bytearray(build_batch([Record(value=b"x") for _ in range(n)]))
    log.append_as_leader(buf, validate_produce_records(buf, 10**6), 0)


def test_meta_properties_written_in_kafka_format(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d1"], node_id=5)
    text = (tmp_path / "d1" / "meta.properties").read_text()
    assert text.startswith("#")
    properties = read_properties(tmp_path / "d1" / "meta.properties")
    assert properties is not None
    assert properties["node.id"] == "5"
    assert properties["version"] == "1"
    assert properties["cluster.id"] == CLUSTER_ID
    assert parse_kafka_uuid(properties["directory.id"]) == manager.directory_ids[tmp_path / "d1"]
    manager.shutdown()
    # A restart keeps the same directory id.
    again = _manager([tmp_path / "d1"], node_id=5)
    assert again.directory_ids == manager.directory_ids


def test_meta_properties_of_another_cluster_or_node_is_refused(tmp_path: Path) -> None:
    _manager([tmp_path / "d1"], node_id=1).shutdown()
    with pytest.raises(InconsistentBrokerMetadata):
        _manager([tmp_path / "d1"], node_id=2)
    with pytest.raises(InconsistentBrokerMetadata):
        _manager([tmp_path / "d1"], node_id=1, cluster_id="other")


def test_missing_directory_id_is_added(tmp_path: Path) -> None:
    dir = tmp_path / "d1"
    dir.mkdir()
    (dir / "meta.properties").write_text(f"#old\nnode.id=1\nversion=1\ncluster.id={CLUSTER_ID}\n")
    manager = _manager([dir])
    properties = read_properties(dir / "meta.properties")
    assert properties is not None and "directory.id" in properties
    assert parse_kafka_uuid(properties["directory.id"]) == manager.directory_ids[dir]


def test_new_partitions_go_to_the_dir_with_fewest_partitions(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"]
    manager = _manager(dirs)
    placed = [manager.dir_of(manager.get_or_create("t", p, None)) for p in range(7)]
    assert placed == [dirs[0], dirs[1], dirs[2], dirs[0], dirs[1], dirs[2], dirs[0]]
    assert (dirs[1] / "t-1").is_dir()
    # get_or_create returns the existing log
    assert manager.get_or_create("t", 1, None) is manager.get("t", 1)


def test_startup_loads_existing_logs_and_skips_special_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = _manager(dirs)
    _produce(manager, "orders", 0, 3)
    _produce(manager, "orders", 1, 5)
    _produce(manager, "my-topic-v2", 10, 2)
    manager.shutdown()
    (dirs[0] / "__cluster_metadata-0").mkdir()
    (dirs[0] / "orders-9-future").mkdir()
    (dirs[1] / "orders-8-stray").mkdir()
    (dirs[1] / "orders-7.0123abcd-delete").mkdir()
    (dirs[1] / "not-a-partition").mkdir()
    reloaded = _manager(dirs)
    logs = {(log.topic, log.partition): log.log_end_offset for log in reloaded.all_logs()}
    assert logs == {("orders", 0): 3, ("orders", 1): 5, ("my-topic-v2", 10): 2}
    orders_0 = reloaded.get("orders", 0)
    assert orders_0 is not None
    assert orders_0.topic_id == uuid.uuid5(uuid.NAMESPACE_DNS, "orders")
    assert not (dirs[1] / "orders-7.0123abcd-delete").exists()
    assert (dirs[0] / "__cluster_metadata-0").exists()


def test_same_partition_in_two_dirs_fails_startup(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    _manager(dirs).shutdown()
    (dirs[0] / "t-0").mkdir()
    (dirs[1] / "t-0").mkdir()
    with pytest.raises(InconsistentBrokerMetadata):
        _manager(dirs)


def test_delete_removes_the_log_dir(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d1"])
    _produce(manager, "gone", 0)
    manager.delete("gone", 0)
    assert manager.get("gone", 0) is None
    # at once: no dir of that name (renamed to ...-delete); soon: removed off the caller
    names = [p.name for p in (tmp_path / "d1").iterdir()]
    assert "gone-0" not in names and "meta.properties" in names
    deadline = time.monotonic() + 10
    while [p.name for p in (tmp_path / "d1").iterdir()] != ["meta.properties"]:
        assert time.monotonic() < deadline, list((tmp_path / "d1").iterdir())
        time.sleep(0.01)
    manager.delete("gone", 0)  # idempotent


def test_delete_many_renames_every_log_at_once(tmp_path: Path) -> None:
    manager = _manager([tmp_path / "d1"])
    for p in range(3):
        _produce(manager, "many", p)
    manager.delete_many([("many", p) for p in range(3)])
    assert all(manager.get("many", p) is None for p in range(3))
    left = [p.name for p in (tmp_path / "d1").iterdir()]
    assert not any(n in left for n in ("many-0", "many-1", "many-2"))


def test_parse_log_dir_name() -> None:
    assert parse_log_dir_name("a-b-12") == ("a-b", 12)
    assert parse_log_dir_name("topic") is None
    assert parse_log_dir_name("-3") is None
    assert parse_log_dir_name("t-x") is None


def test_future_log_copied_then_promoted_takes_the_partitions_place(tmp_path: Path) -> None:
    from odradek.protocol.batch_format import iter_batch_headers

    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = _manager(dirs)
    _produce(manager, "t", 0, 5)
    old = manager.get("t", 0)
    assert old is not None and manager.dir_of(old) == dirs[0]
    future = manager.create_future("t", 0, dirs[1])
    assert future.dir.name.startswith("t-0.") and future.dir.name.endswith("-future")
    _produce(manager, "t", 0, 2)  # appends go on meanwhile
    while future.log_end_offset < old.log_end_offset:
        data = bytes(old.read(future.log_end_offset, 1 << 20).records)
        future.append_as_follower(data, list(iter_batch_headers(data)))
    moved = manager.promote_future("t", 0)
    assert manager.get("t", 0) is moved and manager.dir_of(moved) == dirs[1]
    assert moved.log_end_offset == 7 and (dirs[1] / "t-0").is_dir()
    assert manager.futures == {} and not future.dir.exists()
    manager.shutdown()
    reloaded = _manager(dirs)
    again = reloaded.get("t", 0)
    assert again is not None and reloaded.dir_of(again) == dirs[1]
    assert again.log_end_offset == 7


def test_unfinished_future_logs_are_dropped_at_shutdown(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = _manager(dirs)
    _produce(manager, "t", 0, 5)
    future = manager.create_future("t", 0, dirs[1])
    manager.shutdown()
    assert not future.dir.exists()
    reloaded = _manager(dirs)
    kept = reloaded.get("t", 0)
    assert kept is not None and reloaded.dir_of(kept) == dirs[0] and kept.log_end_offset == 5
