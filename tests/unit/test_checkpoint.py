"""Checkpoint files: Kafka's text format, atomic replacement, corrupt input."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.checkpoint import (
    CorruptCheckpoint,
    OffsetCheckpointFile,
    read_checkpoint_lines,
    write_checkpoint_lines,
    write_checkpoints,
)


def test_offset_checkpoint_writes_kafka_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("orders", 1): 99, ("orders", 0): 1234, ("a.b_c", 7): 0})
    assert path.read_text() == "0\n3\na.b_c 7 0\norders 0 1234\norders 1 99\n"


def test_offset_checkpoint_round_trip_and_missing_file(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    assert checkpoint.read() == {}
    offsets = {("t", i): i * 1000 for i in range(50)}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    checkpoint.write({})
    assert checkpoint.read() == {}


def test_write_replaces_atomically_without_leftovers(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({("t", 0): 1})
    OffsetCheckpointFile(path).write({("t", 0): 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log-start-offset-checkpoint"]
    assert OffsetCheckpointFile(path).read() == {("t", 0): 2}


def test_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text("0\n2\n__consumer_offsets 12 4051\nmy-topic 0 77\n")
    assert OffsetCheckpointFile(path).read() == {
        ("__consumer_offsets", 12): 4051,
        ("my-topic", 0): 77,
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0\n",
        "1\n0\n",  # unknown version
        "0\n2\nt 0 1\n",  # count mismatch
        "0\nx\n",
        "0\n1\nt 0\n",  # missing field
        "0\n1\nt zero 1\n",
    ],
)
def test_corrupt_files_are_rejected(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        OffsetCheckpointFile(path).read()


def test_generic_lines_for_leader_epoch_style_files(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_checkpoint_lines(path, ["0 0", "3 120"])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_checkpoint_lines(path) == ["0 0", "3 120"]
    assert read_checkpoint_lines(tmp_path / "absent") is None


def test_topic_names_with_whitespace_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "cp").write({("bad topic", 0): 1})


def test_many_files_written_together(tmp_path: Path) -> None:
    files = [(tmp_path / f"p{i}" / "leader-epoch-checkpoint", ["0 0", f"{i + 1} {i * 10}"])
             for i in range(20)]
    for path, _ in files:
        path.parent.mkdir()
    files.append((tmp_path / "gone" / "leader-epoch-checkpoint", ["0 0"]))  # no such dir
    failed = write_checkpoints(files)
    assert list(failed) == [tmp_path / "gone" / "leader-epoch-checkpoint"]
    for path, lines in files[:-1]:
        assert read_checkpoint_lines(path) == lines
        assert not path.with_name(path.name + ".tmp").exists()
    # rewritten: the new content replaces the old
    assert write_checkpoints([(files[0][0], ["5 7"]), (files[1][0], [])]) == {}
    assert read_checkpoint_lines(files[0][0]) == ["5 7"]
    assert read_checkpoint_lines(files[1][0]) == []
