"""The channel's frame reader: frames cut out of any split of the byte stream,
a large frame filled in place, bounds on the size prefix."""

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.frame_protocol import SCRATCH_BYTES, FrameError, FrameProtocol


class FakeTransport:
    closed = False

    def close(self) -> None:
        self.closed = True


def feed(proto: FrameProtocol, data: bytes, max_read: int) -> None:
    """What the transport does: recv_into get_buffer(), at most max_read at a time."""
    pos = 0
    while pos < len(data):
        buf = proto.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), max_read, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        proto.buffer_updated(n)
        pos += n


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.binary(min_size=4, max_size=50),
                          st.integers(SCRATCH_BYTES - 10, 3 * SCRATCH_BYTES).map(
                              lambda n: bytes([n % 251]) * n)), min_size=1, max_size=6),
       st.integers(1, 2 * SCRATCH_BYTES))
def test_frames_come_out_whole_whatever_the_reads(bodies, max_read):
    proto = FrameProtocol(max_frame_bytes=1 << 22)
    proto.connection_made(FakeTransport())  # type: ignore[arg-type]
    feed(proto, b"".join(frame(b) for b in bodies), max_read)

    async def read_all() -> list[bytes]:
        return [bytes(await proto.next_frame()) for _ in bodies]

    assert asyncio.run(read_all()) == bodies


def test_a_large_frame_is_filled_in_its_own_buffer():
    proto = FrameProtocol(max_frame_bytes=1 << 22)
    proto.connection_made(FakeTransport())  # type: ignore[arg-type]
    body = bytes(range(256)) * 1024
    feed(proto, frame(body)[:1000], 1000)
    view = proto.get_buffer(-1)
    assert len(view) == len(body) - 996  # straight into the frame, exactly the rest
    feed(proto, frame(body)[1000:], 1 << 20)
    got = asyncio.run(proto.next_frame())
    assert type(got) is bytearray and got == body


@pytest.mark.parametrize("size", [-1, 3, (1 << 20) + 1])
def test_a_size_out_of_bounds_closes_and_fails_the_reader(size):
    proto = FrameProtocol(max_frame_bytes=1 << 20)
    transport = FakeTransport()
    proto.connection_made(transport)  # type: ignore[arg-type]
    feed(proto, struct.pack(">i", size) + b"xxxx", 100)
    assert transport.closed
    with pytest.raises(FrameError):
        asyncio.run(proto.next_frame())


def test_a_lost_connection_fails_the_waiting_reader():
    async def scenario() -> None:
        proto = FrameProtocol(max_frame_bytes=1 << 20)
        proto.connection_made(FakeTransport())  # type: ignore[arg-type]
        reader = asyncio.ensure_future(proto.next_frame())
        await asyncio.sleep(0)
        proto.connection_lost(None)
        with pytest.raises(ConnectionResetError):
            await reader

    asyncio.run(scenario())
