"""The receiving end of a `KafkaChannel`: size-prefixed response frames read
with asyncio's BufferedProtocol, so that a large frame (a follower's Fetch
answer) lands in its own buffer straight from the socket.

Theory of operation
-------------------
Frames are a 4-byte big-endian size and that many bytes. The transport asks
`get_buffer` where to put the next bytes:

* between frames, a fixed scratch buffer (`SCRATCH_BYTES`): small answers,
  often several in one read, are cut out of it (one copy each, small);
* once a size prefix is read and the frame does not fit in what the scratch
  already holds, a bytearray of exactly that size: what the scratch had of it
  is copied in, the rest arrives there directly. The frame is handed over as
  that bytearray: no copy of the body is made in Python (StreamReader made
  three: its buffer, its growth, `readexactly`).

Rules: a frame size below 4 or above `max_frame_bytes` closes the connection
(a bound on memory); at most one reader waits (`KafkaChannel` holds a lock per
request); a lost connection fails the waiter and every later wait.
Writes go straight to the transport; `drain` waits while the transport has
paused writing (its high-water mark).
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import cast

SCRATCH_BYTES = 64 * 1024
_SIZE = struct.Struct(">i")


class FrameError(ConnectionError):
    """The peer sent a frame size out of bounds; the connection is closed."""


class FrameProtocol(asyncio.BufferedProtocol):
    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_len = 0
        self._frame: bytearray | None = None  # the frame being filled in place
        self._filled = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._error: BaseException | None = None

    # -- asyncio callbacks ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        return memoryview(self._scratch)[self._scratch_len:]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._filled += nbytes
            if self._filled == len(frame):
                self._frame = None
                self._deliver(frame)
            return
        self._scratch_len += nbytes
        self._split_scratch()

    def eof_received(self) -> bool:
        return False  # close

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else ConnectionResetError("connection closed"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_drain()

    # -- for the channel ----------------------------------------------------------------
    async def drain(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._paused:
            return
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await self._drain_waiter
        finally:
            self._drain_waiter = None

    async def next_frame(self) -> bytes | bytearray:
        """The next whole frame, without its size prefix."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            assert self._waiter is None, "one reader at a time"
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    # -- internals -----------------------------------------------------------------------
    def _split_scratch(self) -> None:
        buf, n, pos = self._scratch, self._scratch_len, 0
        while n - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 4 or size > self.max_frame_bytes:
                self._scratch_len = 0
                self._fail(FrameError(f"bad response size {size}"))
                if self.transport is not None:
                    self.transport.close()
                return
            have = n - pos - 4
            if have >= size:
                self._deliver(bytes(buf[pos + 4:pos + 4 + size]))
                pos += 4 + size
                continue
            # a frame longer than what is here: it gets its own buffer
            frame = bytearray(size)
            frame[:have] = memoryview(buf)[pos + 4:n]
            self._frame, self._filled = frame, have
            pos = n
        rest = n - pos
        if rest and pos:
            buf[:rest] = buf[pos:n]  # a partial size prefix (< 4 bytes) moves to the front
        self._scratch_len = rest

    def _deliver(self, frame: bytes | bytearray) -> None:
        self._frames.append(frame)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        for waiter in (self._waiter, self._drain_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_exception(self._error)

    def _wake_drain(self) -> None:
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
