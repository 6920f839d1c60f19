"""Record batch v2: build -> validate -> assign offsets -> decode, and hostile input."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.record_scan import check_records
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
    UNSUPPORTED_FOR_MESSAGE_FORMAT,
    Compression,
    ControlRecordType,
    InvalidRecords,
    Record,
    TimestampType,
    assign_offsets,
    batch_crc_ok,
    build_batch,
    build_control_batch,
    compress,
    decode_batch_records,
    decompress,
    decompression_bound,
    iter_batch_headers,
    parse_batch_header,
    parse_control_record,
    validate_produce_records,
)

MAX_BYTES = 10 * 1024 * 1024


def _records(n: int, base_ts: int = 1_700_000_000_000) -> list[Record]:
    return [
        Record(i, base_ts + i, f"key-{i}".encode(), f"value-{i}".encode() * 3, (("h", b"x"),))
        for i in range(n)
    ]


def _recompute_crc(buf: bytearray, position: int = 0) -> None:
    header = parse_batch_header(buf, position)
    crc = crc32c(bytes(buf[position + ATTRIBUTES_OFFSET : position + header.size]))
    struct.pack_into(">I", buf, position + 17, crc)


# -- header layout --------------------------------------------------------------


def test_header_fields_are_at_kafka_byte_positions() -> None:
    batch = build_batch(
        _records(3),
        base_offset=42,
        producer_id=7,
        producer_epoch=2,
        base_sequence=11,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    assert struct.unpack_from(">q", batch, 0)[0] == 42
    assert struct.unpack_from(">i", batch, 8)[0] == len(batch) - 12
    assert struct.unpack_from(">i", batch, 12)[0] == 5
    assert batch[16] == 2
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])
    assert struct.unpack_from(">h", batch, 21)[0] == 0x10  # transactional
    assert struct.unpack_from(">i", batch, 23)[0] == 2  # lastOffsetDelta
    assert struct.unpack_from(">q", batch, 43)[0] == 7
    assert struct.unpack_from(">h", batch, 51)[0] == 2
    assert struct.unpack_from(">i", batch, 53)[0] == 11
    assert struct.unpack_from(">i", batch, 57)[0] == 3
    header = parse_batch_header(batch)
    assert header.size == len(batch)
    assert header.last_offset == 44 and header.next_offset == 45
    assert header.is_transactional and not header.is_control


def test_single_record_encoding_matches_kafka_layout() -> None:
    batch = build_batch([Record(0, 1000, b"k", b"vv", (("a", None),))])
    # length, attributes, tsDelta 0, offsetDelta 0, keyLen 1 (zigzag 2), 'k',
    # valueLen 2 (zigzag 4), 'vv', 1 header (2): keyLen 1 (2) 'a', valueLen -1 (1)
    body = bytes([0, 0, 0, 2]) + b"k" + bytes([4]) + b"vv" + bytes([2, 2]) + b"a" + bytes([1])
    assert batch[BATCH_OVERHEAD:] == bytes([len(body) * 2]) + body


# -- round trips ------------------------------------------------------------------

header_keys = st.text(max_size=8)
record_strategy = st.builds(
    lambda key, value, headers, ts: (key, value, tuple(headers), ts),
    st.one_of(st.none(), st.binary(max_size=64)),
    st.one_of(st.none(), st.binary(max_size=256)),
    st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=16))), max_size=3),
    st.integers(min_value=0, max_value=2**41),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    specs=st.lists(record_strategy, min_size=1, max_size=20),
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(min_value=0, max_value=2**40),
    producer_id=st.integers(min_value=-1, max_value=2**40),
)
def test_build_validate_decode_round_trip(
    specs: list, codec: Compression, base_offset: int, producer_id: int
) -> None:
    records = [
        Record(base_offset + i, ts, key, value, headers)
        for i, (key, value, headers, ts) in enumerate(specs)
    ]
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
    )
    [header] = validate_produce_records(batch, MAX_BYTES)
    assert header.compression == codec
    assert header.records_count == len(records)
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert decode_batch_records(batch, header) == records


@settings(max_examples=60, deadline=None)
@given(
    n_batches=st.integers(min_value=1, max_value=5),
    first_offset=st.integers(min_value=0, max_value=2**50),
    epoch=st.integers(min_value=0, max_value=2**31 - 1),
    append_time=st.one_of(st.none(), st.integers(min_value=0, max_value=2**42)),
    codec=st.sampled_from(list(Compression)),
)
def test_assign_offsets_patches_in_place_and_keeps_crc_valid(
    n_batches: int, first_offset: int, epoch: int, append_time: int | None, codec: Compression
) -> None:
    sizes = [(i % 3) + 1 for i in range(n_batches)]
    buf = bytearray(b"".join(build_batch(_records(n), compression=codec) for n in sizes))
    headers = validate_produce_records(buf, MAX_BYTES)
    last = assign_offsets(buf, headers, first_offset, epoch, append_time)
    assert last == first_offset + sum(sizes) - 1
    # The patched buffer is still valid and the returned headers describe it.
    reparsed = validate_produce_records(buf, MAX_BYTES)
    assert reparsed == headers
    expected_base = first_offset
    for header, n in zip(headers, sizes):
        assert header.base_offset == expected_base
        assert header.partition_leader_epoch == epoch
        expected_base += n
        decoded = decode_batch_records(buf, header)
        assert [r.offset for r in decoded] == list(range(header.base_offset, header.next_offset))
        if append_time is None:
            assert header.timestamp_type == TimestampType.CREATE_TIME
        else:
            assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
            assert header.max_timestamp == append_time
            assert all(r.timestamp == append_time for r in decoded)


def test_assign_offsets_without_append_time_leaves_crc_untouched() -> None:
    batch = build_batch(_records(4))
    buf = bytearray(batch)
    headers = validate_produce_records(buf, MAX_BYTES)
    assign_offsets(buf, headers, 1000, 9, None)
    assert buf[ATTRIBUTES_OFFSET:] == batch[ATTRIBUTES_OFFSET:]
    assert buf[:8] != batch[:8]


def test_records_without_offsets_are_numbered_sequentially() -> None:
    batch = build_batch([Record(value=b"a"), Record(value=b"b")], base_offset=10)
    header = parse_batch_header(batch)
    assert [r.offset for r in decode_batch_records(batch, header)] == [10, 11]


def test_build_keeps_offset_gaps_and_rejects_disorder() -> None:
    batch = build_batch([Record(5, 1, None, b"a"), Record(9, 2, None, b"b")], base_offset=5)
    header = parse_batch_header(batch)
    assert header.last_offset_delta == 4 and header.records_count == 2
    assert [r.offset for r in decode_batch_records(batch, header)] == [5, 9]
    with pytest.raises(ValueError):
        build_batch([Record(9, 1, None, b"a"), Record(5, 2, None, b"b")], base_offset=5)


def test_negative_timestamp_deltas_round_trip() -> None:
    records = [Record(0, 5000, None, b"a"), Record(1, 1000, None, b"b")]
    batch = build_batch(records)
    header = parse_batch_header(batch)
    assert header.base_timestamp == 5000 and header.max_timestamp == 5000
    assert decode_batch_records(batch, header) == records


def test_control_batch_round_trip() -> None:
    batch = build_control_batch("COMMIT", 77, 3, 12, base_offset=40, timestamp_ms=999)
    header = parse_batch_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_offset) == (77, 3, 40)
    [record] = decode_batch_records(batch, header)
    assert record.key == b"\x00\x00\x00\x01"
    assert record.value == b"\x00\x00\x00\x00\x00\x0c"
    assert parse_control_record(record) == (ControlRecordType.COMMIT, 12)
    abort = build_control_batch("ABORT", 1, 0, 0)
    [record] = decode_batch_records(abort, parse_batch_header(abort))
    assert parse_control_record(record)[0] == ControlRecordType.ABORT


# -- compression framing -------------------------------------------------------------


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_compress_round_trips_multi_block_payloads(codec: Compression) -> None:
    data = bytes(range(256)) * 2000  # > 64 KiB: several lz4 / xerial blocks
    assert decompress(compress(data, codec), codec) == data


def test_snappy_is_written_in_xerial_framing_and_all_snappy_framings_are_read() -> None:
    data = b"hello snappy " * 5000
    xerial = compress(data, Compression.SNAPPY)
    assert xerial.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert decompress(xerial, Compression.SNAPPY) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(raw, Compression.SNAPPY) == data
    framed = bytes(cramjam.snappy.compress(data))
    assert decompress(framed, Compression.SNAPPY) == data


def test_lz4_is_a_standard_frame_with_independent_blocks() -> None:
    data = b"lz4 " * 40000
    frame = compress(data, Compression.LZ4)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20  # FLG block-independence bit, required by Kafka's reader
    assert bytes(cramjam.lz4.decompress(frame)) == data
    # Frames from other writers (linked blocks, checksums) decode too.
    assert decompress(bytes(cramjam.lz4.compress(data)), Compression.LZ4) == data


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompression_beyond_the_bound_is_message_too_large(codec: Compression) -> None:
    data = b"\x00" * 2_000_000
    bomb = compress(data, codec)
    with pytest.raises(InvalidRecords) as info:
        decompress(bomb, codec, max_decompressed_bytes=len(data) - 1)
    assert info.value.error_code == MESSAGE_TOO_LARGE
    assert decompress(bomb, codec, max_decompressed_bytes=len(data)) == data  # exactly fits


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_malformed_compressed_data_is_refused_without_growing_a_buffer(
        codec: Compression) -> None:
    import tracemalloc

    damaged = bytearray(compress(bytes(range(256)) * 4000, codec))
    damaged[len(damaged) // 2:] = b"\xa5" * (len(damaged) - len(damaged) // 2)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecords) as info:
            decompress(bytes(damaged), codec, max_decompressed_bytes=256 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.error_code == CORRUPT_MESSAGE
    assert peak < 4 * 1024 * 1024  # the first buffer only, not 256 MB


def test_the_decompression_bound_is_a_multiple_of_the_batch_with_max_message_bytes_as_floor():
    assert decompression_bound(100, 1_048_588) == 1_048_588  # an uncompressed batch's worth
    assert decompression_bound(100_000, 1_048_588) == 100_000 * 64
    assert decompression_bound(10_000_000, 1_048_588) == 256 * 1024 * 1024  # the hard cap


# -- hostile input ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_any_bit_flip_after_the_crc_field_is_corrupt_message(
    data: st.DataObject, codec: Compression
) -> None:
    batch = bytearray(build_batch(_records(3), compression=codec))
    bit = data.draw(st.integers(min_value=ATTRIBUTES_OFFSET * 8, max_value=len(batch) * 8 - 1))
    batch[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    # A flip in the compression bits may name an unknown codec; every other flip
    # must be caught by the CRC.
    assert info.value.error_code in (CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_any_bit_flip_in_the_crc_field_is_corrupt_message(data: st.DataObject) -> None:
    batch = bytearray(build_batch(_records(2)))
    bit = data.draw(st.integers(min_value=17 * 8, max_value=21 * 8 - 1))
    batch[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == CORRUPT_MESSAGE


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_truncated_buffers_are_corrupt_message(data: st.DataObject) -> None:
    batch = build_batch(_records(3)) + build_batch(_records(2))
    cut = data.draw(st.integers(min_value=1, max_value=len(batch) - 1))
    if cut == len(build_batch(_records(3))):
        cut -= 1  # a cut exactly between batches leaves valid data
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch[:cut], MAX_BYTES)
    assert info.value.error_code == CORRUPT_MESSAGE
    # The tolerant walker stops at the partial batch instead.
    assert all(h.position + h.size <= cut for h in iter_batch_headers(batch[:cut]))


@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(min_size=0, max_size=300))
def test_arbitrary_bytes_never_escape_as_other_exceptions(garbage: bytes) -> None:
    try:
        headers = validate_produce_records(garbage, MAX_BYTES)
    except InvalidRecords:
        return
    for header in headers:
        try:
            decode_batch_records(garbage, header)
        except InvalidRecords:
            pass


def test_batch_larger_than_max_message_bytes_is_message_too_large() -> None:
    batch = build_batch(_records(10))
    validate_produce_records(batch, len(batch))
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, len(batch) - 1)
    assert info.value.error_code == MESSAGE_TOO_LARGE


def test_old_magic_is_unsupported_for_message_format() -> None:
    batch = bytearray(build_batch(_records(1)))
    batch[16] = 1
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == UNSUPPORTED_FOR_MESSAGE_FORMAT
    batch[16] = 3
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == CORRUPT_MESSAGE


def test_unknown_codec_is_unsupported_compression_type() -> None:
    batch = bytearray(build_batch(_records(1)))
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, 5)
    _recompute_crc(batch)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize(
    ("field_offset", "fmt", "value"),
    [
        (57, ">i", 0),  # recordsCount 0
        (57, ">i", -1),  # negative count
        (23, ">i", 7),  # lastOffsetDelta != count - 1
    ],
)
def test_inconsistent_header_counts_are_invalid_record(
    field_offset: int, fmt: str, value: int
) -> None:
    batch = bytearray(build_batch(_records(2)))
    struct.pack_into(fmt, batch, field_offset, value)
    _recompute_crc(batch)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == INVALID_RECORD


def test_clients_cannot_write_control_batches() -> None:
    batch = build_control_batch("ABORT", 5, 0, 1)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == INVALID_RECORD
    assert validate_produce_records(batch, MAX_BYTES, allow_control=True)


def test_idempotent_batch_without_sequence_is_invalid_record() -> None:
    batch = build_batch(_records(1), producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == INVALID_RECORD


def test_empty_produce_data_is_invalid_record() -> None:
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(b"", MAX_BYTES)
    assert info.value.error_code == INVALID_RECORD


def test_too_small_batch_length_is_corrupt_message() -> None:
    batch = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", batch, 8, 10)
    with pytest.raises(InvalidRecords) as info:
        validate_produce_records(batch, MAX_BYTES)
    assert info.value.error_code == CORRUPT_MESSAGE
    assert list(iter_batch_headers(batch)) == []


def test_decode_rejects_record_lengths_running_past_the_batch() -> None:
    batch = bytearray(build_batch(_records(1)))
    batch[BATCH_OVERHEAD] = 0x7E  # record length 63, far past the end
    header = parse_batch_header(batch)
    with pytest.raises(InvalidRecords) as info:
        decode_batch_records(batch, header)
    assert info.value.error_code == CORRUPT_MESSAGE


def test_crc_helper_and_header_walk() -> None:
    buf = build_batch(_records(1)) + build_batch(_records(2), base_offset=1)
    headers = list(iter_batch_headers(buf))
    assert [h.base_offset for h in headers] == [0, 1]
    assert headers[1].position == headers[0].size
    assert all(batch_crc_ok(buf, h) for h in headers)
    with pytest.raises(InvalidRecords):
        parse_batch_header(buf[:60])


# -- records behind a valid CRC (the fuzzer's find: such batches were written) ------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), codec=st.sampled_from(list(Compression)))
def test_check_records_refuses_exactly_what_does_not_decode(
    data: st.DataObject, codec: Compression
) -> None:
    """Damage after the CRC'd header fields, with the CRC made right again: produce's
    record check (Kafka's LogValidator) and the decoder dump-log --verify uses agree."""
    batch = bytearray(build_batch(_records(4), compression=codec))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        bit = data.draw(st.integers(min_value=BATCH_OVERHEAD * 8, max_value=len(batch) * 8 - 1))
        batch[bit // 8] ^= 1 << (bit % 8)
    _recompute_crc(batch)
    [header] = validate_produce_records(batch, MAX_BYTES)
    try:
        decoded = decode_batch_records(batch, header)
    except InvalidRecords:
        decoded = None
    if decoded is None:
        with pytest.raises(InvalidRecords) as info:
            check_records(batch, header)
        assert info.value.error_code == CORRUPT_MESSAGE
    else:
        assert check_records(batch, header) == [i for i, r in enumerate(decoded) if r.key is None]


def _wide_records(n: int) -> list[Record]:
    """Records whose lengths and deltas take one, two and three varint bytes: keys of
    0-99 bytes or null, values of up to 9,000 bytes or null, headers on some, offset
    deltas past 64, timestamp deltas past 8,192."""
    return [
        Record(
            i,
            1_700_000_000_000 + i * 150,
            None if i % 5 == 0 else bytes(i % 100),
            None if i % 7 == 3 else bytes((i * 131) % 9000),
            (("k", b"v" * (i % 70)),) if i % 3 == 0 else (),
        )
        for i in range(n)
    ]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_check_records_agrees_with_the_decoder_on_multi_byte_varints(
    data: st.DataObject,
) -> None:
    """The produce check reads one- and two-byte varints inline: on records whose
    lengths and deltas need one to three bytes, damaged or not, it refuses exactly
    what the decoder refuses and finds the same keyless records."""
    batch = bytearray(build_batch(_wide_records(data.draw(st.integers(1, 120)))))
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
        bit = data.draw(st.integers(min_value=BATCH_OVERHEAD * 8, max_value=len(batch) * 8 - 1))
        batch[bit // 8] ^= 1 << (bit % 8)
    _recompute_crc(batch)
    [header] = validate_produce_records(batch, MAX_BYTES)
    try:
        decoded = decode_batch_records(batch, header)
    except InvalidRecords:
        decoded = None
    if decoded is None:
        with pytest.raises(InvalidRecords) as info:
            check_records(batch, header)
        assert info.value.error_code == CORRUPT_MESSAGE
    else:
        assert check_records(batch, header) == [i for i, r in enumerate(decoded) if r.key is None]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_garbage_compressed_records_with_a_valid_crc_are_corrupt_message(
    codec: Compression,
) -> None:
    batch = bytearray(build_batch(_records(4), compression=codec))
    batch[BATCH_OVERHEAD:] = bytes(range(256))[: len(batch) - BATCH_OVERHEAD]
    _recompute_crc(batch)
    [header] = validate_produce_records(batch, MAX_BYTES)
    with pytest.raises(InvalidRecords) as info:
        check_records(batch, header)
    assert info.value.error_code == CORRUPT_MESSAGE


def test_record_count_above_the_records_present_is_corrupt_message() -> None:
    batch = bytearray(build_batch(_records(2)))
    struct.pack_into(">i", batch, 57, 3)  # recordsCount
    struct.pack_into(">i", batch, 23, 2)  # lastOffsetDelta, kept consistent
    _recompute_crc(batch)
    [header] = validate_produce_records(batch, MAX_BYTES)
    with pytest.raises(InvalidRecords, match="past the end"):
        check_records(batch, header)
