"""Ranges of segment files sent with sendfile (storage/file_slice.py), and the
log reads that hand them out (`PartitionLog.read_to_send`)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from odradek.protocol.batch_validation import validate_produce_records
from odradek.protocol.records import Record, build_batch, iter_batch_headers
from odradek.storage.file_slice import ZERO_COPY_MIN_BYTES, FileSlice
from odradek.storage.log import PartitionLog
from odradek.storage.log_config import LogConfig
from odradek.storage.segment import ZERO_COPY_MAX_BATCHES


def _slice_of(path: Path, data: bytes, position: int, size: int) -> FileSlice:
    path.write_bytes(data)
    return FileSlice(os.open(path, os.O_RDONLY), position, size)


def _receive_all(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        assert chunk, "peer closed early"
        out += chunk
    return bytes(out)


def test_read_gives_the_range_and_the_rest_from_a_start(tmp_path: Path) -> None:
    data = os.urandom(10_000)
    piece = _slice_of(tmp_path / "a.log", data, 1_000, 5_000)
    assert len(piece) == 5_000
    assert piece.read() == data[1_000:6_000]
    assert piece.read(4_000) == data[5_000:6_000]
    piece.close()


def test_send_to_stops_when_the_socket_is_full_and_read_gives_the_rest(
        tmp_path: Path) -> None:
    data = os.urandom(4 * 1024 * 1024)
    piece = _slice_of(tmp_path / "a.log", data, 123, len(data) - 123)
    sender, receiver = socket.socketpair()
    try:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sender.setblocking(False)
        sent = piece.send_to(sender.fileno())
        # the peer reads nothing yet: a 4 MiB range cannot fit a 64 KiB buffer
        assert 0 < sent < len(piece)
        assert piece.send_to(sender.fileno(), sent) == 0  # still full: nothing more
        rest = piece.read(sent)
        assert _receive_all(receiver, sent) + rest == data[123:]
    finally:
        sender.close()
        receiver.close()
        piece.close()


def test_a_file_shorter_than_the_range_is_an_error_not_short_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    piece = _slice_of(path, os.urandom(200_000), 0, 200_000)
    os.truncate(path, 100_000)  # cut under the answer (a truncation meanwhile)
    with pytest.raises(OSError, match="shrank"):
        piece.read()
    sender, receiver = socket.socketpair()
    try:
        sender.setblocking(False)
        receiver.setblocking(False)
        with pytest.raises(OSError, match="shrank"):
            # the reader drains as sendfile goes, until it reaches the file's end
            sent = 0
            for _ in range(1000):
                sent += piece.send_to(sender.fileno(), sent)
                try:
                    receiver.recv(1 << 20)
                except BlockingIOError:
                    pass
    finally:
        sender.close()
        receiver.close()
        piece.close()


def test_close_releases_the_descriptor_once(tmp_path: Path) -> None:
    piece = _slice_of(tmp_path / "a.log", b"x" * 100, 0, 100)
    fd = piece._fd
    piece.close()
    with pytest.raises(OSError):
        os.fstat(fd)
    piece.close()  # again: nothing


# -- PartitionLog.read_to_send ------------------------------------------------------------

TOPIC_ID = uuid.UUID(int=7)


def _log(tmp_path: Path) -> PartitionLog:
    config = LogConfig(segment_bytes=64 * 1024 * 1024)
    return PartitionLog.open(tmp_path / "t-0", "t", 0, config, TOPIC_ID)


def _append(log: PartitionLog, records: int, value_bytes: int) -> None:
    buf = bytearray(build_batch([Record(-1, 1000, b"k", os.urandom(value_bytes))
                                 for _ in range(records)]))
    log.append_as_leader(buf, validate_produce_records(buf, 10**8), leader_epoch=1)


def _bytes(records: bytes | FileSlice) -> bytes:
    if isinstance(records, FileSlice):
        try:
            return records.read()
        finally:
            records.close()
    return records


@pytest.mark.parametrize("max_bytes", [10**8, 300_000, 1_000_000])
def test_large_reads_come_as_slices_of_the_bytes_read_would_give(
        tmp_path: Path, max_bytes: int) -> None:
    log = _log(tmp_path)
    for _ in range(12):
        _append(log, 100, 1000)  # batches of about 100 KiB
    for offset in (0, 100, 550):
        expected = log.read(offset, max_bytes, log.log_end_offset).records
        got = log.read_to_send(offset, max_bytes, log.log_end_offset)
        assert isinstance(got, FileSlice), (offset, max_bytes)
        assert _bytes(got) == expected
        # whole batches only, starting at the one holding the offset
        headers = list(iter_batch_headers(expected))
        assert sum(h.size for h in headers) == len(expected)
        assert headers[0].base_offset <= offset <= headers[0].last_offset
    # below the high watermark: the batch holding max_offset and later ones stay out
    expected = log.read(0, 10**8, 650).records
    got = log.read_to_send(0, 10**8, 650)
    assert _bytes(got) == expected
    assert list(iter_batch_headers(expected))[-1].last_offset < 650


def test_small_reads_and_many_small_batches_come_as_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _append(log, 10, 100)  # one small batch: below ZERO_COPY_MIN_BYTES
    got = log.read_to_send(0, 10**8, log.log_end_offset)
    assert isinstance(got, bytes) and len(got) < ZERO_COPY_MIN_BYTES
    assert got == log.read(0, 10**8, log.log_end_offset).records
    for _ in range(ZERO_COPY_MAX_BATCHES + 20):
        _append(log, 4, 1000)  # batches of about 4 KiB
    _append(log, 1, 10)
    # trimmed by max_bytes over more headers than the walk takes: one pread instead
    got = log.read_to_send(10, 200_000, log.log_end_offset)
    assert isinstance(got, bytes)
    assert got == log.read(10, 200_000, log.log_end_offset).records


def test_past_the_live_bound_reads_give_bytes(tmp_path: Path, monkeypatch) -> None:
    from odradek.storage import file_records

    log = _log(tmp_path)
    for _ in range(3):
        _append(log, 100, 1000)
    monkeypatch.setattr(file_records, "MAX_LIVE_SLICES", FileSlice.live + 1)
    first = log.read_to_send(0, 10**8, log.log_end_offset)
    assert isinstance(first, FileSlice)
    # the bound is reached while the first is held: the next read is bytes
    second = log.read_to_send(0, 10**8, log.log_end_offset)
    assert isinstance(second, bytes)
    assert second == _bytes(first)  # _bytes closes it: the bound frees again
    third = log.read_to_send(0, 10**8, log.log_end_offset)
    assert isinstance(third, FileSlice)
    third.close()
