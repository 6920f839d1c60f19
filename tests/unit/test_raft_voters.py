"""KIP-853 voter records: Kafka's encoding round-trips, hostile bytes are refused,
and the voter history follows appends and truncations."""

from __future__ import annotations

import pytest

from odradek.raft.config import InvalidVoters, VoterAddress, VoterSet
from odradek.raft.voters import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    VoterHistory,
    decode_kraft_version,
    decode_voters,
    encode_kraft_version,
    encode_voters,
)

DIR1 = "J8aAPcfLQt2bqs1JT_rMgQ"
DIR2 = "b3w6nfvIR_Gq3a6sIoXJzw"


def test_voters_record_round_trips() -> None:
    voters = VoterSet(
        frozenset({1, 2}),
        {1: VoterAddress(1, "127.0.0.1", 9093), 2: VoterAddress(2, "::1", 19093, "CTRL")},
        {1: DIR1, 2: DIR2},
    )
    raw = encode_voters(voters)
    # version 0, two voters (compact array length 3), voter 1 first
    assert raw[:3] == b"\x00\x00\x03" and raw[3:7] == b"\x00\x00\x00\x01"
    back = decode_voters(raw)
    assert back.ids == {1, 2}
    assert back.directory_ids == {1: DIR1, 2: DIR2}
    assert back.addresses[2] == VoterAddress(2, "::1", 19093, "CTRL")
    assert decode_kraft_version(encode_kraft_version(1)) == 1


@pytest.mark.parametrize("cut", [1, 3, 10, 25])
def test_truncated_voters_record_is_refused(cut: int) -> None:
    raw = encode_voters(VoterSet(frozenset({1}), {1: VoterAddress(1, "h", 1)}, {1: DIR1}))
    with pytest.raises(InvalidVoters):
        decode_voters(raw[:cut])


def test_huge_count_is_refused() -> None:
    with pytest.raises(InvalidVoters):
        decode_voters(b"\x00\x00\xff\xff\xff\x0f")


def test_history_follows_appends_and_truncations() -> None:
    base = VoterSet.of(1)
    history = VoterHistory(base)
    assert history.kraft_version == 0 and history.last_offset == -1
    two = VoterSet(frozenset({1, 2}), {}, {1: DIR1, 2: DIR2})
    history.add_entries([(4, KRAFT_VERSION, encode_kraft_version(1)),
                         (7, KRAFT_VOTERS, encode_voters(two))])
    assert history.kraft_version == 1
    assert history.latest().ids == {1, 2} and history.at(6).ids == {1}
    history.truncate(7)
    assert history.latest() is base and history.last_offset == -1
