"""The fuzzer's mutator (tests/fuzz/mutate.py): deterministic, aimed, replayable."""

from __future__ import annotations

import random
import struct

from crc32c import crc32c

from tests.fuzz.corpus import CORPUS_PATH, frame_api, read_frames, split_frames
from tests.fuzz.mutate import CRC_AT, EDGE_LENGTHS, Mutator, _set_length, frame_rng, parse_seed

CORPUS = read_frames(CORPUS_PATH)


def test_corpus_is_small_and_covers_the_clients_apis() -> None:
    assert CORPUS_PATH.stat().st_size < 1024 * 1024
    apis = {frame_api(f) for f in CORPUS}
    keys = {k for k, _ in apis}
    # produce, fetch, list offsets, metadata, groups classic and KIP-848, txns, admin
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18, 19, 20, 22, 24, 26, 32, 68} <= keys
    assert len(apis) >= 40


def test_same_seed_and_index_give_the_same_frame() -> None:
    m = Mutator(CORPUS)
    for i in range(200):
        a, b = m.mutate(frame_rng(99, i)), m.mutate(frame_rng(99, i))
        assert a.wire == b.wire and a.ops == b.ops
    assert len({m.mutate(frame_rng(99, i)).wire for i in range(200)}) > 150


def test_size_prefix_matches_the_body_unless_the_size_was_mutated() -> None:
    m = Mutator(CORPUS)
    mutants = [m.mutate(frame_rng(3, i)) for i in range(2000)]
    for x in mutants:
        if x.size_consistent:
            assert struct.unpack_from(">i", x.wire)[0] == len(x.wire) - 4
    inconsistent = sum(not x.size_consistent for x in mutants)
    assert 40 < inconsistent < 200  # about SIZE_MUTATION_RATE


def test_length_mutations_hit_guard_marks_with_edge_values() -> None:
    seed = next(parse_seed(f) for f in CORPUS if frame_api(f) == (19, 4))  # CreateTopics v4
    int32_marks = [mk for mk in seed.marks if mk[2] == "int32"]
    assert int32_marks
    rng = random.Random(1)
    seen = set()
    for _ in range(300):
        body = bytearray(seed.body)
        _set_length(rng, body, int32_marks[0])
        seen.add(struct.unpack_from(">i", body, int32_marks[0][0])[0])
    assert set(EDGE_LENGTHS) <= seen


def test_batch_mutations_keep_the_crc_right() -> None:
    m = Mutator(CORPUS)
    checked = 0
    for i in range(3000):
        x = m.mutate(frame_rng(5, i))
        if len(x.ops) != 1 or not x.ops[0].startswith("batch-") or not x.size_consistent:
            continue
        seed = m.seeds[x.seed_index]
        for start, end in seed.batches:
            body = x.wire[4:]
            stored = struct.unpack_from(">I", body, start + CRC_AT)[0]
            assert stored == crc32c(body[start + 21:end])
            checked += 1
    assert checked > 50


def test_split_frames_round_trips_and_keeps_a_partial_tail() -> None:
    frames = [struct.pack(">i", 3) + b"abc", struct.pack(">i", 0)]
    assert split_frames(b"".join(frames)) == frames
    assert split_frames(b"".join(frames) + b"\x00\x00") == [*frames, b"\x00\x00"]


def _unregister_frame(broker_id: int) -> bytes:
    # UnregisterBroker v0 (flexible): header v2, then broker_id and no tagged fields
    body = struct.pack(">hhih", 64, 0, 7, 4) + b"fuzz" + b"\x00" + struct.pack(">i", broker_id)
    return struct.pack(">i", len(body) + 1) + body + b"\x00"


def test_an_unregister_of_the_fuzzed_broker_itself_is_not_sent() -> None:
    from tests.fuzz.corpus import FUZZ_NODE_ID
    from tests.fuzz.mutate import Mutant
    from tests.fuzz.runner import _unregisters_self

    def mutant(wire: bytes) -> Mutant:
        return Mutant(wire=wire, size_consistent=True, seed_index=0, ops=[])

    assert _unregisters_self(mutant(_unregister_frame(FUZZ_NODE_ID)))
    assert not _unregisters_self(mutant(_unregister_frame(FUZZ_NODE_ID + 1)))
    # a malformed one is sent: the broker must answer it like any other bad frame
    assert not _unregisters_self(mutant(_unregister_frame(FUZZ_NODE_ID)[:-3]))
