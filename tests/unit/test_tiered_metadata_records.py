import uuid

import pytest

from odradek.tiered.metadata_records import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    b64_to_uuid,
    decode_value,
    encode_value,
    metadata_partition,
    replay,
    uuid_to_b64,
)

TIP = TopicIdPartition(uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF), "events", 3)
SEG = RemoteLogSegmentId(TIP, uuid.UUID(int=42))


def test_segment_metadata_round_trips() -> None:
    rec = RemoteLogSegmentMetadata(SEG, 100, 199, 1, 1700000000000, 1700000001000,
                                   {0: 100, 2: 150}, 4096)
    assert decode_value(encode_value(rec)) == rec
    flagged = RemoteLogSegmentMetadata(SEG, 0, 9, 2, 5, 6, {}, 10,
                                       RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                                       b"x", txn_index_empty=True)
    assert decode_value(encode_value(flagged)) == flagged


def test_update_and_partition_delete_round_trip() -> None:
    upd = RemoteLogSegmentMetadataUpdate(SEG, 1, 7, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
    assert decode_value(encode_value(upd)) == upd
    pdel = RemotePartitionDeleteMetadata(TIP, 1, 8,
                                         RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)
    assert decode_value(encode_value(pdel)) == pdel


def test_frame_starts_with_frame_version_key_and_version() -> None:
    upd = RemoteLogSegmentMetadataUpdate(SEG, 1, 7, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    assert encode_value(upd)[:3] == bytes([1, 1, 0])


def test_applying_an_update() -> None:
    rec = RemoteLogSegmentMetadata(SEG, 0, 9, 1, 5, 6, {0: 0}, 10)
    upd = RemoteLogSegmentMetadataUpdate(SEG, 2, 9, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
    done = rec.updated(upd)
    assert done.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    assert (done.broker_id, done.event_timestamp_ms, done.start_offset) == (2, 9, 0)


def test_malformed_values_raise_value_error() -> None:
    rec = RemoteLogSegmentMetadata(SEG, 0, 9, 1, 5, 6, {0: 0}, 10)
    data = encode_value(rec)
    with pytest.raises(ValueError):
        decode_value(data[:20])
    with pytest.raises(ValueError):
        decode_value(b"\x02\x00\x00")
    with pytest.raises(ValueError):
        decode_value(b"\x01\x09\x00")


def test_ids_and_partitioning() -> None:
    u = uuid.uuid4()
    assert b64_to_uuid(uuid_to_b64(u)) == u
    assert len(uuid_to_b64(u)) == 22
    assert 0 <= metadata_partition(u, 5, 50) < 50
    assert metadata_partition(u, 5, 50) == metadata_partition(u, 5, 50)


def test_replay_keeps_finished_segments_until_their_deletion() -> None:
    def seg(n: int, start: int) -> RemoteLogSegmentMetadata:
        return RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.UUID(int=n)), start,
                                        start + 9, 1, 0, 0, {0: start}, 100 + n)

    def upd(n: int, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
        return RemoteLogSegmentMetadataUpdate(RemoteLogSegmentId(TIP, uuid.UUID(int=n)), 1, 0,
                                              state)

    S = RemoteLogSegmentState
    events = [seg(2, 10), seg(1, 0), upd(1, S.COPY_SEGMENT_FINISHED),
              upd(2, S.COPY_SEGMENT_FINISHED), seg(3, 20),  # 3: a copy cut short
              upd(9, S.COPY_SEGMENT_FINISHED)]  # unknown: ignored
    got = replay(events)
    assert [(m.start_offset, m.segment_size_in_bytes) for m in got[TIP]] == [(0, 101), (10, 102)]
    got = replay([*events, upd(1, S.DELETE_SEGMENT_STARTED)])
    assert [m.start_offset for m in got[TIP]] == [10]
    deleted = RemotePartitionDeleteMetadata(TIP, 1, 0,
                                            RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
    assert replay([*events, deleted]) == {}
