"""Kafka framing and request/response headers, sans I/O.

A frame is a 4-byte big-endian size followed by that many bytes. A request
frame starts with the request header:

    api_key int16 | api_version int16 | correlation_id int32 |
    client_id nullable string (int16 length, -1 = null; legacy even in v2) |
    [v2 only] tagged fields (uvarint count, then uvarint tag, uvarint size, bytes)

A response frame starts with correlation_id int32 and, for header v1, an empty
tagged-field section (one 0x00 byte). `FrameDecoder` cuts frames out of a byte
stream and enforces `socket.request.max.bytes`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from . import api

_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class FrameTooLarge(Exception):
    pass


class MalformedRequest(Exception):
    pass


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts inside the frame


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedRequest("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def encode_uvarint(n: int) -> bytes:
    """An unsigned varint (KIP-482's compact lengths and tagged fields)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequest("truncated tagged field")
    return pos


def parse_request_header(frame: bytes | memoryview) -> RequestHeader:
    """Parse the header; the header version follows from the (key, version) pair.

    Raises MalformedRequest for a frame too short to hold a header. An unknown
    key or version is not an error here: the caller decides (ApiVersions gets an
    UNSUPPORTED_VERSION answer, anything else closes the connection).
    """
    if len(frame) < 10:
        raise MalformedRequest(f"request header needs at least 10 bytes, got {len(frame)}")
    api_key, api_version, correlation_id = _HDR.unpack_from(frame, 0)
    (client_len,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("truncated client_id")
        client_id = bytes(frame[pos : pos + client_len]).decode("utf-8", "replace")
        pos += client_len
    elif client_len != -1:
        raise MalformedRequest(f"bad client_id length {client_len}")
    if (
        api.is_supported(api_key, api_version) or api.is_controller_api(api_key, api_version)
    ) and api.request_header_version(
        api_key, api_version
    ) >= 2:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_response_frame(correlation_id: int, header_version: int, body: bytes) -> bytes:
    if header_version >= 1:
        return b"".join(
            (_I32.pack(len(body) + 5), _I32.pack(correlation_id), b"\x00", body)
        )
    return b"".join((_I32.pack(len(body) + 4), _I32.pack(correlation_id), body))


class FrameDecoder:
    """Accumulates bytes and yields whole frames (without the size prefix)."""

    __slots__ = ("_buf", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        n = len(buf)
        if n < 4:
            return frames
        # One copy per frame: a view's slice to bytes (bytes(buf[a:b]) copies twice).
        # The view is released before the buffer is resized.
        with memoryview(buf) as view:
            while n - pos >= 4:
                (size,) = _I32.unpack_from(buf, pos)
                if size < 0 or size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame of {size} bytes exceeds socket.request.max.bytes "
                        f"({self.max_frame_bytes})" if size >= 0
                        else f"negative frame size {size}"
                    )
                if n - pos - 4 < size:
                    break
                frames.append(view[pos + 4 : pos + 4 + size].tobytes())
                pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    @property
    def next_frame_bytes(self) -> int | None:
        """The whole size (prefix included) of the frame partly buffered, once its
        size prefix is in; None when the buffer holds less than a size prefix."""
        if len(self._buf) < 4:
            return None
        return 4 + int(_I32.unpack_from(self._buf, 0)[0])
