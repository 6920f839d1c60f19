"""Compression of a record batch's records blob: gzip, snappy, lz4, zstd (cramjam).

Compression framing: gzip is RFC 1952; snappy is written in the xerial framing
Kafka's Java client uses (``b"\\x82SNAPPY\\x00"``, int32 version 1, int32
compatible version 1, then ``[int32 length, raw snappy block]*``) and read in
xerial, raw or the official snappy framing format (librdkafka sends raw or
xerial); lz4 is the LZ4 frame format with independent blocks (Kafka's reader
decodes each block on its own); zstd is a zstd frame.

Decompression is bounded (``max_decompressed_bytes``): a hostile 1 MB zstd batch
can expand to gigabytes. Data that would expand beyond the bound is refused with
MESSAGE_TOO_LARGE (the batch is larger than the broker accepts; the Java
producer splits such a batch and retries, librdkafka fails it) before more than the bound is allocated (cramjam decodes
into a fixed buffer and stops when it is full); malformed data is
CORRUPT_MESSAGE at once, without growing the buffer first. Imports
batch_format.py only.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.protocol.batch_format import (
    CORRUPT_MESSAGE,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    INT32_STRUCT,
    MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
    Compression,
    InvalidRecords,
)

# -- compression ------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_BYTES = 32 * 1024
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"

# LZ4 frame: magic, FLG (version 01, independent blocks, no checksums), BD (64 KiB
# blocks), HC = second byte of xxh32(FLG BD). The three descriptor bytes are fixed.
_LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_UNCOMPRESSED_FLAG = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"
_UINT32_LE = struct.Struct("<I")
_CODEC_ERRORS = (cramjam.DecompressionError, ValueError, OverflowError, OSError)
# cramjam's error when the output buffer is full before the stream ends
_BUFFER_FULL = "failed to write whole buffer"
_FIRST_BUFFER_BYTES = 64 * 1024
_FIRST_BUFFER_RATIO = 8  # first guess: 8x the compressed size
_BUFFER_GROWTH = 4


def compress(data: bytes | bytearray | memoryview, codec: int) -> bytes:
    """Compress a records blob the way Kafka's Java client frames it."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
            out += INT32_STRUCT.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        out = bytearray(_LZ4_FRAME_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _LZ4_BLOCK_BYTES):
            chunk = view[start : start + _LZ4_BLOCK_BYTES]
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
            if len(block) >= len(chunk):
                out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_FLAG)
                out += chunk
            else:
                out += _UINT32_LE.pack(len(block))
                out += block
        out += _LZ4_END_MARK
        return bytes(out)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidRecords(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {codec}")


def decompress(
    data: bytes | bytearray | memoryview,
    codec: int,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> bytes | bytearray:
    """Decompress a records blob: CORRUPT_MESSAGE if it is malformed,
    MESSAGE_TOO_LARGE if it expands beyond ``max_decompressed_bytes``."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec > Compression.ZSTD or codec < 0:
        raise InvalidRecords(UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec id {codec}")
    try:
        if codec == Compression.SNAPPY:
            return _snappy_decompress(memoryview(data), max_decompressed_bytes)
        module = {
            Compression.GZIP: cramjam.gzip,
            Compression.LZ4: cramjam.lz4,
            Compression.ZSTD: cramjam.zstd,
        }[Compression(codec)]
        return _bounded_decompress(module, data, max_decompressed_bytes)
    except InvalidRecords:
        raise
    except _CODEC_ERRORS as exc:
        raise InvalidRecords(CORRUPT_MESSAGE, f"cannot decompress records: {exc}") from exc


def _bounded_decompress(module: object, data: bytes | bytearray | memoryview,
                        bound: int) -> bytearray:
    """Decompress into a growing buffer that may never exceed ``bound`` bytes.

    Only a full buffer makes it grow; any other codec error is malformed data."""
    capacity = min(bound, max(_FIRST_BUFFER_BYTES, len(data) * _FIRST_BUFFER_RATIO))
    while True:
        out = bytearray(capacity)
        try:
            n = module.decompress_into(data, out)  # type: ignore[attr-defined]
        except cramjam.DecompressionError as exc:
            if _BUFFER_FULL not in str(exc):
                raise
            n = -1  # more to come
        if n >= 0:
            del out[n:]  # shrinks in place (realloc): no second copy of the data
            return out
        if capacity >= bound:
            raise _too_large(bound)
        del out
        capacity = min(bound, capacity * _BUFFER_GROWTH)


def _too_large(bound: int) -> InvalidRecords:
    return InvalidRecords(MESSAGE_TOO_LARGE,
                          f"compressed records expand beyond {bound} bytes")


def _snappy_decompress(view: memoryview, bound: int) -> bytes | bytearray:
    if view[: len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
        out = bytearray()
        pos = len(_XERIAL_HEADER)
        end = len(view)
        while pos < end:
            if end - pos < 4:
                raise InvalidRecords(CORRUPT_MESSAGE, "truncated xerial snappy block length")
            (length,) = INT32_STRUCT.unpack_from(view, pos)
            pos += 4
            if length < 0 or pos + length > end:
                raise InvalidRecords(CORRUPT_MESSAGE, "truncated xerial snappy block")
            block = view[pos : pos + length]
            if len(out) + cramjam.snappy.decompress_raw_len(block) > bound:
                raise _too_large(bound)
            out += cramjam.snappy.decompress_raw(block)
            pos += length
        return bytes(out)
    if view[: len(_SNAPPY_FRAMED_MAGIC)] == _SNAPPY_FRAMED_MAGIC:
        return _bounded_decompress(cramjam.snappy, view, bound)
    if cramjam.snappy.decompress_raw_len(view) > bound:
        raise _too_large(bound)
    return bytes(cramjam.snappy.decompress_raw(view))


