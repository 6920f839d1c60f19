"""A range of a segment's ``.log`` file handed to the network as it is, to be
sent with ``sendfile(2)`` instead of read into Python and written out again
(Kafka's zero-copy transfer of ``FileRecords``).

The leader's answers to its followers carry their records this way
(``handlers/replica_fetch.py``): each such byte was copied twice in user space
before (``pread`` into a new bytes object, then into the socket), which was a
tenth of an RF=3 cluster's CPU (docs/benchmarks.md).

Rules
-----
* A slice owns a duplicate of the file's descriptor, taken when the read is
  decided: it stays valid if the segment is closed, evicted from the open-file
  LRU (open_files.py) or deleted before the answer is written. ``close``
  releases it; so does dropping the last reference.
* The bytes a slice names are whole batches below the log end offset when it is
  made. A leader never rewrites them; a file shorter than the slice when it is
  sent (truncated meanwhile) is an ``OSError``: the connection is then closed,
  as the answer's size prefix can no longer be kept.
* ``send_to`` writes what the socket takes without blocking; the caller sends
  the rest with ``read(start)`` through its transport, in order.
* At most ``MAX_LIVE_SLICES`` exist at once in a process (``FileSlice.live``):
  a fetch asking for gigabytes over many partitions cannot turn into as many
  descriptors. Past it, and when no descriptor is free, reads give bytes.
"""

from __future__ import annotations

import errno
import os

__all__ = ["MAX_LIVE_SLICES", "ZERO_COPY_MIN_BYTES", "FileSlice"]

# Below this a pread and one more copy cost less than the descriptor's dup and close.
ZERO_COPY_MIN_BYTES = 64 * 1024
# Slices (each a descriptor) a process holds at once, at most.
MAX_LIVE_SLICES = 1024


class FileSlice:
    __slots__ = ("_fd", "position", "size")

    live = 0  # slices not yet closed, in this process

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = fd  # owned: closed by close()
        self.position = position
        self.size = size
        FileSlice.live += 1

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice(fd={self._fd}, position={self.position}, size={self.size})"

    def read(self, start: int = 0) -> bytes:
        """The slice's bytes from `start` on (a copy, for a transport that cannot
        take a file: TLS, or a write buffer already holding bytes)."""
        want = self.size - start
        data = os.pread(self._fd, want, self.position + start)
        if len(data) != want:
            raise OSError(errno.EIO, f"segment file shrank under an answer: read {len(data)} "
                          f"of {want} bytes at {self.position + start}")
        return data

    def send_to(self, sock_fd: int, start: int = 0) -> int:
        """Send from `start` on with sendfile(2) on the non-blocking socket
        `sock_fd` until it would block; returns how many bytes went out."""
        sent = start
        while sent < self.size:
            try:
                n = os.sendfile(sock_fd, self._fd, self.position + sent, self.size - sent)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            if n == 0:
                raise OSError(errno.EIO, f"segment file shrank under an answer: sent "
                              f"{sent} of {self.size} bytes")
            sent += n
        return sent - start

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            FileSlice.live -= 1
            os.close(fd)

    def __del__(self) -> None:
        self.close()
