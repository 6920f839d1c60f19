import struct

from odradek.tiered.remote_reader import index_position


def _index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def test_index_position_is_the_last_entry_at_or_below() -> None:
    index = _index([(10, 4000), (25, 9000), (40, 15000)])
    assert index_position(index, 0) == 0
    assert index_position(index, 9) == 0
    assert index_position(index, 10) == 4000
    assert index_position(index, 24) == 4000
    assert index_position(index, 39) == 9000
    assert index_position(index, 1000) == 15000
    assert index_position(b"", 5) == 0
