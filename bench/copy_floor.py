"""The kernel's share of one follower copy: CPU per MiB of each per-byte step.

    python bench/copy_floor.py

Loopback TCP send and receive (both ends in this process, as a leader and its
follower on one box), CRC32C (a follower checks each batch), pwrite and pread
against the page cache, and a user-space copy. Process CPU over 200 MiB per
step, three times; os.times() ticks at 10 ms, so 50 us/MiB is the resolution.
docs/benchmarks.md uses it to bound the replication CPU per record.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import threading
from collections.abc import Callable

from crc32c import crc32c

MIB = 1 << 20
N = 200


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _per_mib(step: Callable[[], None]) -> float:
    start = _cpu()
    step()
    return (_cpu() - start) / N * 1e6


def main() -> int:
    data = os.urandom(MIB)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    sender = socket.create_connection(server.getsockname())
    receiver, _ = server.accept()
    fd, path = tempfile.mkstemp()

    def tcp() -> None:
        def receive() -> None:
            view = memoryview(bytearray(MIB))
            left = N * MIB
            while left:
                left -= receiver.recv_into(view[: min(MIB, left)])

        t = threading.Thread(target=receive)
        t.start()
        for _ in range(N):
            sender.sendall(data)
        t.join()

    def crc() -> None:
        for _ in range(N):
            crc32c(data)

    def pwrite() -> None:
        for i in range(N):
            os.pwrite(fd, data, i * MIB)

    def pread() -> None:
        for i in range(N):
            os.pread(fd, MIB, i * MIB)

    def copy() -> None:
        for _ in range(N):
            bytearray(data)

    try:
        print(f"load average {os.getloadavg()[0]:.1f}")
        for name, step in [("loopback TCP send+receive", tcp), ("crc32c", crc),
                           ("pwrite (page cache)", pwrite), ("pread (page cache)", pread),
                           ("user-space copy", copy)]:
            runs = [_per_mib(step) for _ in range(3)]
            print(f"{name:26s} {statistics.median(runs):6.0f} us CPU per MiB  "
                  f"(runs {[round(r) for r in runs]})")
    finally:
        os.close(fd)
        os.unlink(path)
        for s in (sender, receiver, server):
            s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
