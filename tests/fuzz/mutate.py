"""Structure-aware mutations of recorded request frames.

Theory of operation
-------------------
Each corpus frame is parsed once (`Seed`): its request header, and with
`guard.length_fields` the offset, width and encoding of every length and
count in its body (the header's client_id length is one too); for Produce,
where each record batch sits. `Mutator.mutate(rng)` picks a seed and applies
one to three operations:

- ``length``: a length or count set to -1, 0, 1, its value +-1, 2**15-1,
  2**28, 2**31-1 or -2**31 (a compact varint is re-encoded, which can change
  the frame's size);
- ``batch``: bytes of a record batch flipped or overwritten from its
  attributes on, or its record count set to an edge value, and the CRC32C
  recomputed, so the broker's validation past the CRC is what is tested;
- ``header``: api version or key changed;
- ``bitflip``, ``overwrite``, ``int`` (an int32 anywhere set to an edge
  value: value fields such as num_partitions are counts too), ``truncate``,
  ``insert``, ``duplicate`` (a range copied elsewhere), ``delete`` (a range
  cut out).

The structure-aware operations (length, batch, header) come first, on the
seed's own layout; the blind ones follow. The 4-byte size prefix matches the
mutated body, except in ``SIZE_MUTATION_RATE`` of frames where it is set to
a wrong value too (``Mutant.size_consistent`` is then False).

Everything is drawn from the `random.Random` passed in, so a (seed, index)
pair gives the same frame on every machine: `frame_rng(seed, index)`.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from odradek.protocol import api
from odradek.protocol.framing import encode_uvarint, parse_request_header
from odradek.protocol.guard import Mark, decode_message, length_fields
from odradek.protocol.records import BATCH_OVERHEAD, parse_batch_header

SIZE_MUTATION_RATE = 0.05
# Lengths and counts a hostile client would try, besides the value +-1.
EDGE_LENGTHS = (-1, 0, 1, 2**15 - 1, 2**28, 2**31 - 1, -(2**31))
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF)
# Record batch layout (protocol/records.py): where the CRC sits, where the
# CRC'd part starts, where lastOffsetDelta and the record count are.
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
RECORDS_COUNT_AT = 57
MAX_INSERT_BYTES = 64
# Operation weights: (name, weight).
STRUCTURED_OPS = (("length", 40), ("batch", 12), ("header", 5))
BLIND_OPS = (("bitflip", 15), ("overwrite", 10), ("int", 8), ("truncate", 6), ("insert", 6),
             ("duplicate", 5), ("delete", 5))

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def frame_rng(seed: int, index: int) -> random.Random:
    """The generator for frame `index` of a run with `seed` (independent of order)."""
    return random.Random(seed * 0x1_0000_0001 + index)


@dataclass(slots=True)
class Seed:
    body: bytes  # the frame without its size prefix
    api_key: int
    api_version: int
    marks: list[Mark]  # lengths and counts, offsets into body
    batches: list[tuple[int, int]] = field(default_factory=list)  # (start, end) in body


@dataclass(slots=True)
class Mutant:
    wire: bytes  # size prefix + body, as sent
    size_consistent: bool
    seed_index: int
    ops: list[str]

    @property
    def api_key(self) -> int:
        return _I16.unpack_from(self.wire, 4)[0] if len(self.wire) >= 6 else -1


def parse_seed(frame: bytes) -> Seed:
    """A corpus frame (size-prefixed) with its length marks and batch positions."""
    body = frame[4:]
    header = parse_request_header(body)
    marks: list[Mark] = [(8, 2, "int16")]  # the header's client_id length
    batches: list[tuple[int, int]] = []
    if api.is_supported(header.api_key, header.api_version):
        cls = api.request_class(header.api_key, header.api_version)
        marks += length_fields(cls, body, header.body_offset)
        if header.api_key == api.ApiKey.PRODUCE:
            batches = _batch_spans(cls, body, header.body_offset)
    return Seed(body, header.api_key, header.api_version, marks, batches)


def _batch_spans(cls: object, body: bytes, offset: int) -> list[tuple[int, int]]:
    req = decode_message(cls, body, offset)
    spans = []
    search_from = offset
    for topic in req.topic_data:
        for pd in topic.partition_data:
            records = pd.records or b""
            at = body.find(records, search_from)
            if at < 0 or not records:
                continue
            search_from = at + len(records)
            pos = 0
            while len(records) - pos >= BATCH_OVERHEAD:
                size = parse_batch_header(records, pos).size
                spans.append((at + pos, at + pos + size))
                pos += size
    return spans


def _pick(rng: random.Random, ops: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([name for name, _ in ops], [w for _, w in ops])[0]


def _edge_value(rng: random.Random, original: int) -> int:
    choice = rng.randrange(len(EDGE_LENGTHS) + 2)
    if choice == len(EDGE_LENGTHS):
        return original - 1
    if choice == len(EDGE_LENGTHS) + 1:
        return original + 1
    return EDGE_LENGTHS[choice]


def _set_length(rng: random.Random, body: bytearray, mark: Mark) -> str:
    pos, width, kind = mark
    if kind == "int16":
        old = _I16.unpack_from(body, pos)[0]
        new = max(-(2**15), min(2**15 - 1, _edge_value(rng, old)))
        _I16.pack_into(body, pos, new)
    elif kind == "int32":
        old = _I32.unpack_from(body, pos)[0]
        new = max(-(2**31), min(2**31 - 1, _edge_value(rng, old)))
        _I32.pack_into(body, pos, new)
    else:  # a compact length: uvarint of n + 1, 0 = null
        old = 0
        for i in range(width):
            old |= (body[pos + i] & 0x7F) << (7 * i)
        old -= 1
        new = _edge_value(rng, old)
        body[pos:pos + width] = encode_uvarint(max(new + 1, 0) & 0xFFFFFFFF)
    return f"length@{pos}:{old}->{new}"


def _mutate_batch(rng: random.Random, body: bytearray, start: int, end: int) -> str:
    """Damage a record batch past its CRC, then make the CRC match again."""
    if end > len(body) or end - start < BATCH_OVERHEAD:
        return "batch:skipped"
    what = rng.randrange(4)
    if what == 0:
        at = RECORDS_COUNT_AT if rng.random() < 0.7 else LAST_OFFSET_DELTA_AT
        _I32.pack_into(body, start + at, _edge_value(rng, _I32.unpack_from(body, start + at)[0]))
        desc = f"batch-count@{start + at}"
    elif what == 1 and end - start > BATCH_OVERHEAD:  # inside the records
        pos = rng.randrange(start + BATCH_OVERHEAD, end)
        body[pos] ^= 1 << rng.randrange(8)
        desc = f"batch-recflip@{pos}"
    elif what == 2:
        pos = rng.randrange(start + ATTRIBUTES_AT, end)
        body[pos] = rng.choice(INTERESTING_BYTES)
        desc = f"batch-byte@{pos}"
    else:
        for _ in range(rng.randrange(1, 5)):
            pos = rng.randrange(start + ATTRIBUTES_AT, end)
            body[pos] ^= 1 << rng.randrange(8)
        desc = f"batch-flips@{start}"
    crc = crc32c(bytes(body[start + ATTRIBUTES_AT:end]))
    struct.pack_into(">I", body, start + CRC_AT, crc)
    return desc


def _structured(rng: random.Random, seed: Seed, body: bytearray, op: str) -> str:
    if op == "batch" and seed.batches:
        start, end = rng.choice(seed.batches)
        return _mutate_batch(rng, body, start, end)
    if op == "header":
        if rng.random() < 0.7:
            top = api.SUPPORTED_VERSIONS.get(seed.api_key, (0, 17))[1]
            new = rng.randrange(-1, top + 3)
            _I16.pack_into(body, 2, new)
            return f"version:{new}"
        new = rng.randrange(-1, 80)
        _I16.pack_into(body, 0, new)
        return f"key:{new}"
    mark = rng.choice(seed.marks)
    return _set_length(rng, body, mark)


def _blind(rng: random.Random, body: bytearray, op: str) -> str:
    n = len(body)
    if n == 0:
        body += rng.randbytes(rng.randrange(1, 16))
        return "fill"
    if op == "bitflip":
        flips = rng.randrange(1, 5)
        for _ in range(flips):
            body[rng.randrange(n)] ^= 1 << rng.randrange(8)
        return f"bitflip*{flips}"
    if op == "overwrite":
        pos = rng.randrange(n)
        k = min(rng.randrange(1, 9), n - pos)
        if rng.random() < 0.5:
            body[pos:pos + k] = rng.randbytes(k)
        else:
            body[pos:pos + k] = bytes([rng.choice(INTERESTING_BYTES)]) * k
        return f"overwrite@{pos}+{k}"
    if op == "int" and n >= 4:  # a count or size in a value field (num_partitions 2**31-1)
        pos = rng.randrange(n - 3)
        value = rng.choice(EDGE_LENGTHS)
        _I32.pack_into(body, pos, max(-(2**31), min(2**31 - 1, value)))
        return f"int@{pos}:{value}"
    if op == "truncate":
        pos = rng.randrange(n)
        del body[pos:]
        return f"truncate@{pos}"
    if op == "insert":
        pos = rng.randrange(n + 1)
        body[pos:pos] = rng.randbytes(rng.randrange(1, MAX_INSERT_BYTES))
        return f"insert@{pos}"
    a = rng.randrange(n)
    b = rng.randrange(a, min(n, a + 256) + 1)
    if op == "duplicate":
        at = rng.randrange(n + 1)
        body[at:at] = body[a:b]
        return f"duplicate[{a}:{b}]@{at}"
    del body[a:b]
    return f"delete[{a}:{b}]"


class Mutator:
    def __init__(self, frames: list[bytes]) -> None:
        self.seeds = [parse_seed(f) for f in frames]
        if not self.seeds:
            raise ValueError("an empty corpus")

    def mutate(self, rng: random.Random) -> Mutant:
        index = rng.randrange(len(self.seeds))
        seed = self.seeds[index]
        body = bytearray(seed.body)
        ops = []
        count = rng.choices((1, 2, 3), (6, 3, 1))[0]
        if rng.random() < 0.6:
            ops.append(_structured(rng, seed, body, _pick(rng, STRUCTURED_OPS)))
            count -= 1
        for _ in range(count):
            ops.append(_blind(rng, body, _pick(rng, BLIND_OPS)))
        size = len(body)
        consistent = rng.random() >= SIZE_MUTATION_RATE
        if not consistent:
            size = rng.choice((size - 1, size + 1, size + rng.randrange(1, 1000),
                               rng.randrange(size + 1), -1, 0, 2**31 - 1, 2**28))
            ops.append(f"size:{size}")
        return Mutant(_I32.pack(size) + bytes(body), consistent, index, ops)
